"""The core's inputs: plain frozen dataclasses mirroring the kueue.x-k8s.io/v1beta2 kinds.

Controllers convert API objects into these (quantities already as ints: milli-units for
cpu, plain units such as bytes for everything else) so the core never sees YAML,
pydantic or Kubernetes clients. Field names follow Kueue's, in snake case; defaults
follow Kueue's API defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NewType

from manager.core.selectors import LabelSelector, NodeSelectorTerm, Taint, Toleration

FlavorName = NewType("FlavorName", str)
ResourceName = NewType("ResourceName", str)
ClusterQueueName = NewType("ClusterQueueName", str)
CohortName = NewType("CohortName", str)
Namespace = NewType("Namespace", str)
LocalQueueKey = NewType("LocalQueueKey", str)
"""``namespace/name`` of a LocalQueue."""
WorkloadKey = NewType("WorkloadKey", str)
"""``namespace/name`` of a Workload."""
PodSetName = NewType("PodSetName", str)

FlavorResource = tuple[FlavorName, ResourceName]
"""The unit quota is accounted in: one resource of one flavor."""

PODS = ResourceName("pods")
"""The pseudo-resource counting pods, when a ClusterQueue covers it."""


def local_queue_key(namespace: str, name: str) -> LocalQueueKey:
    return LocalQueueKey(f"{namespace}/{name}")


def split_key(key: str) -> tuple[Namespace, str]:
    namespace, _, name = key.partition("/")
    return Namespace(namespace), name


class QueueingStrategy(StrEnum):
    STRICT_FIFO = "StrictFIFO"
    BEST_EFFORT_FIFO = "BestEffortFIFO"


class PreemptionPolicy(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"  # withinClusterQueue only
    ANY = "Any"  # reclaimWithinCohort only


class BorrowWithinCohortPolicy(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


class FungibilityPolicy(StrEnum):
    MAY_STOP_SEARCH = "MayStopSearch"
    TRY_NEXT_FLAVOR = "TryNextFlavor"


class FungibilityPreference(StrEnum):
    BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"
    PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"


class StopPolicy(StrEnum):
    NONE = "None"
    HOLD = "Hold"
    HOLD_AND_DRAIN = "HoldAndDrain"


@dataclass(frozen=True, slots=True)
class ResourceFlavor:
    name: FlavorName
    node_labels: Mapping[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_name: str | None = None
    """The Topology of its nodes: pod sets given it are placed by topology (core/tas.py)."""


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """Quota of one resource in one flavor. ``None`` limits mean unlimited."""

    name: ResourceName
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    name: FlavorName
    resources: tuple[ResourceQuota, ...]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    """Resources that must be served by the same flavor, tried in ``flavors`` order."""

    covered_resources: tuple[ResourceName, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True, slots=True)
class BorrowWithinCohort:
    policy: BorrowWithinCohortPolicy = BorrowWithinCohortPolicy.NEVER
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True)
class ClusterQueuePreemption:
    within_cluster_queue: PreemptionPolicy = PreemptionPolicy.NEVER
    reclaim_within_cohort: PreemptionPolicy = PreemptionPolicy.NEVER
    borrow_within_cohort: BorrowWithinCohort = BorrowWithinCohort()


@dataclass(frozen=True, slots=True)
class FlavorFungibility:
    when_can_borrow: FungibilityPolicy = FungibilityPolicy.MAY_STOP_SEARCH
    when_can_preempt: FungibilityPolicy = FungibilityPolicy.TRY_NEXT_FLAVOR
    preference: FungibilityPreference | None = None


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    """A ClusterQueue spec.

    ``namespace_selector=None`` selects no namespace (the API's null); an empty
    ``LabelSelector()`` selects every namespace.
    """

    name: ClusterQueueName
    resource_groups: tuple[ResourceGroup, ...] = ()
    cohort: CohortName | None = None
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    namespace_selector: LabelSelector | None = None
    preemption: ClusterQueuePreemption = ClusterQueuePreemption()
    flavor_fungibility: FlavorFungibility = FlavorFungibility()
    stop_policy: StopPolicy = StopPolicy.NONE
    fair_sharing_weight: float = 1.0
    configuration_problem: tuple[str, str] | None = None
    """(reason, message) of a misconfiguration found outside the core that keeps it inactive,
    e.g. a MultiKueue admission check limited to some flavors (upstream refuses that too)."""
    check_controllers: frozenset[str] = frozenset()
    """The controllers of the admission checks every workload of it passes (their AdmissionChecks'
    ``spec.controllerName``): a workload left to one of them needs it here (``Workload.
    left_to_check``)."""
    colocated_flavors: tuple[frozenset[FlavorName], ...] = ()
    """When not empty, the flavors one workload may be given together: each set is what one
    place that runs whole workloads offers (kfed's manager: the flavors one worker cluster
    has). A workload's flavors then all come from one set, so that one worker can hold it all
    (a cpu-only launcher beside H100 trainers gets H100's quota, not the first flavor's)."""


@dataclass(frozen=True, slots=True)
class Cohort:
    """A Cohort object. CQs may also name a cohort that has no object (an implicit cohort)."""

    name: CohortName
    parent: CohortName | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_sharing_weight: float = 1.0


@dataclass(frozen=True, slots=True)
class LocalQueue:
    namespace: Namespace
    name: str
    cluster_queue: ClusterQueueName
    stop_policy: StopPolicy = StopPolicy.NONE

    @property
    def key(self) -> LocalQueueKey:
        return local_queue_key(self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """How a pod set's pods are placed in a topology (Kueue's ``topologyRequest``): all in
    one domain of ``required``, in as few domains as possible from ``preferred`` up, or
    anywhere (``unconstrained``); and each slice of ``slice_size`` pods in one domain of
    ``slice_required``."""

    required: str | None = None
    preferred: str | None = None
    unconstrained: bool = False
    slice_required: str | None = None
    slice_size: int | None = None

    @property
    def asks(self) -> bool:
        """Does it ask for anything (a request with only bookkeeping fields does not)?"""
        return bool(self.required or self.preferred or self.unconstrained or self.slice_required)


@dataclass(frozen=True, slots=True)
class PodSet:
    """A group of identical pods. ``requests`` are per pod."""

    name: PodSetName
    count: int
    requests: Mapping[ResourceName, int]
    min_count: int | None = None  # partial admission is not supported: admitted at count
    node_selector: Mapping[str, str] = field(default_factory=dict)
    node_affinity: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_request: TopologyRequest | None = None


@dataclass(frozen=True, slots=True)
class Workload:
    """A Workload as the core needs it. ``priority`` is already resolved (see priority.py)."""

    key: WorkloadKey
    queue_name: str
    pod_sets: tuple[PodSet, ...]
    priority: int = 0
    creation_time: float = 0.0
    uid: str = ""
    not_chargeable: str | None = None
    """Why its requests cannot be charged as submitted, found outside the core (device claims
    kfed cannot count: docs/dra.md); never admitted, pending with this message."""
    left_to_check: str | None = None
    """The admission check controller its job is left to run by, if any (a Job with
    ``spec.managedBy: kueue.x-k8s.io/multikueue`` is run by MultiKueue only). Admitted only in a
    ClusterQueue with a check of that controller: anywhere else nothing would ever run it, and
    it would hold its quota for ever."""

    @property
    def namespace(self) -> Namespace:
        return split_key(self.key)[0]

    @property
    def local_queue(self) -> LocalQueueKey:
        return local_queue_key(self.namespace, self.queue_name)


class FairSharingStrategy(StrEnum):
    """Rules deciding whether a borrowing ClusterQueue may lose a workload to fair sharing."""

    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
    LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"


@dataclass(frozen=True, slots=True)
class FairSharingConfig:
    """Kueue's ``fairSharing`` manager configuration; the core runs without it when None."""

    preemption_strategies: tuple[FairSharingStrategy, ...] = (
        FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
        FairSharingStrategy.LESS_THAN_INITIAL_SHARE,
    )
