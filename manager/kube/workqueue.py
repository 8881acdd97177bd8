"""A work queue of object keys, as controllers use it (after client-go's workqueue):

- a key waits in the queue at most once, however many events named it;
- a key is never processed by two workers at once: added while in flight, it is queued again
  when its worker finishes;
- ``add_after`` delays a key (timers: requeue after N seconds), keeping the earliest time;
- ``retry`` re-adds a failed key after a jittered exponential backoff of its own, which
  ``forget`` resets once the key succeeds.

It reports what client-go's work queue and controller-runtime's reconciler report, to the
process's ``instrument`` sink: adds, retries, time waited in the queue, and per processed
key its time and outcome (a ``retry`` while in flight: error; an ``add_after`` while in
flight: requeue_after, or requeue for no delay; else success). Depth, work in flight and
the longest-running key are read from ``live_queues()`` at scrape time.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
import weakref
from collections import deque
from dataclasses import dataclass

from manager.kube import instrument
from manager.kube.backoff import Backoff
from manager.kube.tasks import wait_event

_LIVE: weakref.WeakSet[WorkQueue] = weakref.WeakSet()


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    """A work queue's state for the ``workqueue_*`` gauges, at one moment."""

    name: str
    depth: int
    in_flight: int
    workers: int
    """Workers seen at once: in flight plus waiting in ``get`` (controller-runtime's
    ``max_concurrent_reconciles``, as far as the queue can see it)."""
    unfinished_seconds: float
    """Summed time the keys in flight have been processed so far."""
    longest_running_seconds: float


def live_queues() -> list[QueueSnapshot]:
    """Every open work queue of the process, by name."""
    now = time.monotonic()
    return sorted((q.snapshot(now) for q in list(_LIVE) if not q._closed), key=lambda s: s.name)


class WorkQueue:
    def __init__(
        self, *, name: str = "", backoff_initial: float = 0.05, backoff_cap: float = 30.0
    ) -> None:
        self.name = name
        self._queue: deque[str] = deque()
        self._queued: set[str] = set()
        self._in_flight: set[str] = set()
        self._dirty: set[str] = set()
        self._delayed: list[tuple[float, int, str]] = []
        self._due: dict[str, float] = {}
        self._seq = itertools.count()
        self._backoffs: dict[str, Backoff] = {}
        self._backoff_initial = backoff_initial
        self._backoff_cap = backoff_cap
        self._wakeup = asyncio.Event()
        self._closed = False
        self._added_at: dict[str, float] = {}
        self._started: dict[str, float] = {}
        self._outcome: dict[str, instrument.ReconcileResult] = {}
        self._getters = 0
        self._workers_seen = 0
        _LIVE.add(self)

    def snapshot(self, now: float | None = None) -> QueueSnapshot:
        now = time.monotonic() if now is None else now
        running = [now - t for t in self._started.values()]
        return QueueSnapshot(
            name=self.name,
            depth=len(self._queue),
            in_flight=len(self._in_flight),
            workers=self._workers_seen,
            unfinished_seconds=sum(running),
            longest_running_seconds=max(running, default=0.0),
        )

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, key: str) -> None:
        self._enqueue(key)

    def _enqueue(self, key: str) -> None:
        if self._closed:
            return
        if key in self._in_flight:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.append(key)
            self._added_at[key] = time.monotonic()
            self._wakeup.set()
            if (sink := instrument.sink()) is not None:
                sink.queue_added(self.name)

    def add_after(self, key: str, delay: float) -> None:
        if key in self._in_flight and not self._closed:
            self._outcome.setdefault(key, "requeue_after" if delay > 0 else "requeue")
        if delay <= 0:
            self.add(key)
            return
        due = time.monotonic() + delay
        if self._due.get(key, float("inf")) <= due:
            return
        self._due[key] = due
        heapq.heappush(self._delayed, (due, next(self._seq), key))
        self._wakeup.set()

    def retry(self, key: str) -> float:
        """Re-add a key whose processing failed, after its own backoff; returns the delay."""
        backoff = self._backoffs.setdefault(key, Backoff(self._backoff_initial, self._backoff_cap))
        delay = backoff.next_delay()
        if key in self._in_flight:
            self._outcome[key] = "error"
        if (sink := instrument.sink()) is not None and not self._closed:
            sink.queue_retried(self.name)
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        self._backoffs.pop(key, None)

    def failures(self, key: str) -> int:
        backoff = self._backoffs.get(key)
        return backoff.failures if backoff else 0

    async def get(self) -> str:
        """Wait for the next key and mark it in flight; call ``done(key)`` afterwards."""
        self._getters += 1
        self._workers_seen = max(self._workers_seen, self._getters + len(self._in_flight))
        try:
            while True:
                self._promote_due()
                if self._queue:
                    key = self._queue.popleft()
                    self._queued.discard(key)
                    self._in_flight.add(key)
                    now = time.monotonic()
                    self._started[key] = now
                    added = self._added_at.pop(key, None)
                    if added is not None and (sink := instrument.sink()) is not None:
                        sink.queue_waited(self.name, now - added)
                    return key
                if self._closed:
                    raise QueueClosed(self.name)
                self._wakeup.clear()
                timeout = self._delayed[0][0] - time.monotonic() if self._delayed else None
                await wait_event(self._wakeup, timeout)
        finally:
            self._getters -= 1

    def done(self, key: str) -> None:
        self._in_flight.discard(key)
        started = self._started.pop(key, None)
        outcome = self._outcome.pop(key, "success")
        if started is not None and (sink := instrument.sink()) is not None:
            sink.reconciled(self.name, outcome, time.monotonic() - started)
        if key in self._dirty:
            self._dirty.discard(key)
            self._enqueue(key)

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()

    def _promote_due(self) -> None:
        now = time.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            due, _, key = heapq.heappop(self._delayed)
            if self._due.get(key) == due:
                del self._due[key]
                self._enqueue(key)


class QueueClosed(Exception):
    """The queue was closed: workers stop."""
