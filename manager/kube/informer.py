"""An informer: a local cache of one kind of object kept current by list-then-watch.

The loop, after kopf and client-go:

1. list everything (retried with backoff while the server is unreachable), diff it against
   the cache and emit the differences as events, so consumers see deletions that happened
   while nobody watched;
2. watch from the list's resourceVersion with bookmarks on; a bookmark only moves the
   resourceVersion forward; when the server ends the stream (its timeout), watch again from
   the last resourceVersion;
3. on 410 Gone, list again at once; on any other failure, mark the informer disconnected,
   wait a jittered, capped backoff and list again.

Handlers run in event order, one at a time, and must not block for long: they typically put a
key on a work queue.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from manager.api.view import at
from manager.kube import errors
from manager.kube.api import KubeApi, Obj
from manager.kube.backoff import Backoff
from manager.kube.resources import Resource, key_of
from manager.kube.tasks import stop_tasks

log = logging.getLogger(__name__)

EventType = Literal["ADDED", "MODIFIED", "DELETED"]


@dataclass(frozen=True, slots=True)
class Event:
    type: EventType
    key: str
    obj: Obj
    old: Obj | None = None


Handler = Callable[[Event], Awaitable[None] | None]
IndexFunc = Callable[[Obj], list[str]]
"""The values an object is filed under in one index (client-go's ``IndexFunc``)."""


@dataclass
class InformerStats:
    lists: int = 0
    watches: int = 0
    bookmarks: int = 0
    gone: int = 0
    errors: int = 0
    last_error: str | None = None
    connected: bool = False
    disconnected_since: float | None = None


class Informer:
    def __init__(
        self,
        api: KubeApi,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        watch_timeout: int = 290,
        backoff: Backoff | None = None,
    ) -> None:
        self.api = api
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.watch_timeout = watch_timeout
        self.backoff = backoff or Backoff()
        self.cache: dict[str, Obj] = {}
        self.synced = asyncio.Event()
        self.stats = InformerStats()
        self._handlers: list[Handler] = []
        self._resource_version = ""
        self._index_funcs: dict[str, IndexFunc] = {}
        self._unseen: set[str] = set()
        """Keys whose cached copy is our own write (``remember_written``), not yet seen from
        the server: the handlers have had no event for that version. A watch event always
        brings one; a re-list (after an outage) must too, even at the same resourceVersion,
        or a Workload created while the watch was down is never reconciled."""
        self._indices: dict[str, dict[str, set[str]]] = {}

    def __repr__(self) -> str:
        return f"<Informer {self.api.name}/{self.resource.plural}>"

    def subscribe(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def get(self, key: str) -> Obj | None:
        return self.cache.get(key)

    def items(self) -> list[Obj]:
        return list(self.cache.values())

    # -- indices: find objects by a derived value without scanning the cache ----------------

    def add_index(self, name: str, func: IndexFunc) -> None:
        """File every object under ``func(obj)`` in index ``name``, kept in step with the
        cache (as client-go's Indexer); add indices before the informer runs."""
        self._index_funcs[name] = func
        index = self._indices[name] = {}
        for key, obj in self.cache.items():
            for value in func(obj):
                index.setdefault(value, set()).add(key)

    def by_index(self, name: str, value: str) -> list[Obj]:
        """The cached objects filed under ``value`` in index ``name``, in key order."""
        keys = self._indices[name].get(value) or set()
        return [self.cache[k] for k in sorted(keys) if k in self.cache]

    def _store(self, key: str, obj: Obj) -> Obj | None:
        share_strings(strip_unread(obj))
        old = self.cache.get(key)
        self.cache[key] = obj
        if self._index_funcs:
            self._unfile(key, old)
            for name, func in self._index_funcs.items():
                for value in func(obj):
                    self._indices[name].setdefault(value, set()).add(key)
        return old

    def _drop(self, key: str) -> Obj | None:
        old = self.cache.pop(key, None)
        self._unfile(key, old)
        return old

    def _unfile(self, key: str, old: Obj | None) -> None:
        if old is None:
            return
        for name, func in self._index_funcs.items():
            index = self._indices[name]
            for value in func(old):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]

    def remember_written(self, key: str, base: Obj | None, written: Obj) -> bool:
        """Put an object we just wrote into the cache ahead of its watch event, unless an
        event replaced ``base`` (what the write was computed from) meanwhile: that event is
        our own write's or a newer one, and must not be overwritten with an older copy."""
        if self.cache.get(key) is not base:
            return False
        self._store(key, written)
        self._unseen.add(key)
        return True

    async def run(self) -> None:
        """Run until cancelled. Never raises for API trouble: it reports it in ``stats``."""
        while True:
            try:
                await self._list()
                self.backoff.reset()
                await self._watch_until_gone()
            except errors.KubeError as err:
                self._disconnected(err)
                delay = self.backoff.next_delay()
                log.info("%r: %s; listing again in %.2fs", self, err, delay)
                await asyncio.sleep(delay)
            except Exception as err:  # never let a surprise end the watch for good
                self._disconnected(err)
                delay = self.backoff.next_delay()
                log.exception(
                    "%r: unexpected %s; listing again in %.2fs", self, type(err).__name__, delay
                )
                await asyncio.sleep(delay)

    def _disconnected(self, err: Exception) -> None:
        self.stats.errors += 1
        self.stats.last_error = str(err)
        if self.stats.connected or self.stats.disconnected_since is None:
            self.stats.disconnected_since = time.monotonic()
        self.stats.connected = False

    async def _list(self) -> None:
        listing = await self.api.list(
            self.resource, self.namespace, label_selector=self.label_selector
        )
        self.stats.lists += 1
        self.stats.connected = True
        self.stats.disconnected_since = None
        self._resource_version = listing["metadata"]["resourceVersion"]
        fresh = {key_of(obj): _with_kind(obj, self.resource) for obj in listing["items"]}
        for key in [k for k in self.cache if k not in fresh]:
            self._unseen.discard(key)
            gone = self._drop(key)
            assert gone is not None
            await self._emit(Event("DELETED", key, gone))
        for key, obj in fresh.items():
            old = self._store(key, obj)
            unseen = key in self._unseen
            self._unseen.discard(key)
            if old is None:
                await self._emit(Event("ADDED", key, obj))
            elif unseen or _rv(old) != _rv(obj):
                await self._emit(Event("MODIFIED", key, obj, old))
        self.synced.set()

    async def _watch_until_gone(self) -> None:
        while True:
            # Spread re-watches of many informers over time.
            timeout = int(self.watch_timeout * random.uniform(0.9, 1.0))
            self.stats.watches += 1
            try:
                async for raw in self.api.watch(
                    self.resource,
                    self.namespace,
                    resource_version=self._resource_version,
                    timeout_seconds=timeout,
                    label_selector=self.label_selector,
                ):
                    await self._apply(raw)
            except errors.Gone:
                self.stats.gone += 1
                log.info(
                    "%r: resourceVersion %s is too old; listing again", self, self._resource_version
                )
                return

    async def _apply(self, raw: dict[str, Any]) -> None:
        kind, obj = raw.get("type"), raw.get("object") or {}
        rv = at(obj, "metadata").get("resourceVersion")
        if kind == "BOOKMARK":
            self.stats.bookmarks += 1
            if rv:
                self._resource_version = rv
            return
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            log.warning("%r: ignoring watch event of type %r", self, kind)
            return
        obj = _with_kind(obj, self.resource)
        key = key_of(obj)
        if rv:
            self._resource_version = rv
        self._unseen.discard(key)
        if kind == "DELETED":
            old = self._drop(key)
            await self._emit(Event("DELETED", key, obj, old))
        else:
            old = self._store(key, obj)
            await self._emit(Event("ADDED" if old is None else "MODIFIED", key, obj, old))

    async def _emit(self, event: Event) -> None:
        for handler in self._handlers:
            try:
                result = handler(event)
                if result is not None:
                    await result
            except Exception:  # a handler bug must not kill the watch
                log.exception(
                    "%r: handler %r failed on %s %s", self, handler, event.type, event.key
                )


UNREAD_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
"""Annotations no part of kfed reads: kubectl's copy of the whole object as last applied."""


def strip_unread(obj: Obj) -> Obj:
    """Drop, in place, what kfed never reads before an object is cached (client-go's
    ``TransformFunc``; upstream Kueue strips ``managedFields`` the same way): the field
    managers' records, often the largest part of a Workload that several controllers write,
    and kubectl's last-applied copy, as large as the object itself. A write computed from a
    stripped object loses neither: the API server keeps ``managedFields`` that an update
    leaves out, and kfed never applies with kubectl."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            for name in UNREAD_ANNOTATIONS:
                annotations.pop(name, None)
    return obj


SHARED_STRING_MAX = 64
"""Strings up to this length are shared between cached objects (keys, names, labels, images,
quantities); longer ones are rarely repeated."""


def share_strings(value: Any) -> Any:
    """Make equal keys and short strings of a cached object the same string objects as every
    other's (``sys.intern``), in place. The JSON decoder makes fresh strings for each
    document, so 10,000 pending Jobs held 10,000 copies of "metadata", "containers", "Never"
    and their queue's name: sharing them halves what the informers keep per object
    (docs/performance.md, "Memory per pending workload"). It runs on every event of every
    informer: nested dicts and lists are rebuilt by comprehensions (17 us for a 1.4 kB
    Workload, where walking them in place took 28 and decoding takes 9); only the top-level
    dict, which the caller holds, is refilled in place."""
    if isinstance(value, dict):
        shared = _shared(value)
        value.clear()  # the same dict: the caller and the cache hold it
        value.update(shared)
        return value
    if isinstance(value, list):
        value[:] = _shared(value)
        return value
    return _shared(value)


def _shared(value: Any, intern: Any = sys.intern) -> Any:
    # A dict keeps the key object it was first given: keys are shared by building anew.
    kind = type(value)
    if kind is str:
        return intern(value) if len(value) <= SHARED_STRING_MAX else value
    if kind is dict:
        return {
            (intern(k) if len(k) <= SHARED_STRING_MAX else k): _shared(v) for k, v in value.items()
        }
    if kind is list:
        return [_shared(v) for v in value]
    return value


def _rv(obj: Obj) -> str:
    return str(at(obj, "metadata").get("resourceVersion", ""))


def _with_kind(obj: Obj, resource: Resource) -> Obj:
    # List items carry no apiVersion/kind; watch objects do. Make both look the same.
    obj.setdefault("apiVersion", resource.api_version)
    obj.setdefault("kind", resource.kind)
    return obj


async def run_until_cancelled(*informers: Informer) -> None:
    tasks = [asyncio.create_task(i.run(), name=repr(i)) for i in informers]
    try:
        await asyncio.gather(*tasks)
    finally:
        await stop_tasks(tasks)
