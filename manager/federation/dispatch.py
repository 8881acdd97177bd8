"""The MultiKueue admission check controller: places each workload that holds quota on the
manager on worker clusters, follows it there, and brings its status back.

Per manager Workload (one reconcile at a time, keyed ``namespace/name``):

1. Not federated (its ClusterQueue has no MultiKueue check): nothing to do.
2. A copy finished on a worker the manager could not see, and the workload was taken off it
   meanwhile: that run is its result (it never runs again).
3. Gone, finished, or no longer holding quota: remove every remote copy; but a finished
   run's copy, Job and pods stay on the worker it ran on for the retention
   (``retention.py``: ``--finished-retention``, ClusterQueue ``kfed.io/finished-retention``),
   then go (a deleted workload's go at once).
4. Its Job is not ``managedBy`` MultiKueue: the check is Rejected (upstream's message).
5. A remote copy finished: copy the remote Job's final status to the manager's Job (whose
   own controller then finishes the Workload); the copies go in step 3 afterwards.
6. Evicted by the manager (preempted, or our Retry): stop every copy.
7. Check Ready: follow it (``following.py``: keep the manager's Job status in sync, or give
   it back to be placed again when its copy was evicted or vanished, its worker drains, or
   its worker is lost and the copy has surely stopped).
8. Check Pending: place it (``placing.py``).

Where things live: what is read (``lookups.py``), what is written (``writes.py``,
``jobstatus.py``), what is remembered between reconciles (``records.py``), leftovers on the
workers (``collecting.py``), the failover timing (``failover.py``).
"""

from __future__ import annotations

import logging
import time

from manager.api import constants as C
from manager.controllers import eventreasons as told
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.runtime import ClusterController
from manager.federation import capacity, checkstatus, following, routing
from manager.federation.collecting import Collector
from manager.federation.jobstatus import JobStatus
from manager.federation.lookups import Lookups
from manager.federation.placing import Placer
from manager.federation.records import Records, Stats
from manager.federation.registry import ClusterRegistry
from manager.federation.remote import RemoteCluster
from manager.federation.retaining import Retaining, ran_on
from manager.federation.settings import FederationSettings
from manager.federation.writes import Writes
from manager.kube.api import Obj
from manager.kube.informer import Event
from manager.kube.workqueue import WorkQueue
from manager.telemetry import tracing

log = logging.getLogger(__name__)


class Dispatcher:
    def __init__(
        self, manager: ClusterController, registry: ClusterRegistry, settings: FederationSettings
    ) -> None:
        self.manager = manager
        self.state = manager.state
        self.registry = registry
        self.settings = settings
        self.queue = WorkQueue(name="dispatch")
        self.records = Records()
        self.stats = Stats()
        self.look = Lookups(self.state, registry, settings, self.records)
        self.write = Writes(manager, self.look, self.stats)
        self.jobs = JobStatus(self.state, self.look)
        self.placer = Placer(self.look, self.write, self.stats)
        self.retaining = Retaining(self.state, settings)
        self.retaining.on_change = self._retention_changed
        self.collector = Collector(self.look, self.write, self.queue.add, self.retaining)
        self._rescan = False
        self.state.workloads.subscribe(self._on_manager_workload)
        self.state.job_kinds.subscribe(self._on_manager_job)
        manager.workloads.stop_checks.append(self.look.remote_copies_stopped)
        manager.admission.on_admit.append(self._quota_reserved)

    # -- what others ask -----------------------------------------------------------------

    def federation_of(self, cluster_queue: str) -> tuple[str, list[str]] | None:
        return self.look.federation_of(cluster_queue)

    def worker_view(self, remote: RemoteCluster, order: int) -> capacity.WorkerView:
        return self.placer.worker_view(remote, order)

    async def recover(self, remote: RemoteCluster) -> None:
        await self.collector.recover(remote)

    async def collect_garbage(self) -> int:
        return await self.collector.collect_garbage()

    # -- events ------------------------------------------------------------------------

    def _quota_reserved(self, key: str, _admit: object) -> None:
        """Dispatch latency counts from here: the moment the manager reserved the quota."""
        self.records(key).reserved_at = time.monotonic()

    def _on_manager_workload(self, event: Event) -> None:
        self.queue.add(event.key)

    def _on_manager_job(self, kind: JobKind, event: Event) -> None:
        self.queue.add(kind.workload_key(event.obj))

    def attach(self, remote: RemoteCluster) -> None:
        """Follow a worker's copies: their events bring the manager workload back here."""

        def on_remote(event: Event) -> None:
            meta = event.obj.get("metadata") or {}
            labels = meta.get("labels") or {}
            name = labels.get(C.PREBUILT_WORKLOAD_LABEL) or meta.get("name")
            self.queue.add(f"{meta.get('namespace')}/{name}")

        def on_remote_job(kind: JobKind, event: Event) -> None:
            meta = event.obj.get("metadata") or {}
            workload = (meta.get("labels") or {}).get(C.PREBUILT_WORKLOAD_LABEL)
            key = f"{meta.get('namespace')}/{workload}"
            if (
                event.type == "DELETED"
                and kind.outcome(event.obj) is not None
                and self.state.workloads.get(key) is not None
            ):
                # Kept (until the record is forgotten) while its workload lives: a worker's
                # TTL controller may delete a finished Job before we copied its final status
                # (ttlSecondsAfterFinished: 0). Without it the manager's Job would never
                # end, or worse, its vanished copy would count as a reason to run it again.
                self.records(key).ended_remote_jobs[remote.name] = event.obj
            on_remote(event)

        remote.workloads().subscribe(on_remote)
        remote.job_informers.subscribe(on_remote_job)

    def _retention_changed(self, cluster_queue: str) -> None:
        """A ClusterQueue's retention changed: its finished workloads' kept objects may be
        due sooner or later than planned."""
        for obj in self.state.workloads.items():
            if ws.is_finished(obj) and self.state.queued_cluster_queue(obj) == cluster_queue:
                self.queue.add(ws.key_of(obj))

    def capacity_changed(self) -> None:
        """Something changed on a worker: waiting workloads may fit now (see rescan)."""
        self._rescan = True

    def connectivity_changed(self, remote: RemoteCluster) -> None:
        """A worker was lost or came back: look again at everything placed there."""
        for key, placement in self.records.placements():
            if placement.cluster == remote.name:
                self.queue.add(key)
        for obj in self.state.workloads.items():
            if ws.status_of(obj).get("clusterName") == remote.name:
                self.queue.add(ws.key_of(obj))
        self._rescan = True

    def maintenance_changed(self, cluster: str) -> None:
        """cordon/drain/uncordon: drained workloads move; waiting ones may fit again."""
        for obj in self.state.workloads.items():
            if ws.status_of(obj).get("clusterName") == cluster:
                self.queue.add(ws.key_of(obj))
        self._rescan = True

    def rescan(self) -> None:
        """Queue the waiting workloads again, highest priority and oldest first, at most once
        per rescan period however many worker events came in."""
        if not self._rescan:
            return
        self._rescan = False

        def order(key: str) -> tuple[int, str]:
            obj = self.state.workloads.get(key) or {}
            priority = int((obj.get("spec") or {}).get("priority") or 0)
            return -priority, str((obj.get("metadata") or {}).get("creationTimestamp", ""))

        for key in sorted(self.records.waiting(), key=order):
            self.queue.add(key)

    # -- the reconcile -----------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        with tracing.workload_context(self.state.workloads.get(key)):
            return await self._reconcile(key)

    def _retention_left(self, obj: Obj, copies: dict[str, Obj]) -> float:
        """Seconds the finished run's objects still stay on the worker it ran on: only when
        its copy there ran and ended (a copy that never ran is not kept)."""
        if not ws.is_finished(obj):
            return 0.0
        cluster = ran_on(obj)
        remote = self.registry.remote(cluster) if cluster else None
        copy_ = copies.get(cluster)
        if remote is None or copy_ is None:
            return 0.0
        if not self.look.ended_there(remote, ws.key_of(obj), copy_):
            return 0.0
        return self.retaining.left(obj)

    def _facts(
        self, obj: Obj, check: str, done: tuple[str, Obj] | None, copies: dict[str, Obj]
    ) -> routing.WorkloadFacts:
        """What ``routing.route`` needs to know about a federated workload."""
        rejection = self.look.no_adapter(obj)
        if rejection is None and (unmanaged := self.look.not_managed_by_multikueue(obj)):
            rejection = f"The owner is not managed by Kueue: {unmanaged}"
        return routing.WorkloadFacts(
            check_state=checkstatus.check_state(obj, check)[0],
            holds_quota=ws.has_reservation(obj),
            finished=ws.is_finished(obj),
            deleting=bool(obj["metadata"].get("deletionTimestamp")),
            evicted=ws.is_evicted(obj),
            finished_copy=done is not None,
            finished_copy_worker_known=done is not None
            and self.registry.remote(done[0]) is not None,
            rejection=rejection,
            retention_left=self._retention_left(obj, copies),
        )

    async def _reconcile(self, key: str) -> float | None:
        obj = self.state.workloads.get(key)
        federated = self.look.multikueue_check(obj) if obj is not None else None
        copies: dict[str, Obj] = {}
        done: tuple[str, Obj] | None = None
        if obj is None:
            step = routing.route(routing.WorkloadFacts(exists=False))
        elif federated is None:
            step = routing.route(routing.WorkloadFacts(federated=False))
        else:
            copies = self.look.copies(key)
            done = self.look.finished_copy(key, copies)
            step = routing.route(self._facts(obj, federated[0], done, copies))
        if step.step is routing.Step.CLEAN_UP:
            await self.write.delete_everywhere(key, obj)
            self.records.forget(key)
            return None
        if step.step is routing.Step.RETAIN:
            assert obj is not None  # routed on a finished workload
            await self.write.delete_everywhere(key, obj, keep=ran_on(obj))
            return step.after
        if obj is None or federated is None or step.step is routing.Step.NONE:
            return None
        check, clusters = federated
        if step.step is routing.Step.REJECT:
            # Never place what the manager's own controllers may run, or what no worker can.
            log.warning("workload %s rejected: %s", key, step.message)
            if await self.write.set_check(obj, check, "Rejected", step.message) is not None:
                told.dispatch_rejected(self.state.events, obj, step.message)
            return None
        if step.step is routing.Step.RECORD_FINISHED:
            cluster, remote_wl = done or ("", {})
            if not ws.has_reservation(obj):
                log.info("workload %s finished on %s while unreachable: recorded", key, cluster)
            obj = await self.write.record_ran_on(obj, cluster)
            await self.jobs.finish_from(cluster, obj, remote_wl)
            return None
        record = self.records(key)
        if record.reserved_at is None:
            record.reserved_at = time.monotonic()
        match step.step:
            case routing.Step.WIN:
                remote = self.registry.remote(done[0]) if done else None
                assert remote is not None  # routed on a known worker
                return await self.write.won(key, obj, check, remote, copies)
            case routing.Step.STOP:
                await self.write.delete_everywhere(key, obj)
                await self.jobs.reset(obj)
                self.records.forget(key)
                return None
            case routing.Step.FOLLOW:
                return await self._follow(obj, check, copies)
            case routing.Step.PLACE:
                return await self.placer.place(key, obj, check, clusters, copies)

    async def _follow(self, obj: Obj, check: str, copies: dict[str, Obj]) -> float | None:
        cluster = str(ws.status_of(obj).get("clusterName") or "")
        action = following.decide(self.look.worker_facts(cluster, obj), copies.get(cluster))
        match action.do:
            case following.Do.RETRY:
                await self.write.retry(obj, check, action.message, reason=action.reason)
                return None
            case following.Do.WAIT:
                return action.after
        await self.jobs.sync(cluster, obj)
        return None
