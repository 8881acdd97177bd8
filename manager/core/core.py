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

from manager.core import reasons
from manager.core.cache import INACTIVE_STOPPED, Cache
from manager.core.cachestate import ClusterQueueState
from manager.core.coreviews import CoreViews
from manager.core.decisions import Admission, CycleResult, Evict, EvictionReason, Pending
from manager.core.model import (
    ClusterQueue,
    ClusterQueueName,
    Cohort,
    CohortName,
    FairSharingConfig,
    FlavorName,
    LocalQueue,
    LocalQueueKey,
    Namespace,
    ResourceFlavor,
    ResourceName,
    StopPolicy,
    Workload,
    WorkloadKey,
)
from manager.core.queues import QueueManager
from manager.core.reasons import PendingReason
from manager.core.scheduler import Scheduler
from manager.core.tas import TopologySnapshot
from manager.core.tas_model import HOSTNAME, Node, Topology


class AdmissionCore(CoreViews):
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
    ) -> bool:
        """Add or update a pending workload; False when nothing changed (the same workload
        queued already), so that no scheduling cycle need look again.

        ``order_time`` defaults to the creation time; pass the eviction time for a
        workload that was evicted before (Kueue orders those by eviction time).
        A workload that already holds quota only has its spec refreshed (e.g. priority).
        """
        held = self._cache.workloads.get(workload.key)
        if held is not None:
            if held.workload == workload:
                return False
            self._cache.refresh(held, workload)
            return True
        start = workload.creation_time if order_time is None else order_time
        return self._queues.upsert(workload, order_time=start, requeue_at=requeue_at)

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


def _stopped_reason(cq: ClusterQueueState) -> PendingReason | None:
    if cq.inactive is None:
        return None
    if cq.inactive[0] == INACTIVE_STOPPED:
        return reasons.cluster_queue_stopped(cq.spec.name)
    return reasons.cluster_queue_inactive(cq.spec.name, cq.inactive[1])
