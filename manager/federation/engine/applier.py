"""Carries out ``decide.py``'s actions for one workload, in order, and says when to look at it
again. It decides nothing: each action becomes the write it names (``writes.py``,
``jobstatus.py``), the placement step (``placing.py``), or a change of the dispatcher's record
(made here and nowhere else in the reconcile).
"""

from __future__ import annotations

import logging
import time

from manager.controllers import eventreasons as told
from manager.controllers import workloadstatus as ws
from manager.controllers.state import ClusterState
from manager.federation.decisions import actions as do
from manager.federation.decisions.group import WorkloadGroup
from manager.federation.engine.jobstatus import JobStatus
from manager.federation.engine.placing import Placer
from manager.federation.engine.records import Records
from manager.federation.engine.writes import Writes
from manager.federation.workers.registry import ClusterRegistry
from manager.kube.api import Obj

log = logging.getLogger(__name__)


class Applier:
    def __init__(
        self,
        state: ClusterState,
        registry: ClusterRegistry,
        records: Records,
        write: Writes,
        jobs: JobStatus,
        placer: Placer,
    ) -> None:
        self.state = state
        self.registry = registry
        self.records = records
        self.write = write
        self.jobs = jobs
        self.placer = placer

    async def apply(self, group: WorkloadGroup, actions: list[do.Action]) -> float | None:
        """Carry out ``actions``; seconds after which to reconcile the workload again (None:
        when something changes). Each write's result is the base of the next."""
        key, obj, after = group.key, group.workload, None
        for action in actions:
            match action:
                case do.DeleteCopies(keep=keep):
                    await self.write.delete_everywhere(key, obj, keep=keep or "")
                case do.ForgetRecord():
                    self.records.forget(key)
                case do.LookAgain(after=seconds):
                    after = seconds
                case do.NoteReserved():
                    record = self.records(key)
                    if record.reserved_at is None:
                        record.reserved_at = time.monotonic()
                case _:
                    assert obj is not None, f"{action} needs the workload"
                    if (again := await self._on_workload(group, obj, action)) is not None:
                        after = again
        return after

    async def _on_workload(self, group: WorkloadGroup, obj: Obj, action: do.Action) -> float | None:
        key, check = group.key, group.check
        match action:
            case do.Reject(message=message):
                # Never place what the manager's own controllers may run, or what no worker can.
                log.warning("workload %s rejected: %s", key, message)
                if await self.write.set_check(obj, check, "Rejected", message) is not None:
                    told.dispatch_rejected(self.state.events, obj, message)
            case do.RecordFinished(cluster=cluster):
                remote_wl = group.finished_copy[1] if group.finished_copy else {}
                if not ws.has_reservation(obj):
                    log.info("workload %s finished on %s while unreachable: recorded", key, cluster)
                written = await self.write.record_ran_on(obj, cluster)
                await self.jobs.finish_from(cluster, written, remote_wl)
            case do.Win(cluster=cluster):
                remote = self.registry.remote(cluster)
                assert remote is not None  # decided on a known worker
                return await self.write.won(key, obj, check, remote, dict(group.copies))
            case do.ResetJob():
                await self.jobs.reset(obj)
            case do.Retry(reason=reason, message=message, evicted_reason=evicted_reason):
                await self.write.retry(obj, check, message, reason=reason, evicted=evicted_reason)
            case do.SyncStatus(cluster=cluster):
                await self.jobs.sync(cluster, obj)
            case do.Place():
                return await self.placer.place(
                    key, obj, check, list(group.workers), dict(group.copies)
                )
        return None
