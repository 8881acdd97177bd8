"""ClusterQueue: a cluster-wide pool of quota, per flavor and resource, with its policies."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar, Literal

from pydantic import ConfigDict, Field

from manager.api.constants import GROUP, VERSION
from manager.api.meta import (
    Conditions,
    KubeModel,
    KubeObject,
    LabelSelector,
    PrinterColumn,
    ResourceInfo,
)
from manager.api.quota import (
    FairSharing,
    FairSharingStatus,
    FlavorUsages,
    ResourceGroups,
    resource_groups_rules,
)
from manager.api.schema import (
    DNS1123_SUBDOMAIN,
    DNSSubdomain,
    Int32,
    K8s,
    Rule,
    model_extra,
    object_default,
)


class QueueingStrategy(StrEnum):
    """In which order a ClusterQueue's pending workloads are tried."""

    STRICT_FIFO = "StrictFIFO"
    """Priority, then age; an older workload that does not fit blocks newer ones."""
    BEST_EFFORT_FIFO = "BestEffortFIFO"
    """Priority, then age; workloads that do not fit are skipped until something changes."""


class StopPolicy(StrEnum):
    """Whether a queue admits new workloads and keeps the admitted ones."""

    NONE = "None"
    HOLD = "Hold"
    """Admit nothing new; admitted workloads keep running."""
    HOLD_AND_DRAIN = "HoldAndDrain"
    """Admit nothing new and evict the admitted workloads."""


class FlavorFungibilityPolicy(StrEnum):
    """What admission does when the current flavor fits only by borrowing or preempting."""

    MAY_STOP_SEARCH = "MayStopSearch"
    TRY_NEXT_FLAVOR = "TryNextFlavor"


class FlavorFungibilityPreference(StrEnum):
    """Which compromise wins when no flavor fits without borrowing or preempting."""

    BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"
    PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"


class FlavorFungibility(KubeModel):
    """When to stop at a flavor that needs borrowing or preemption, or try the next one."""

    model_config = ConfigDict(
        json_schema_extra=model_extra(
            Rule(
                rule=(
                    "!has(self.preference) || (self.whenCanBorrow == 'TryNextFlavor'"
                    " && self.whenCanPreempt == 'TryNextFlavor')"
                ),
                message=(
                    "preference may only be set when whenCanBorrow and whenCanPreempt"
                    " are both TryNextFlavor"
                ),
                field_path=".preference",
            )
        )
    )

    when_can_borrow: FlavorFungibilityPolicy = FlavorFungibilityPolicy.MAY_STOP_SEARCH
    """MayStopSearch: take a flavor that fits by borrowing. TryNextFlavor: look further."""
    when_can_preempt: FlavorFungibilityPolicy = FlavorFungibilityPolicy.TRY_NEXT_FLAVOR
    """MayStopSearch: preempt in a flavor that fits that way. TryNextFlavor: look further."""
    preference: FlavorFungibilityPreference | None = None
    """When every flavor needs a compromise: prefer borrowing or preempting."""


class ReclaimWithinCohort(StrEnum):
    """Whether to preempt other queues' workloads to get back lent quota."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    ANY = "Any"


class BorrowWithinCohortPolicy(StrEnum):
    """Whether to preempt in the cohort in order to borrow."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


class WithinClusterQueue(StrEnum):
    """Whether to preempt the queue's own workloads for a pending one."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"


class BorrowWithinCohort(KubeModel):
    """Preemption of other queues' workloads while borrowing."""

    policy: BorrowWithinCohortPolicy = BorrowWithinCohortPolicy.NEVER
    """``LowerPriority``: may preempt lower-priority workloads of other queues to borrow."""
    max_priority_threshold: Int32 | None = None
    """Only workloads at or below this priority may be preempted this way."""


class ClusterQueuePreemption(KubeModel):
    """When a pending workload may preempt admitted ones."""

    model_config = ConfigDict(
        json_schema_extra=model_extra(
            Rule(
                rule=(
                    "!(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort)"
                    " && self.borrowWithinCohort.policy != 'Never')"
                ),
                message="borrowWithinCohort.policy must be Never when reclaimWithinCohort is Never",
                field_path=".borrowWithinCohort.policy",
            )
        )
    )

    reclaim_within_cohort: ReclaimWithinCohort = ReclaimWithinCohort.NEVER
    """Preempt workloads of other queues that borrow this queue's nominal quota:
    ``Never``, ``LowerPriority`` ones, or ``Any``."""
    borrow_within_cohort: BorrowWithinCohort = Field(
        default_factory=BorrowWithinCohort, json_schema_extra=object_default()
    )
    within_cluster_queue: WithinClusterQueue = WithinClusterQueue.NEVER
    """Preempt this queue's own workloads: ``Never``, ``LowerPriority`` ones, or
    ``LowerOrNewerEqualPriority`` ones."""


class AdmissionCheckStrategyRule(KubeModel):
    """An admission check, applied to all flavors or only to some."""

    name: Annotated[str, Field(min_length=1, max_length=316)]
    """The AdmissionCheck."""
    on_flavors: Annotated[
        list[Annotated[str, Field(max_length=253, pattern=DNS1123_SUBDOMAIN)]],
        Field(max_length=64),
        K8s(list_type="set"),
    ] = Field(default_factory=list)
    """The flavors the check applies to; empty means all."""


class AdmissionChecksStrategy(KubeModel):
    """The admission checks a workload must pass, beyond quota, before it is admitted."""

    admission_checks: Annotated[
        list[AdmissionCheckStrategyRule],
        Field(min_length=1, max_length=64),
        K8s(list_type="map", list_map_keys=("name",)),
    ]
    """The checks, by AdmissionCheck name."""


class ClusterQueueSpec(KubeModel):
    """Quotas, cohort membership and admission policies of a ClusterQueue."""

    model_config = ConfigDict(json_schema_extra=model_extra(*resource_groups_rules("cohortName")))

    resource_groups: ResourceGroups = Field(default_factory=list)
    """Quotas per flavor and resource; a resource appears in one group only."""
    cohort_name: DNSSubdomain | None = None
    """The cohort this queue borrows from and lends to."""
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    """``BestEffortFIFO`` (the default) or ``StrictFIFO``."""
    namespace_selector: LabelSelector | None = None
    """Namespaces whose LocalQueues may point here: unset selects none, ``{}`` all."""
    flavor_fungibility: FlavorFungibility = Field(
        default_factory=FlavorFungibility, json_schema_extra=object_default()
    )
    """Whether admission settles for a flavor that needs borrowing or preemption."""
    preemption: ClusterQueuePreemption = Field(
        default_factory=ClusterQueuePreemption, json_schema_extra=object_default()
    )
    """Which admitted workloads a pending one may preempt."""
    admission_checks_strategy: AdmissionChecksStrategy | None = None
    """Admission checks (e.g. MultiKueue) a workload passes after reserving quota."""
    stop_policy: StopPolicy = StopPolicy.NONE
    """``Hold`` stops admitting; ``HoldAndDrain`` also evicts the admitted workloads."""
    fair_sharing: FairSharing | None = None
    """This queue's weight when fair sharing is enabled."""
    admission_scope: AdmissionScope | None = None
    """Admission fair sharing between its LocalQueues. Stored, not acted on: kfed admits
    in queue order (its ClusterQueue status says so while it is set)."""
    concurrent_admission_policy: ConcurrentAdmissionPolicy | None = None
    """Concurrent admission (flavor migration). Stored, not acted on."""


class AdmissionMode(StrEnum):
    USAGE_BASED = "UsageBasedAdmissionFairSharing"
    NONE = "NoAdmissionFairSharing"


class AdmissionScope(KubeModel):
    admission_mode: AdmissionMode


class MigrationMode(StrEnum):
    TRY_PREFERRED_FLAVORS = "TryPreferredFlavors"
    RETAIN_FIRST_ADMISSION = "RetainFirstAdmission"


class MigrationConstraints(KubeModel):
    last_acceptable_flavor_name: DNSSubdomain | None = None


class Migration(KubeModel):
    mode: Annotated[MigrationMode, Field(max_length=253)]
    constraints: MigrationConstraints | None = None


class ConcurrentAdmissionPolicy(KubeModel):
    migration: Migration


class ClusterQueueStatus(KubeModel):
    """What a ClusterQueue holds: workload counts and quota in use."""

    conditions: Conditions = Field(default_factory=list)
    """``Active``: whether the queue can admit workloads, with the reason if not."""
    flavors_reservation: FlavorUsages = Field(default_factory=list)
    """Quota reserved by workloads, admitted or not yet, per flavor and resource."""
    flavors_usage: FlavorUsages = Field(default_factory=list)
    """Quota used by admitted workloads, per flavor and resource."""
    pending_workloads: Int32 | None = None
    """Workloads waiting for quota."""
    reserving_workloads: Int32 | None = None
    """Workloads holding quota, admitted or waiting for admission checks."""
    admitted_workloads: Int32 | None = None
    """Admitted workloads that have not finished."""
    fair_sharing: FairSharingStatus | None = None
    """The queue's current share when fair sharing is enabled."""


class ClusterQueue(KubeObject):
    """A cluster-wide queue: LocalQueues point to it, and it owns quota per flavor."""

    resource: ClassVar[ResourceInfo] = ResourceInfo(
        group=GROUP,
        version=VERSION,
        kind="ClusterQueue",
        plural="clusterqueues",
        singular="clusterqueue",
        scope="Cluster",
        short_names=("cq",),
        printer_columns=(
            PrinterColumn("Cohort", ".spec.cohortName", "string", "The cohort it belongs to"),
            PrinterColumn(
                "Strategy", ".spec.queueingStrategy", "string", "How workloads are ordered"
            ),
            PrinterColumn(
                "Pending Workloads", ".status.pendingWorkloads", "integer", "Workloads waiting"
            ),
            PrinterColumn(
                "Admitted Workloads",
                ".status.admittedWorkloads",
                "integer",
                "Admitted workloads that have not finished",
            ),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date", "Time since creation"),
        ),
    )

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["ClusterQueue"] = "ClusterQueue"
    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)
    status: ClusterQueueStatus | None = None
