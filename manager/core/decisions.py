"""What one scheduling cycle decides; controllers apply these through the API.

The core has already *assumed* every ``Admit`` (its usage counts from now on) and has
marked every victim of a ``Preempt`` or ``Evict`` as being evicted. Controllers report
back with ``confirm``/``forget`` and ``evict``/``cancel_eviction`` on the facade.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from manager.core.model import (
    ClusterQueueName,
    FlavorName,
    FlavorResource,
    PodSetName,
    ResourceName,
    WorkloadKey,
)
from manager.core.reasons import PendingReason
from manager.core.tas_model import TopologyAssignment


class PreemptionReason(StrEnum):
    """Kueue's Preempted condition reasons."""

    IN_CLUSTER_QUEUE = "InClusterQueue"
    IN_COHORT_RECLAMATION = "InCohortReclamation"
    IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
    IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"

    @property
    def human(self) -> str:
        return _HUMAN_PREEMPTION_REASONS[self]


_HUMAN_PREEMPTION_REASONS = {
    PreemptionReason.IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    PreemptionReason.IN_COHORT_RECLAMATION: "reclamation within the cohort",
    PreemptionReason.IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING: (
        "reclamation within the cohort while borrowing"
    ),
}


class EvictionReason(StrEnum):
    """Kueue's Evicted condition reasons the core can decide on its own."""

    CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
    LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
    NODE_FAILURES = "NodeFailures"
    """A node its pods were placed on by topology is gone or not Ready (docs/tas.md)."""


@dataclass(frozen=True, slots=True)
class PodSetAssignment:
    """Mirrors Workload ``status.admission.podSetAssignments[]``; usage is for all pods."""

    name: PodSetName
    flavors: Mapping[ResourceName, FlavorName]
    resource_usage: Mapping[ResourceName, int]
    count: int
    topology_assignment: TopologyAssignment | None = None
    """Where its pods go in its flavor's topology (TAS); None when not placed by topology."""
    delayed_topology: bool = False
    """Placed by topology later, elsewhere: a MultiKueue ClusterQueue's worker computes the
    assignment (upstream's ``delayedTopologyRequest: Pending``)."""


@dataclass(frozen=True, slots=True)
class Admission:
    """Mirrors Workload ``status.admission``."""

    cluster_queue: ClusterQueueName
    pod_set_assignments: tuple[PodSetAssignment, ...]

    def usage(self) -> dict[FlavorResource, int]:
        """Quota this admission holds, per flavor and resource."""
        usage: dict[FlavorResource, int] = {}
        for psa in self.pod_set_assignments:
            for resource, value in psa.resource_usage.items():
                flavor = psa.flavors.get(resource)
                if flavor is None or value == 0:
                    continue
                fr = (flavor, resource)
                usage[fr] = usage.get(fr, 0) + value
        return usage


@dataclass(frozen=True, slots=True)
class Admit:
    """Quota is reserved for ``workload``: write status.admission and QuotaReserved=True."""

    workload: WorkloadKey
    admission: Admission
    usage: Mapping[FlavorResource, int]
    borrowing: bool

    @property
    def cluster_queue(self) -> ClusterQueueName:
        return self.admission.cluster_queue


@dataclass(frozen=True, slots=True)
class Victim:
    workload: WorkloadKey
    cluster_queue: ClusterQueueName
    reason: PreemptionReason
    message: str


@dataclass(frozen=True, slots=True)
class Preempt:
    """Evict ``victims`` (Evicted=True/Preempted, Preempted=True/reason) to make room."""

    preemptor: WorkloadKey
    cluster_queue: ClusterQueueName
    victims: tuple[Victim, ...]


@dataclass(frozen=True, slots=True)
class Evict:
    """Evict an admitted workload for a reason other than preemption (a stopped queue)."""

    workload: WorkloadKey
    cluster_queue: ClusterQueueName
    reason: EvictionReason
    message: str


@dataclass(frozen=True, slots=True)
class Pending:
    """A pending workload whose reason changed since the previous cycle."""

    workload: WorkloadKey
    reason: PendingReason


@dataclass(frozen=True, slots=True)
class CycleResult:
    admitted: tuple[Admit, ...] = ()
    preempted: tuple[Preempt, ...] = ()
    evicted: tuple[Evict, ...] = ()
    pending: tuple[Pending, ...] = ()
    evaluated: int = 0
    """Heads nominated in this cycle; each got an admit, a preemption or a pending verdict."""
    more: bool = False
    """Another cycle right away could make progress (there are unevaluated heads)."""
    next_requeue_at: float | None = None
    """Earliest time a backed-off workload becomes eligible; schedule again then."""
