"""Carries out ``decide.py``'s actions for one workload, in order, and says when to look at it
again. It decides nothing: each action becomes the write it names (``writes.py``,
``jobstatus.py``), or a change of the dispatcher's record (made here and nowhere else in the
reconcile), with the Events, spans and metrics that tell it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from manager.controllers import eventreasons as told
from manager.controllers import spans
from manager.controllers import workloadstatus as ws
from manager.controllers.state import ClusterState
from manager.federation.decisions import actions as do
from manager.federation.decisions import capacity, references
from manager.federation.decisions.group import WorkloadGroup
from manager.federation.engine import workloadview
from manager.federation.engine.jobstatus import JobStatus
from manager.federation.engine.records import Placement, Records, Stats, ToldRefusals
from manager.federation.engine.writes import Writes
from manager.federation.settings import FederationSettings
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
        *,
        settings: FederationSettings,
        stats: Stats,
        told_refusals: ToldRefusals,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.state = state
        self.registry = registry
        self.records = records
        self.write = write
        self.jobs = jobs
        self.settings = settings
        self.stats = stats
        self.told_refusals = told_refusals
        self.clock = clock

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
                        record.reserved_at = self.clock()
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
            case _:
                return await self._placing(group, obj, action)
        return None

    async def _placing(self, group: WorkloadGroup, obj: Obj, action: do.Action) -> float | None:
        """The placement step's actions (``placement.place``)."""
        key, check = group.key, group.check
        match action:
            case do.TellRefusal(cluster=cluster, refusal=refusal):
                self.told_refusals.remember(ToldRefusals.who(obj), cluster, refusal)
                message = f"not placed on {cluster}: {refusal}"
                self.state.events.warning(obj, references.EVENT_REASON, message)
            case do.RecoverPlacement(cluster=cluster, deadline=deadline):
                self.records(key).placement = Placement(cluster, "", {}, deadline, "recovered")
            case do.Withdraw(cluster=cluster, delete=delete):
                await self._withdraw(key, obj, cluster, delete=delete)
            case do.NoteChoice(tried=tried, unplaceable_since=since, waiting=waiting):
                record = self.records(key)
                record.tried, record.unplaceable_since, record.waiting = set(tried), since, waiting
            case do.Wait(message=message):
                await self.write.set_check(obj, check, "Pending", message)
            case do.GiveBack(message=message):
                # The manager evicts it, which releases the quota, and requeues it with
                # backoff, the reason kept in its Evicted condition.
                log.info("workload %s: %s", key, message)
                self.stats.retries += 1
                await self.write.set_check(obj, check, "Retry", message)
            case do.Send():
                return await self._send(key, obj, action)
            case do.SendCopies(clusters=clusters):
                attributes = {
                    "kfed.dispatch.mode": str(self.settings.dispatch_mode),
                    "kfed.clusters": list(clusters),
                }
                spans.record("manager", "dispatch", obj, attributes=attributes)
                # Each worker is a separate API server: the copies go out at once.
                remotes = [r for r in map(self.registry.remote, clusters) if r is not None]
                await asyncio.gather(*(self.write.create_copy(r, obj) for r in remotes))
            case do.NoteRound(round=round_):
                self.records(key).round = round_
            case do.Nominate(clusters=clusters, message=message, once=once):
                if once and (placement := self.records(key).placement) is not None:
                    placement.nominate_at = None
                await self.write.set_check(obj, check, "Pending", message, nominated=list(clusters))
        return None

    async def _withdraw(self, key: str, obj: Obj, cluster: str, *, delete: bool) -> None:
        """Give up the copy sent to ``cluster``."""
        record = self.records(key)
        self.stats.withdrawn += 1
        record.tried.add(cluster)
        record.placement = None
        remote = self.registry.remote(cluster)
        if delete and remote is not None:
            await self.write.delete_copy(remote, key, obj)
        self.state.metrics.failover(cluster, "retry")

    async def _send(self, key: str, obj: Obj, send: do.Send) -> float:
        """Send a copy to the chosen worker and note where and why."""
        remote = self.registry.remote(send.cluster)
        assert remote is not None  # a candidate that fits is connected
        record = self.records(key)
        record.placement = Placement(
            send.cluster,
            send.worker_cluster_queue,
            dict(send.usage),
            send.deadline,
            send.reason,
            waiting_message=send.message,
            nominate_at=send.nominate_at,
        )
        decision = {
            "cluster": send.cluster,
            "reason": send.reason,
            "rule": capacity.RULE,
            "candidates": list(send.candidates),
            "at": time.time(),
        }
        spans.record(
            "manager",
            "dispatch",
            obj,
            attributes={
                "kfed.dispatch.mode": str(self.settings.dispatch_mode),
                "kfed.cluster": send.cluster,
                "kfed.dispatch.reason": send.reason,
                "kfed.dispatch.rule": capacity.RULE,
                "kfed.dispatch.candidates": decision["candidates"],
                "kfed.dispatch.tried_before": list(send.tried_before),
            },
        )
        if not await self.write.create_copy(remote, obj):
            record.placement = None
            return send.retry_after
        before, _ = workloadview.placement_of(obj)  # the previous decision, if any
        previously = before.cluster if before is not None else ""
        told.dispatched(self.state.events, obj, send.cluster, send.reason, previously=previously)
        await self.write.annotate(obj, decision)
        return send.then_after
