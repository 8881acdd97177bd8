"""``AdmissionCore``: the one object controllers talk to.

Controllers translate watch events into calls (upsert/delete of flavors, queues,
cohorts, namespaces and workloads), call ``schedule(now)`` to run one cycle, apply
the returned decisions through the API and report back:

- ``Admit`` is already assumed: ``confirm(key)`` after the write, ``forget(key)`` if it
  failed (quota freed, workload requeued); ``set_admitted(key)`` once every admission
  check is Ready.
- ``Preempt``/``Evict`` victims are marked as being evicted: ``evict(key, ...)`` once
  the workload is suspended (quota freed, requeued with the controller's backoff), or
  ``cancel_eviction(key)`` if the write failed.
- ``finish(key)`` when a workload completes; ``add_admitted(...)`` to rebuild state
  from already-admitted workloads on restart.

Every event that could let a parked workload in (quota freed, a queue, cohort,
flavor or namespace changed) wakes exactly the ClusterQueues it concerns.
The core is pure and single-threaded: time only comes in as arguments.
"""

from __future__ import annotations

from collections.abc import Mapping

from manager.core import fairsharing, reasons
from manager.core.cache import INACTIVE_STOPPED, Cache, ClusterQueueState
from manager.core.decisions import Admission, CycleResult, Evict, EvictionReason, Pending
from manager.core.model import (
    ClusterQueue,
    ClusterQueueName,
    Cohort,
    CohortName,
    FairSharingConfig,
    FlavorName,
    FlavorResource,
    LocalQueue,
    LocalQueueKey,
    Namespace,
    ResourceFlavor,
    ResourceName,
    StopPolicy,
    Workload,
    WorkloadKey,
)
from manager.core.queues import Location, QueueManager
from manager.core.reasons import PendingReason
from manager.core.scheduler import Scheduler
from manager.core.tas import HOSTNAME, Node, Topology, TopologySnapshot
from manager.core.views import (
    ClusterQueueStatus,
    FlavorUsage,
    LocalQueueStatus,
    ResourceUsage,
    WorkloadState,
)


class AdmissionCore:
    """Kueue's cache, queue manager and scheduler for one cluster or the global queues."""

    def __init__(self, *, fair_sharing: FairSharingConfig | None = None) -> None:
        self._cache = Cache()
        self._queues = QueueManager()
        self._namespaces: dict[Namespace, Mapping[str, str]] = {}
        self._fair_sharing = fair_sharing
        self._scheduler = Scheduler(self._cache, self._queues, self._namespaces, fair_sharing)
        self._drain_cluster_queues: set[ClusterQueueName] = set()
        self._drain_local_queues: set[LocalQueueKey] = set()

    @property
    def fair_sharing(self) -> FairSharingConfig | None:
        """Kueue's fair sharing configuration, or None when it is off."""
        return self._fair_sharing

    # -- configuration ---------------------------------------------------------------

    def upsert_flavor(self, flavor: ResourceFlavor) -> None:
        if self._cache.flavors.get(flavor.name) == flavor:
            return
        self._cache.upsert_flavor(flavor)
        self._refresh_active()
        self._queues.wake_all()

    def delete_flavor(self, name: FlavorName) -> None:
        if name not in self._cache.flavors:
            return
        self._cache.delete_flavor(name)
        self._refresh_active()
        self._queues.wake_all()

    def upsert_cluster_queue(self, cq: ClusterQueue) -> None:
        old = self._cache.cluster_queues.get(cq.name)
        if old is not None and old.spec == cq:
            return
        before = self._cache.tree_members(cq.name)
        self._cache.upsert_cluster_queue(cq)
        self._queues.upsert_cluster_queue(cq.name, cq.queueing_strategy)
        self._refresh_active()
        self._queues.wake(before + self._cache.tree_members(cq.name))
        if cq.stop_policy is StopPolicy.HOLD_AND_DRAIN:
            self._drain_cluster_queues.add(cq.name)

    def delete_cluster_queue(self, name: ClusterQueueName) -> None:
        if name not in self._cache.cluster_queues:
            return
        before = self._cache.tree_members(name)
        self._cache.delete_cluster_queue(name)
        self._queues.delete_cluster_queue(name)
        self._refresh_active()
        self._queues.wake(before)

    def upsert_cohort(self, cohort: Cohort) -> None:
        existing = self._cache.cohorts.get(cohort.name)
        if existing is not None and existing.spec == cohort:
            return
        self._cache.upsert_cohort(cohort)
        self._refresh_active()
        self._queues.wake_all()

    def delete_cohort(self, name: CohortName) -> None:
        if name not in self._cache.cohorts:
            return
        self._cache.delete_cohort(name)
        self._refresh_active()
        self._queues.wake_all()

    def upsert_local_queue(self, lq: LocalQueue) -> None:
        if self._queues.local_queues.get(lq.key) == lq:
            return
        self._queues.upsert_local_queue(lq)
        self._queues.wake([lq.cluster_queue])
        if lq.stop_policy is StopPolicy.HOLD_AND_DRAIN:
            self._drain_local_queues.add(lq.key)

    def delete_local_queue(self, key: LocalQueueKey) -> None:
        self._queues.delete_local_queue(key)

    def set_namespace_labels(self, namespace: Namespace, labels: Mapping[str, str]) -> None:
        if self._namespaces.get(namespace) == labels:
            return
        self._namespaces[namespace] = dict(labels)
        self._queues.wake_all()

    def delete_namespace(self, namespace: Namespace) -> None:
        if self._namespaces.pop(namespace, None) is not None:
            self._queues.wake_all()

    # -- topology (TAS) ----------------------------------------------------------------

    def set_topology(self, topology: Topology) -> None:
        if self._cache.tas.set_topology(topology):
            self._queues.wake_all()

    def delete_topology(self, name: str) -> None:
        if self._cache.tas.delete_topology(name):
            self._queues.wake_all()

    def upsert_node(self, node: Node) -> None:
        if self._cache.tas.upsert_node(node):
            self._queues.wake_all()

    def delete_node(self, name: str) -> None:
        if self._cache.tas.delete_node(name):
            self._queues.wake_all()

    def set_pod_usage(self, node: str, usage: Mapping[ResourceName, int]) -> None:
        """The summed requests of the scheduled, unfinished pods on ``node`` that no TAS
        workload accounts for ({} when none)."""
        if self._cache.tas.set_pod_usage(node, usage):
            self._queues.wake_all()

    def tas_snapshot(self, flavor: FlavorName) -> TopologySnapshot | None:
        """The domain tree of a TAS flavor as the scheduler sees it now (None: not TAS)."""
        spec = self._cache.flavors.get(flavor)
        return self._cache.tas.snapshot(spec) if spec is not None else None

    def _refresh_active(self) -> None:
        for name in self._cache.refresh_active():
            cq = self._cache.cluster_queues[name]
            self._queues.set_stopped(name, _stopped_reason(cq))

    # -- workloads -------------------------------------------------------------------

    def add_workload(
        self,
        workload: Workload,
        *,
        requeue_at: float | None = None,
        order_time: float | None = None,
    ) -> None:
        """Add or update a pending workload.

        ``order_time`` defaults to the creation time; pass the eviction time for a
        workload that was evicted before (Kueue orders those by eviction time).
        A workload that already holds quota only has its spec refreshed (e.g. priority).
        """
        held = self._cache.workloads.get(workload.key)
        if held is not None:
            self._cache.refresh(held, workload)
            return
        start = workload.creation_time if order_time is None else order_time
        self._queues.upsert(workload, order_time=start, requeue_at=requeue_at)

    def delete_workload(self, key: WorkloadKey) -> None:
        """The Workload object is gone: drop it, pending or admitted."""
        self._queues.remove(key)
        self._release(key)

    def add_admitted(
        self,
        workload: Workload,
        admission: Admission,
        *,
        reserved_at: float,
        admitted: bool = False,
        order_time: float | None = None,
    ) -> None:
        """Record a workload that already holds quota (restart): never admitted twice."""
        self._queues.remove(workload.key)
        previous = self._cache.release(workload.key)
        if previous is not None and previous.cluster_queue != admission.cluster_queue:
            self._queues.wake(self._cache.tree_members(previous.cluster_queue))
        held = self._cache.reserve(
            workload,
            admission,
            reserved_at=reserved_at,
            order_time=workload.creation_time if order_time is None else order_time,
            admitted=admitted,
            assumed=False,
        )
        cq = self._cache.cluster_queues.get(admission.cluster_queue)
        if cq is not None and cq.spec.stop_policy is StopPolicy.HOLD_AND_DRAIN:
            self._drain_cluster_queues.add(cq.spec.name)
        lq = self._queues.local_queues.get(held.local_queue)
        if lq is not None and lq.stop_policy is StopPolicy.HOLD_AND_DRAIN:
            self._drain_local_queues.add(lq.key)

    def confirm(self, key: WorkloadKey) -> bool:
        """The Admit write succeeded; the admission is no longer just assumed."""
        held = self._cache.workloads.get(key)
        if held is None:
            return False
        held.assumed = False
        return True

    def forget(self, key: WorkloadKey) -> bool:
        """The Admit write failed: free the quota and queue the workload again as it was."""
        held = self._cache.workloads.get(key)
        if held is None or not held.assumed:
            return False
        self._release(key)
        self._queues.upsert(held.workload, order_time=held.order_time, requeue_at=None)
        return True

    def set_admitted(self, key: WorkloadKey) -> bool:
        """Every admission check is Ready: the reservation becomes an admission."""
        return self._cache.set_admitted(key)

    def finish(self, key: WorkloadKey) -> bool:
        """The workload finished (or was deactivated): its quota is free."""
        self._queues.remove(key)
        return self._release(key)

    def evict(self, key: WorkloadKey, *, now: float, requeue_at: float | None = None) -> bool:
        """The workload was evicted (preempted, drained, ...): free its quota and requeue it.

        It is ordered by ``now`` (Kueue's Eviction requeuing timestamp) and becomes
        eligible again at ``requeue_at`` (the controller's backoff), or at once.
        """
        held = self._cache.workloads.get(key)
        if held is None:
            return False
        self._release(key)
        self._queues.advance(now)
        self._queues.upsert(held.workload, order_time=now, requeue_at=requeue_at)
        return True

    def cancel_eviction(self, key: WorkloadKey) -> bool:
        """Writing a Preempt/Evict decision failed: the workload keeps its quota."""
        held = self._cache.workloads.get(key)
        if held is None or not held.evicting:
            return False
        self._cache.set_evicting(held, False)
        self._queues.wake(self._cache.tree_members(held.cluster_queue))
        return True

    def _release(self, key: WorkloadKey) -> bool:
        released = self._cache.release(key)
        if released is None:
            return False
        self._queues.wake(self._cache.tree_members(released.cluster_queue))
        return True

    # -- the cycle -------------------------------------------------------------------

    def schedule(self, now: float) -> CycleResult:
        """Run one scheduling cycle at time ``now`` and return its decisions."""
        evicted = self._drain() + self._evict_on_failed_nodes()
        decisions = self._scheduler.cycle(now)
        pending = tuple(
            Pending(entry.key, entry.reason)
            for entry in self._queues.take_changed_reasons()
            if entry.reason is not None and entry.key in self._queues.pending
        )
        return CycleResult(
            admitted=tuple(decisions.admitted),
            preempted=tuple(decisions.preempted),
            evicted=tuple(evicted),
            pending=pending,
            evaluated=decisions.evaluated,
            more=self._has_heads(),
            next_requeue_at=self._queues.next_requeue_at(),
        )

    def _has_heads(self) -> bool:
        queues = self._queues
        for name in sorted(queues.ready):
            queue = queues.queues.get(name)
            if queue is not None and queue.stopped_reason is None and queue.peek() is not None:
                return True
            queues.ready.discard(name)
        return False

    def _evict_on_failed_nodes(self) -> list[Evict]:
        """A workload placed by topology on a node that is gone or not Ready is evicted, to
        be placed again on healthy nodes (kfed replaces no node: docs/tas.md)."""
        failed = self._cache.tas.take_failed_hosts()
        if not failed:
            return []
        evicted: list[Evict] = []
        for held in list(self._cache.workloads.values()):
            if held.evicting:
                continue
            hit = sorted(
                {
                    d.values[-1]
                    for psa in held.admission.pod_set_assignments
                    if psa.topology_assignment is not None
                    and psa.topology_assignment.levels[-1:] == (HOSTNAME,)
                    for d in psa.topology_assignment.domains
                    if d.values[-1] in failed
                }
            )
            if hit:
                self._cache.set_evicting(held, True)
                evicted.append(
                    Evict(
                        held.key,
                        held.cluster_queue,
                        EvictionReason.NODE_FAILURES,
                        "Workload was evicted as there was no replacement for unhealthy "
                        f"node(s): {', '.join(hit)}",
                    )
                )
        return evicted

    def _drain(self) -> list[Evict]:
        """HoldAndDrain: evict what still holds quota in stopped queues, once each."""
        evicted: list[Evict] = []
        for name in sorted(self._drain_cluster_queues):
            cq = self._cache.cluster_queues.get(name)
            if cq is None or cq.spec.stop_policy is not StopPolicy.HOLD_AND_DRAIN:
                continue
            for held in cq.workloads.values():
                if not held.evicting:
                    self._cache.set_evicting(held, True)
                    evicted.append(
                        Evict(
                            held.key,
                            name,
                            EvictionReason.CLUSTER_QUEUE_STOPPED,
                            f"The ClusterQueue {name} is stopped",
                        )
                    )
        for key in sorted(self._drain_local_queues):
            lq = self._queues.local_queues.get(key)
            if lq is None or lq.stop_policy is not StopPolicy.HOLD_AND_DRAIN:
                continue
            for held in self._cache.by_cluster_queue.get(lq.cluster_queue, {}).values():
                if held.local_queue == key and not held.evicting:
                    self._cache.set_evicting(held, True)
                    evicted.append(
                        Evict(
                            held.key,
                            held.cluster_queue,
                            EvictionReason.LOCAL_QUEUE_STOPPED,
                            f"The LocalQueue {key} is stopped",
                        )
                    )
        self._drain_cluster_queues.clear()
        self._drain_local_queues.clear()
        return evicted

    # -- views -----------------------------------------------------------------------

    @property
    def heads_evaluated(self) -> int:
        """Heads judged by every cycle so far (admitted, preempting or left pending)."""
        return self._scheduler.evaluated

    @property
    def heads_nominated(self) -> int:
        """Of those, how many were nominated afresh (the rest: a remembered answer)."""
        return self._scheduler.nominated

    def workload_state(self, key: WorkloadKey) -> WorkloadState | None:
        held = self._cache.workloads.get(key)
        if held is not None:
            return WorkloadState.ADMITTED if held.admitted else WorkloadState.QUOTA_RESERVED
        return WorkloadState.PENDING if key in self._queues.pending else None

    def flavor(self, name: FlavorName) -> ResourceFlavor | None:
        """The flavor an admission names (its nodeLabels/tolerations go into the pods)."""
        return self._cache.flavors.get(name)

    def topology_snapshots(self) -> tuple[int, dict[FlavorName, TopologySnapshot]]:
        """The domain tree of every TAS flavor whose Topology is known, and a version that
        changes whenever one of them may have (what the worker shim reports to managers)."""
        tas = self._cache.tas
        trees = {}
        for name, flavor in self._cache.flavors.items():
            snapshot = tas.snapshot(flavor)
            if snapshot is not None:
                trees[name] = snapshot
        return tas.version + self._cache.config_version, trees

    def cluster_queue_path(self, name: ClusterQueueName) -> str:
        """A ClusterQueue's place in its cohort tree (``/cohort/cq``), "UNKNOWN" as Kueue
        says when it is not known."""
        cq = self._cache.cluster_queues.get(name)
        return cq.path() if cq is not None else "UNKNOWN"

    def admission(self, key: WorkloadKey) -> Admission | None:
        held = self._cache.workloads.get(key)
        return held.admission if held is not None else None

    def pending_reason(self, key: WorkloadKey) -> PendingReason | None:
        """Why a pending workload isn't admitted yet (None if it isn't pending)."""
        entry = self._queues.pending.get(key)
        if entry is None:
            return None
        blocked = self._queues.blocked_reason(entry)
        if blocked is not None and (
            entry.reason is None or entry.reason.kind is reasons.PendingKind.QUEUED
        ):
            return blocked
        return entry.reason or reasons.queued()

    def pending_workloads(
        self, name: ClusterQueueName, *, limit: int | None = None
    ) -> list[WorkloadKey]:
        """A ClusterQueue's pending workloads by queue position (Kueue's visibility API)."""
        return [entry.key for entry in self._queues.positions(name, limit)]

    def pending_counts(self, name: ClusterQueueName) -> tuple[int, int]:
        """(active, inadmissible) pending workloads of a ClusterQueue, split as Kueue's
        kueue_pending_workloads metric splits them: inadmissible ones are parked, backing
        off, or in a queue that cannot admit anything now."""
        queue = self._queues.queues.get(name)
        if queue is None:
            return 0, 0
        total = len(queue.members)
        if queue.stopped_reason is not None:
            return 0, total
        active = sum(1 for e in queue.members.values() if e.location is Location.ACTIVE)
        return active, total - active

    def next_requeue_at(self) -> float | None:
        return self._queues.next_requeue_at()

    def cluster_queue_status(self, name: ClusterQueueName) -> ClusterQueueStatus | None:
        cq = self._cache.cluster_queues.get(name)
        if cq is None:
            return None
        queue = self._queues.queues.get(name)
        reason, message = cq.inactive or ("Ready", "Can admit new workloads")
        return ClusterQueueStatus(
            name=name,
            active=cq.inactive is None,
            reason=reason,
            message=message,
            pending=len(queue.members) if queue is not None else 0,
            reserving=len(cq.workloads),
            admitted=cq.admitted_count,
            flavors_reservation=_flavor_usage(cq, cq.usage, with_borrowed=True),
            flavors_usage=_flavor_usage(cq, cq.admitted_usage, with_borrowed=True),
            weighted_share=fairsharing.dominant_resource_share(cq) if self._fair_sharing else 0.0,
        )

    def local_queue_status(self, key: LocalQueueKey) -> LocalQueueStatus | None:
        lq = self._queues.local_queues.get(key)
        if lq is None:
            return None
        cq = self._cache.cluster_queues.get(lq.cluster_queue)
        held = self._cache.local_queues.get(key)
        if lq.stop_policy is not StopPolicy.NONE:
            active, reason, message = False, "Stopped", f"stopPolicy is {lq.stop_policy}"
        elif cq is None:
            active, reason, message = (
                False,
                "ClusterQueueDoesNotExist",
                f"ClusterQueue {lq.cluster_queue} doesn't exist",
            )
        elif cq.inactive is not None:
            active, reason, message = (
                False,
                "ClusterQueueIsInactive",
                f"ClusterQueue {lq.cluster_queue} is inactive",
            )
        else:
            active, reason, message = True, "Ready", "Can submit new workloads to LocalQueue"
        empty: dict[FlavorResource, int] = {}
        return LocalQueueStatus(
            key=key,
            active=active,
            reason=reason,
            message=message,
            pending=len(self._queues.by_local_queue.get(key, {})),
            reserving=held.reserving if held else 0,
            admitted=held.admitted if held else 0,
            flavors_reservation=_flavor_usage(
                cq, held.reservation if held else empty, with_borrowed=False
            ),
            flavors_usage=_flavor_usage(cq, held.usage if held else empty, with_borrowed=False),
        )


def _stopped_reason(cq: ClusterQueueState) -> PendingReason | None:
    if cq.inactive is None:
        return None
    if cq.inactive[0] == INACTIVE_STOPPED:
        return reasons.cluster_queue_stopped(cq.spec.name)
    return reasons.cluster_queue_inactive(cq.spec.name, cq.inactive[1])


def _flavor_usage(
    cq: ClusterQueueState | None, usage: Mapping[FlavorResource, int], *, with_borrowed: bool
) -> tuple[FlavorUsage, ...]:
    """Per flavor of the ClusterQueue spec, per covered resource, in spec order."""
    if cq is None:
        return ()
    result: list[FlavorUsage] = []
    for rg in cq.spec.resource_groups:
        for flavor in rg.flavors:
            resources: list[ResourceUsage] = []
            for resource in rg.covered_resources:
                fr = (flavor.name, resource)
                total = usage.get(fr, 0)
                nominal = cq.quotas[fr].nominal if fr in cq.quotas else 0
                borrowed = max(0, total - nominal) if with_borrowed else 0
                resources.append(ResourceUsage(resource, total, borrowed))
            result.append(FlavorUsage(flavor.name, tuple(resources)))
    return tuple(result)
