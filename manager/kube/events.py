"""Kubernetes Events, recorded as client-go's EventRecorder records them, and never in the way.

What ``kubectl describe`` and ``kubectl get events`` show is what this writes: core/v1 Events
(the API controller-runtime's ``GetEventRecorderFor`` writes through, which is what upstream
Kueue uses), with ``count`` and ``lastTimestamp`` for repeats. Before an Event is written it
goes through the same three steps as client-go's correlator (tools/record/events_cache.go):

1. **Aggregation**: once ten Events with the same object, type and reason but different
   messages arrive within ten minutes, the tenth and later become one Event whose message
   starts "(combined from similar events): " and whose count grows.
2. **Deduplication**: an Event equal to one already written (same object, type, reason and
   message) raises that Event's count with a patch instead of creating another object.
3. **Spam filter**, per object and source: a token bucket of 25 that refills one token every
   five minutes. An object that keeps producing Events is quietly capped.

kfed adds a **global rate limit** (a token bucket for the whole process, one for routine
Events, Normal ones and the ``Pending`` Warnings a backlog brings, and one for alerts, the
other Warnings, so that a flood of routine Events never hides a Failover), so that a burst
of a thousand jobs costs the API server a bounded number of Event writes per second
whatever the per-object limits allow. ``record`` never waits: it correlates, takes a token, and puts
the write on a bounded queue that ``run`` drains; whatever cannot be written (no token, a
full queue, an API error) is dropped and counted, since an Event informs and must never
hold up the reconcile that reported it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import zlib
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Generic, Literal, Protocol, TypeVar

from manager.api import constants as C
from manager.api.view import at
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj

log = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")

EventType = Literal["Normal", "Warning"]
DropReason = Literal["spam", "rate", "queue", "error"]
"""Why an Event was not written: its object's spam filter, the global rate limit, a full
write queue, or the API server refused it."""

AGGREGATED_PREFIX = "(combined from similar events): "
MESSAGE_LIMIT = 1024
"""client-go truncates an Event's message to 1 KiB (the events.k8s.io ``note`` limit)."""


@dataclass(frozen=True, slots=True)
class EventSettings:
    spam_burst: int = 25
    spam_refill_seconds: float = 300.0
    """client-go's spam filter: 25 Events per object and source, then one per 5 minutes."""
    aggregate_max: int = 10
    aggregate_window_seconds: float = 600.0
    """client-go's aggregator: 10 different messages for one (object, type, reason) in 10
    minutes, then they are combined."""
    cache_size: int = 4096
    """Objects (and message keys) remembered by each correlator step, least recently used
    forgotten first (client-go's maxLruCacheEntries)."""
    global_qps: float = 10.0
    global_burst: int = 100
    """Event writes per second for the whole process, after a burst, for routine Events
    and for alerts each (ControllerSettings says why these defaults)."""
    routine_warnings: frozenset[str] = C.PENDING_REASONS
    """Warnings that come in floods as a matter of course (a backlog's "why it waits":
    ``Pending``, or v0.19's finer reasons such as ``WaitingForQuota``) and so share the routine
    budget: they must never use up the one a Failover or a lost worker is told from."""
    queue_size: int = 1000
    write_concurrency: int = 4
    """Writers at once. Each Event's writes go to one writer, in order (as client-go's one
    recording goroutine), so that a repeat's count never lands before the Event itself."""


class TokenBucket:
    """``burst`` tokens, refilled at ``rate`` per second; ``take`` never waits."""

    __slots__ = ("_at", "_tokens", "burst", "rate")

    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate = rate
        self.burst = float(burst)
        self._tokens = float(burst)
        self._at = now

    def take(self, now: float) -> bool:
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True


class _Lru(Generic[K, V]):
    """A dict that forgets its least recently used entries beyond ``size``."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


@dataclass(slots=True)
class _Similar:
    """Messages seen for one (object, type, reason) in the current aggregation window."""

    messages: set[str] = field(default_factory=set)
    last: float = 0.0


@dataclass(slots=True)
class _Written:
    """An Event already written: the next identical one raises its count."""

    name: str
    namespace: str
    count: int
    first_timestamp: str


@dataclass(frozen=True, slots=True)
class EventWrite:
    """One write the recorder queued: a new Event, or a repeat's count on an existing one."""

    namespace: str
    name: str
    body: Obj
    repeat: bool


def reference(obj: Obj) -> Obj:
    """The ``involvedObject`` of an Event about ``obj`` (an object read from the API)."""
    meta = at(obj, "metadata")
    ref: Obj = {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "name": meta.get("name", ""),
    }
    for source, target in (
        ("namespace", "namespace"),
        ("uid", "uid"),
        ("resourceVersion", "resourceVersion"),
    ):
        if meta.get(source):
            ref[target] = meta[source]
    return ref


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventSink(Protocol):
    """Where an Event is told: the recorder itself, or a door that writes through it
    (``StatusWrites``), so a reader of a component sees every one of its writes in one place."""

    def normal(self, obj: Obj, reason: str, message: str) -> None: ...

    def warning(self, obj: Obj, reason: str, message: str) -> None: ...


class EventRecorder:
    def __init__(
        self,
        api: KubeApi | None,
        *,
        component: str,
        instance: str | None = None,
        settings: EventSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        on_written: Callable[[str], None] | None = None,
        on_dropped: Callable[[DropReason], None] | None = None,
    ) -> None:
        """``api`` None: record nothing (a controller run without an API server to write
        to, as in unit tests). ``component`` is the reporting controller (``source.component``,
        ``reportingComponent``); ``instance`` this process (the host name by default)."""
        self.api = api
        self.component = component
        self.instance = instance or socket.gethostname()
        self.settings = settings or EventSettings()
        self._clock = clock
        self._wall = wall
        self._on_written = on_written
        self._on_dropped = on_dropped
        size = self.settings.cache_size
        self._spam: _Lru[tuple[str, ...], TokenBucket] = _Lru(size)
        self._similar: _Lru[tuple[str, ...], _Similar] = _Lru(size)
        self._written: _Lru[tuple[str, ...], _Written] = _Lru(size)
        # Two budgets: routine Events (Normal ones, and Warnings that come by the thousand
        # with a backlog) never use up the one alerts are written from.
        self._routine = TokenBucket(self.settings.global_qps, self.settings.global_burst, clock())
        self._alerts = TokenBucket(self.settings.global_qps, self.settings.global_burst, clock())
        writers = max(1, self.settings.write_concurrency)
        self._queues: list[asyncio.Queue[EventWrite]] = [
            asyncio.Queue(max(1, self.settings.queue_size // writers)) for _ in range(writers)
        ]
        self.written: Counter[str] = Counter()
        """Writes that landed, by verb (``create``, ``patch``)."""
        self.dropped: Counter[DropReason] = Counter()

    # -- recording (synchronous, never waits) ------------------------------------------

    def normal(self, obj: Obj, reason: str, message: str) -> None:
        self.record(obj, "Normal", reason, message)

    def warning(self, obj: Obj, reason: str, message: str) -> None:
        self.record(obj, "Warning", reason, message)

    def record(self, obj: Obj, type_: EventType, reason: str, message: str) -> None:
        """Correlate and queue one Event about ``obj``; drops (and counts) what it cannot
        write."""
        if self.api is None:
            return
        write = self.correlate(reference(obj), type_, reason, message[:MESSAGE_LIMIT])
        if write is None:
            return
        routine = type_ == "Normal" or reason in self.settings.routine_warnings
        if not (self._routine if routine else self._alerts).take(self._clock()):
            self._drop("rate")
            return
        try:
            self._queues[zlib.crc32(write.name.encode()) % len(self._queues)].put_nowait(write)
        except asyncio.QueueFull:
            self._drop("queue")

    def correlate(self, ref: Obj, type_: EventType, reason: str, message: str) -> EventWrite | None:
        """client-go's EventCorrelate: aggregation, then deduplication, then the spam filter.
        None when the spam filter drops the Event (its count is still raised, so the next
        one written carries the true count)."""
        now = self._clock()
        obj_key = (
            ref.get("kind", ""),
            ref.get("namespace", ""),
            ref.get("name", ""),
            ref.get("uid", ""),
            ref.get("apiVersion", ""),
        )
        similar_key: tuple[str, ...] = (self.component, self.instance, *obj_key, type_, reason)
        similar = self._similar.get(similar_key)
        if similar is None or now - similar.last > self.settings.aggregate_window_seconds:
            similar = _Similar()
            self._similar.put(similar_key, similar)
        similar.last = now
        similar.messages.add(message)
        if len(similar.messages) >= self.settings.aggregate_max:
            message = AGGREGATED_PREFIX + message
            written_key: tuple[str, ...] = similar_key  # further variants raise one count
        else:
            written_key = (*similar_key, message)

        stamp = _timestamp(self._wall())
        seen = self._written.get(written_key)
        if seen is not None:
            seen.count += 1
            write = self._event(ref, type_, reason, message, seen, stamp, repeat=True)
        else:
            namespace = ref.get("namespace") or "default"
            seen = _Written(f"{ref.get('name', '')}.{time.time_ns():x}", namespace, 1, stamp)
            self._written.put(written_key, seen)
            write = self._event(ref, type_, reason, message, seen, stamp, repeat=False)

        spam_key = (self.component, self.instance, *obj_key, type_)
        bucket = self._spam.get(spam_key)
        if bucket is None:
            refill = 1.0 / self.settings.spam_refill_seconds
            bucket = TokenBucket(refill, self.settings.spam_burst, now)
            self._spam.put(spam_key, bucket)
        if not bucket.take(now):
            self._drop("spam")
            return None
        return write

    def _event(
        self,
        ref: Obj,
        type_: EventType,
        reason: str,
        message: str,
        seen: _Written,
        stamp: str,
        *,
        repeat: bool,
    ) -> EventWrite:
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": seen.name, "namespace": seen.namespace},
            "involvedObject": ref,
            "type": type_,
            "reason": reason,
            "message": message,
            "source": {"component": self.component, "host": self.instance},
            "firstTimestamp": seen.first_timestamp,
            "lastTimestamp": stamp,
            "count": seen.count,
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
        }
        return EventWrite(seen.namespace, seen.name, body, repeat=repeat)

    def _drop(self, why: DropReason) -> None:
        self.dropped[why] += 1
        if self._on_dropped is not None:
            self._on_dropped(why)

    # -- writing (the background task) ---------------------------------------------

    @property
    def backlog(self) -> int:
        return sum(q.qsize() for q in self._queues)

    async def run(self) -> None:
        """Write what was recorded, a few at a time, until cancelled."""
        if self.api is None:
            return
        await asyncio.gather(*(self._writer(q) for q in self._queues))

    async def flush(self, timeout: float = 10.0) -> None:
        """Wait (bounded) until every queued Event was written or dropped (tests, shutdown)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                for queue in self._queues:
                    await queue.join()

    async def _writer(self, queue: asyncio.Queue[EventWrite]) -> None:
        while True:
            write = await queue.get()
            try:
                await self._write(write)
            finally:
                queue.task_done()

    async def _write(self, write: EventWrite) -> None:
        assert self.api is not None
        try:
            if write.repeat:
                body = write.body
                patch = {k: body[k] for k in ("count", "lastTimestamp", "message")}
                try:
                    await self.api.patch(R.EVENTS, write.name, patch, write.namespace)
                    self._landed("patch")
                    return
                except errors.NotFound:
                    pass  # never written (spam-filtered) or expired: create it, as client-go
            await self.api.create(R.EVENTS, write.body, write.namespace)
            self._landed("create")
        except (errors.KubeError, TimeoutError) as err:
            log.debug("event %s/%s not written: %s", write.namespace, write.name, err)
            self._drop("error")

    def _landed(self, verb: str) -> None:
        self.written[verb] += 1
        if self._on_written is not None:
            self._on_written(verb)
