"""What the admission core answers about its state, without changing it: a workload's
state, admission and pending reason, queue positions and counts, and each ClusterQueue's
and LocalQueue's status (Kueue's status fields and gauges). ``AdmissionCore`` has these."""

from __future__ import annotations

from collections.abc import Mapping

from manager.core import fairsharing, reasons
from manager.core.cache import Cache
from manager.core.cachestate import ClusterQueueState
from manager.core.decisions import Admission
from manager.core.model import (
    ClusterQueueName,
    FairSharingConfig,
    FlavorName,
    FlavorResource,
    LocalQueueKey,
    ResourceFlavor,
    ResourceName,
    StopPolicy,
    WorkloadKey,
)
from manager.core.pending import Location
from manager.core.queues import QueueManager
from manager.core.reasons import PendingReason
from manager.core.scheduler import Scheduler
from manager.core.tas import TopologySnapshot
from manager.core.views import (
    ClusterQueueStatus,
    FlavorUsage,
    LocalQueueStatus,
    ResourceUsage,
    WorkloadState,
)


class CoreViews:
    """The read side of ``AdmissionCore``."""

    _cache: Cache
    _queues: QueueManager
    _scheduler: Scheduler
    _fair_sharing: FairSharingConfig | None

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

    def pending_requests(self, name: ClusterQueueName) -> dict[ResourceName, int]:
        """What a ClusterQueue's pending workloads (active, parked and backing off) request
        in all, per resource, in core units: each pod set's per-pod requests times its count
        (upstream's ``kueue_cluster_queue_resource_pending``, before flavors)."""
        queue = self._queues.queues.get(name)
        total: dict[ResourceName, int] = {}
        if queue is None:
            return total
        for entry in queue.members.values():
            for ps in entry.workload.pod_sets:
                for resource, value in ps.requests.items():
                    total[resource] = total.get(resource, 0) + value * ps.count
        return total

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
