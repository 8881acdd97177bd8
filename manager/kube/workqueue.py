"""A work queue of object keys, as controllers use it (after client-go's workqueue):

- a key waits in the queue at most once, however many events named it;
- a key is never processed by two workers at once: added while in flight, it is queued again
  when its worker finishes;
- ``add_after`` delays a key (timers: requeue after N seconds), keeping the earliest time;
- ``retry`` re-adds a failed key after a jittered exponential backoff of its own, which
  ``forget`` resets once the key succeeds.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections import deque

from manager.kube.backoff import Backoff
from manager.kube.tasks import wait_event


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

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, key: str) -> None:
        if self._closed:
            return
        if key in self._in_flight:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.append(key)
            self._wakeup.set()

    def add_after(self, key: str, delay: float) -> None:
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
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        self._backoffs.pop(key, None)

    def failures(self, key: str) -> int:
        backoff = self._backoffs.get(key)
        return backoff.failures if backoff else 0

    async def get(self) -> str:
        """Wait for the next key and mark it in flight; call ``done(key)`` afterwards."""
        while True:
            self._promote_due()
            if self._queue:
                key = self._queue.popleft()
                self._queued.discard(key)
                self._in_flight.add(key)
                return key
            if self._closed:
                raise QueueClosed(self.name)
            self._wakeup.clear()
            timeout = self._delayed[0][0] - time.monotonic() if self._delayed else None
            await wait_event(self._wakeup, timeout)

    def done(self, key: str) -> None:
        self._in_flight.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()

    def _promote_due(self) -> None:
        now = time.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            due, _, key = heapq.heappop(self._delayed)
            if self._due.get(key) == due:
                del self._due[key]
                self.add(key)


class QueueClosed(Exception):
    """The queue was closed: workers stop."""
