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
from dataclasses import dataclass

from manager.controllers import eventreasons as told
from manager.controllers import spans
from manager.controllers import workloadstatus as ws
from manager.controllers.state import ClusterState
from manager.federation.decisions import actions as do
from manager.federation.decisions import capacity, references
from manager.federation.decisions.group import WorkloadGroup
from manager.federation.engine import topologyback, workloadview
from manager.federation.engine.jobstatus import JobStatus
from manager.federation.engine.records import Placement, Records, Stats, ToldRefusals
from manager.federation.engine.writes import Created, Writes
from manager.federation.settings import FederationSettings
from manager.federation.workers.registry import ClusterRegistry
from manager.federation.workers.remote import RemoteCluster
from manager.kube.api import Obj

log = logging.getLogger(__name__)

RACE_RECHECK = 0.1
"""Seconds before looking again when a name was taken as ours was created (the next read
judges it afresh) or a template raced with its deletion."""
FAILED_RECHECK = 1.0
"""Seconds before looking again when a create failed."""


@dataclass(frozen=True, slots=True)
class Halt:
    """Stop carrying out the list here; look again after ``after`` seconds."""

    after: float


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
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.wall_clock = wall_clock
        """Wall clock: the placement annotation's time, a span's start."""
        self.state = state
        self.registry = registry
        self.records = records
        self.write = write
        self.jobs = jobs
        self.settings = settings
        self.stats = stats
        self.told_refusals = told_refusals
        self.clock = clock

    # -- record changes from outside a reconcile -----------------------------------------

    def note_reserved(self, key: str) -> None:
        """The manager reserved its quota: dispatch latency counts from now."""
        self.records(key).reserved_at = self.clock()

    def note_ended_run(self, key: str, cluster: str, job: Obj) -> None:
        """Keep the last state of its job on ``cluster`` once it ended, where the informer
        may not show it (deleted by a TTL controller, or read afresh on a worker's return)."""
        self.records(key).ended_remote_jobs[cluster] = job

    async def collect(self, remote: RemoteCluster, key: str, action: do.Collect) -> None:
        """Carry out a verdict of the garbage collection (``collecting.py``) on a leftover of
        ``key`` on ``remote``, the connection it was found through."""
        match action:
            case do.CollectCopy(moment=moment, workload=workload):
                log.info("collecting the copy of %s on %s (%s)", key, remote.name, moment)
                await self.write.delete_copy(remote, key, workload)
            case do.CollectOrphan(resource=resource, obj=obj, foreground=foreground):
                await self.write.delete_orphan(remote, resource, dict(obj), foreground=foreground)

    async def apply(self, group: WorkloadGroup, actions: list[do.Action]) -> float | None:
        """Carry out ``actions``; seconds after which to reconcile the workload again (None:
        when something changes). Each write's result is the base of the next; a write that
        could not be made (a name taken, a create failed) ends the list there."""
        key, after, obj = group.key, None, group.workload
        for action in actions:
            match action:
                case do.DeleteCopies(clusters=clusters):
                    await self._delete_on(key, obj, clusters)
                    self.write.wake_manager(key)  # its eviction may be waiting for this
                case do.KeepEndedCopy(cluster=cluster):
                    log.info("workload %s finished on %s unseen: its copy is kept", key, cluster)
                case do.ForgetRecord():
                    self.records.forget(key)
                case do.LookAgain(after=seconds):
                    after = seconds
                case do.NoteReserved():
                    if self.records(key).reserved_at is None:
                        self.note_reserved(key)
                case do.RecordRanOn(cluster=cluster, unreachable=unreachable):
                    assert obj is not None, f"{action} needs the workload"
                    if unreachable:
                        log.info("workload %s finished on %s while unreachable", key, cluster)
                    obj = await self.write.record_ran_on(obj, cluster)
                case _:
                    assert obj is not None, f"{action} needs the workload"
                    done = await self._on_workload(group, obj, action)
                    if isinstance(done, Halt):
                        return done.after
                    if done is not None:
                        after = done
        return after

    async def _delete_on(self, key: str, obj: Obj | None, clusters: tuple[str, ...]) -> None:
        """The copies (and our jobs) on ``clusters``; each worker is a separate API server:
        at once."""

        async def delete(cluster: str) -> None:
            remote = self.registry.remote(cluster)
            if remote is not None and await self.write.delete_copy(remote, key, obj):
                # Only a copy that was there: a worker that never had one is not named.
                log.info("removed the copy of %s on %s", key, cluster)

        await asyncio.gather(*(delete(c) for c in clusters))

    async def _on_workload(
        self, group: WorkloadGroup, obj: Obj, action: do.Action
    ) -> float | Halt | None:
        key, check = group.key, group.check
        match action:
            case do.Reject(message=message):
                # Never place what the manager's own controllers may run, or what no worker can.
                log.warning("workload %s rejected: %s", key, message)
                if await self.write.set_check(obj, check, "Rejected", message) is not None:
                    told.dispatch_rejected(self.state.events, obj, message)
            case do.PatchJobStatus(patch=patch):
                await self.jobs.patch_status(obj, dict(patch))
            case do.CopyTopologyBack(cluster=cluster, found=found, text=text):
                await topologyback.bring_back(self.state, cluster, obj, found, text)
            case do.FinishWorkload(succeeded=succeeded, message=message):
                await self.jobs.finish_workload(obj, succeeded, message)
            case do.ResetJob():
                await self.jobs.reset(obj)
            case do.Retry(reason=reason, message=message, evicted_reason=evicted_reason):
                await self.write.retry(obj, check, message, reason=reason, evicted=evicted_reason)
            case _:
                return await self._winning(group, obj, action)
        return None

    async def _winning(
        self, group: WorkloadGroup, obj: Obj, action: do.Action
    ) -> float | Halt | None:
        """``winning.win``'s actions: the copy that won becomes the one run."""
        key, check = group.key, group.check
        match action:
            case do.NoteWinner(cluster=cluster):
                self.records(key).winner = cluster
            case do.DeleteOtherCopies(clusters=clusters):
                await self._delete_on(key, obj, clusters)
            case do.ForgetNameTaken(cluster=cluster, copy=False):
                self.records(key).name_taken.discard(cluster)
            case do.ForgetNameTaken(cluster=cluster, copy=True):
                self.records(key).copy_taken.discard(cluster)
            case do.CreateClaimTemplate(cluster=cluster, source=source):
                remote = self.registry.remote(cluster)
                made = Created.FAILED
                if remote is not None:  # else removed since the read
                    made = await self.write.create_claim_template(remote, obj, source)
                if made is not Created.CREATED:
                    # Taken meanwhile (the next read judges it) or failed: look again.
                    return Halt(RACE_RECHECK if made is Created.TAKEN else FAILED_RECHECK)
            case do.CreateJob(cluster=cluster):
                remote = self.registry.remote(cluster)
                if remote is None:  # removed since the read
                    return Halt(FAILED_RECHECK)
                if await self.write.create_job(remote, obj) is Created.TAKEN:
                    self.records(key).name_taken.add(cluster)
                    return Halt(RACE_RECHECK)
            case do.SetReady(cluster=cluster):
                written = await self.write.set_ready(obj, check, cluster)
                if written is not None:
                    self._placed(key, written, cluster)
            case do.Block(cluster=cluster, reason=reason, until=until):
                log.warning("workload %s: not placing it on %s: %s", key, cluster, reason)
                self.records(key).blocked[cluster] = (reason, until)
            case do.Refuse(cluster=cluster):
                record = self.records(key)
                record.winner, record.placement = None, None
                record.tried.add(cluster)
                if (remote := self.registry.remote(cluster)) is not None:
                    await self.write.delete_copy(remote, key, obj)
            case _:
                return await self._placing(group, obj, action)
        return None

    def _placed(self, key: str, written: Obj, cluster: str) -> None:
        """Count and trace a placement: dispatch latency from the manager's reservation."""
        self.state.metrics.admitted_remotely(ws.cluster_queue_of(written), cluster)
        record = self.records(key)
        record.placement, record.tried = None, set()
        started, record.reserved_at = record.reserved_at, None
        if started is None:
            return
        latency = self.clock() - started
        self.stats.dispatch_latencies.append(latency)
        self.state.metrics.dispatch_done(cluster, latency)
        spans.record(
            "manager",
            "placement",
            written,
            start=self.wall_clock() - latency,
            attributes={"kfed.cluster": cluster, "kfed.dispatch.latency_seconds": latency},
        )

    async def _placing(
        self, group: WorkloadGroup, obj: Obj, action: do.Action
    ) -> float | Halt | None:
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
                await asyncio.gather(*(self._create_copy(key, r, obj) for r in remotes))
            case do.NoteRound(round=round_):
                self.records(key).round = round_
            case do.Nominate(clusters=clusters, message=message, once=once):
                if once and (placement := self.records(key).placement) is not None:
                    placement.nominate_at = None
                await self.write.set_check(obj, check, "Pending", message, nominated=list(clusters))
        return None

    async def _create_copy(self, key: str, remote: RemoteCluster, obj: Obj) -> Created:
        """A copy on ``remote``; its name taken there is noted (the next read judges it)."""
        made = await self.write.create_copy(remote, obj)
        if made is Created.TAKEN:
            self.records(key).copy_taken.add(remote.name)
        return made

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

    async def _send(self, key: str, obj: Obj, send: do.Send) -> float | Halt:
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
            topology=send.topology,
        )
        decision = {
            "cluster": send.cluster,
            "reason": send.reason,
            "rule": capacity.RULE,
            "candidates": list(send.candidates),
            "at": self.wall_clock(),
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
        made = await self._create_copy(key, remote, obj)
        if made is Created.TAKEN:
            return Halt(RACE_RECHECK)  # kept as sent; the next read judges whose the name is
        if made is not Created.CREATED:
            record.placement = None
            return send.retry_after
        before, _ = workloadview.placement_of(obj)  # the previous decision, if any
        previously = before.cluster if before is not None else ""
        told.dispatched(self.state.events, obj, send.cluster, send.reason, previously=previously)
        await self.write.annotate(obj, decision)
        return send.then_after
