"""The MultiKueue admission check controller: places each workload that holds quota on the
manager on worker clusters, follows it there, and brings its status back.

One reconcile per manager Workload at a time (keyed ``namespace/name``), in three steps:

    group = GroupReader.read(key)        # grouping.py: read once, from the informers
    actions = decide.decide(group)       # decide.py: pure, the steps of routing.py and
                                         #   following.py as a list of typed actions
    Applier.apply(group, actions)        # applier.py: carries them out, decides nothing

The steps, in order (``routing.py``): not federated, nothing; a run ended on a worker the
manager could not see and the workload was taken off it meanwhile, that run is its result;
gone, finished (its run's objects kept for the retention) or without quota, its copies go;
not ``managedBy`` MultiKueue or of a kind with no adapter, the check rejects it; a copy ran
to its end, its result is recorded; evicted by the manager, every copy stops; check Ready,
follow it (``following.py``: sync, wait, or give it back); Pending, place it
(``placing.py``).

Where else things live: what is remembered between reconciles (``records.py``), leftovers on
the workers (``collecting.py``), the failover timing (``failover.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from manager.api import constants as C
from manager.api.view import at, labels_of
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.runtime import ClusterController
from manager.federation.decisions import capacity, decide
from manager.federation.engine.applier import Applier
from manager.federation.engine.collecting import Collector
from manager.federation.engine.grouping import GroupReader
from manager.federation.engine.jobstatus import JobStatus
from manager.federation.engine.lookups import Lookups
from manager.federation.engine.placing import PlacingReader
from manager.federation.engine.records import Records, Stats, ToldRefusals
from manager.federation.engine.retaining import Retaining
from manager.federation.engine.runreading import RunReader
from manager.federation.engine.topologyview import TopologyView
from manager.federation.engine.writes import Writes
from manager.federation.settings import FederationSettings
from manager.federation.workers.registry import ClusterRegistry
from manager.federation.workers.remote import RemoteCluster
from manager.kube.informer import Event
from manager.kube.workqueue import WorkQueue
from manager.telemetry import tracing

log = logging.getLogger(__name__)


class Dispatcher:
    def __init__(
        self,
        manager: ClusterController,
        registry: ClusterRegistry,
        settings: FederationSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock
        """Monotonic: every timing of the engine (placements, blocks, failover, latency)."""
        self.manager = manager
        self.state = manager.state
        self.registry = registry
        self.settings = settings
        self.queue = WorkQueue(name="dispatch")
        self.records = Records()
        self.stats = Stats()
        self.look = Lookups(self.state, registry, settings, self.records, clock)
        self.write = Writes(manager, self.look, self.stats)
        self.jobs = JobStatus(self.state, self.look)
        told_refusals = ToldRefusals()
        self.topology = TopologyView()
        """TAS: one view of the workers' racks, for placing and for bringing back where the
        pods went."""
        self.placing = PlacingReader(self.look, told_refusals, self.topology)
        self.retaining = Retaining(
            self.state, settings, tell=registry.status, on_change=self._retention_changed
        )
        self.reader = GroupReader(
            self.look,
            registry,
            self.retaining,
            self.placing,
            RunReader(self.look, self.topology),
            clock,
        )
        self.applier = Applier(
            self.state,
            registry,
            self.records,
            self.write,
            self.jobs,
            settings=settings,
            stats=self.stats,
            told_refusals=told_refusals,
            clock=clock,
        )
        self.collector = Collector(self.look, self.applier, self.queue.add, self.retaining)
        self._rescan = False
        self.state.workloads.subscribe(self._on_manager_workload)
        self.state.job_kinds.subscribe(self._on_manager_job)
        manager.workloads.stop_checks.append(self.look.remote_copies_stopped)
        manager.admission.on_admit.append(self._quota_reserved)

    # -- what others ask -----------------------------------------------------------------

    def federation_of(self, cluster_queue: str) -> tuple[str, list[str]] | None:
        return self.look.federation_of(cluster_queue)

    def worker_view(self, remote: RemoteCluster, order: int) -> capacity.WorkerView:
        return self.placing.worker_view(remote, order)

    async def recover(self, remote: RemoteCluster) -> None:
        await self.collector.recover(remote)

    async def collect_garbage(self) -> int:
        return await self.collector.collect_garbage()

    # -- events ------------------------------------------------------------------------

    def _quota_reserved(self, key: str, _admit: object) -> None:
        """Dispatch latency counts from here: the moment the manager reserved the quota."""
        self.applier.note_reserved(key)

    def _on_manager_workload(self, event: Event) -> None:
        self.queue.add(event.key)

    def _on_manager_job(self, kind: JobKind, event: Event) -> None:
        self.queue.add(kind.workload_key(event.obj))

    def attach(self, remote: RemoteCluster) -> None:
        """Follow a worker's copies: their events bring the manager workload back here."""

        def on_remote(event: Event) -> None:
            meta = at(event.obj, "metadata")
            name = labels_of(event.obj).get(C.PREBUILT_WORKLOAD_LABEL) or meta.get("name")
            self.queue.add(f"{meta.get('namespace')}/{name}")

        def on_remote_job(kind: JobKind, event: Event) -> None:
            meta = at(event.obj, "metadata")
            workload = labels_of(event.obj).get(C.PREBUILT_WORKLOAD_LABEL)
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
                self.applier.note_ended_run(key, remote.name, event.obj)
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
            obj = self.state.workloads.get(key)
            priority = int(at(obj, "spec").get("priority") or 0)
            return -priority, str(at(obj, "metadata").get("creationTimestamp", ""))

        for key in sorted(self.records.waiting(), key=order):
            self.queue.add(key)

    # -- the reconcile -----------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        with tracing.workload_context(self.state.workloads.get(key)):
            return await self._reconcile(key)

    async def _reconcile(self, key: str) -> float | None:
        """Read the workload's group once, decide its actions, carry them out."""
        group = await self.reader.read(key)
        return await self.applier.apply(group, decide.decide(group))
