"""Why pending workloads wait, written to their status (QuotaReserved=False with a reason and
a message, as Kueue writes it), off the admission path.

Every scheduling cycle may give a new reason to each head it looks at, and under load the same
workload gets a new message over and over ("... 3 available", then "... 1 available"). These
writes only inform people, and each costs the API server a write and every watcher an event,
so:

- the latest reason per workload wins: one waiting to be written is written once, with what
  is true when its turn comes;
- a few at a time and at most ``qps`` per second (after a burst), so that they never crowd
  out admissions and evictions, which are what the scheduler's progress depends on;
- a workload that got quota (or went away) meanwhile is skipped.
"""

from __future__ import annotations

import asyncio
import logging

from manager import core
from manager.controllers import eventreasons as told
from manager.controllers import workloadstatus as ws
from manager.controllers.state import ClusterState
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.pacing import Pacer
from manager.kube.update import patch_guarded
from manager.kube.workqueue import QueueClosed, WorkQueue

log = logging.getLogger(__name__)


class PendingStatusWriter:
    def __init__(self, state: ClusterState, *, concurrency: int, qps: float, burst: int) -> None:
        self.state = state
        self.concurrency = max(1, concurrency)
        self.queue = WorkQueue(name="pending-status")
        self._latest: dict[str, core.PendingReason] = {}
        self._pacer = Pacer(qps, burst)
        self.written = 0
        self.coalesced = 0

    def report(self, key: str, reason: core.PendingReason) -> None:
        if key in self._latest:
            self.coalesced += 1  # replaced before it was written
        self._latest[key] = reason
        self.queue.add(key)

    async def run(self) -> None:
        try:
            await asyncio.gather(*(self._worker() for _ in range(self.concurrency)))
        finally:
            self.queue.close()

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except QueueClosed:
                return
            try:
                await self._write(key)
            finally:
                self.queue.done(key)

    async def _write(self, key: str) -> None:
        reason = self._latest.pop(key, None)
        if reason is None:
            return
        if not self._still_pending(key):
            return
        delay = self._pacer.delay()
        if delay:
            await asyncio.sleep(delay)
            if not self._still_pending(key):
                return
        obj = self.state.workloads.get(key)
        if obj is None:
            return
        try:
            written = await patch_guarded(
                self.state.api,
                R.WORKLOADS,
                obj,
                lambda o: ws.pending(o, reason, fine=self.state.unadmitted_workloads_observability),
                subresource="status",
                attempts=2,
            )
        except errors.NotFound:
            return
        except errors.KubeError as err:
            log.debug("pending reason for %s not written (%s); trying again", key, err)
            self._latest.setdefault(key, reason)
            self.queue.retry(key)
            return
        if written is not None:
            self.written += 1
            told.pending(
                self.state.events,
                written,
                reason.message,
                reason.fine_reason if self.state.unadmitted_workloads_observability else None,
            )
            self.queue.forget(key)
            # So that an admission computed before this write's event arrives is guarded by
            # the new resourceVersion, instead of conflicting and reading the object again.
            self.state.workloads.remember_written(key, obj, written)

    def _still_pending(self, key: str) -> bool:
        state = self.state.core.workload_state(core.WorkloadKey(key))
        return state is core.WorkloadState.PENDING
