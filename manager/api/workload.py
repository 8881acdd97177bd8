"""Workload: the unit of admission, one per Job, with the pods it needs and its state.

The Job integration creates a Workload for every queued Job (one pod set per distinct
pod template). Admission reserves quota for all pod sets at once and records the flavor
each resource got in ``status.admission``; the conditions tell the rest of the story
(QuotaReserved, Admitted, Evicted, Preempted, Requeued, Finished).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar, Literal

from pydantic import ConfigDict, Field

from manager.api.admissioncheck import CheckState
from manager.api.constants import GROUP, VERSION
from manager.api.meta import Conditions, KubeModel, KubeObject, PrinterColumn, ResourceInfo, Time
from manager.api.pod import PodTemplateSpec, ResourceList, Toleration
from manager.api.schema import (
    DNSSubdomain,
    Int32,
    K8s,
    NonNegativeInt32,
    PodSetName,
    Rule,
    model_extra,
)
from manager.api.topology import DelayedTopologyRequest, TopologyAssignment, TopologyRequest

_QUOTA_RESERVED = (
    "has({0}.status) && has({0}.status.conditions)"
    " && {0}.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True')"
)


class PodSet(KubeModel):
    """A group of identical pods: a template and how many of it."""

    model_config = ConfigDict(
        json_schema_extra=model_extra(
            Rule(
                rule="!has(self.minCount) || self.minCount <= self.count",
                message="minCount must not exceed count",
                field_path=".minCount",
            )
        )
    )

    name: PodSetName = "main"
    """The pod set's name, unique in the workload (``main`` for a Job)."""
    template: PodTemplateSpec
    """The pods' template: their resource requests are what admission counts."""
    count: NonNegativeInt32 = 1
    """How many pods of this template run."""
    min_count: Annotated[NonNegativeInt32, Field(ge=1)] | None = None
    """With partial admission: the fewest pods the job can run with."""
    topology_request: TopologyRequest | None = None
    """How the pods should be placed across a topology (docs/tas.md)."""


class PriorityClassGroup(StrEnum):
    KUEUE = "kueue.x-k8s.io"
    SCHEDULING = "scheduling.k8s.io"


class PriorityClassKind(StrEnum):
    WORKLOAD_PRIORITY_CLASS = "WorkloadPriorityClass"
    PRIORITY_CLASS = "PriorityClass"


class PriorityClassRef(KubeModel):
    """The priority class a workload's priority came from."""

    model_config = ConfigDict(
        json_schema_extra=model_extra(
            Rule(
                rule="self.group != 'kueue.x-k8s.io' || self.kind == 'WorkloadPriorityClass'",
                message="kind must be WorkloadPriorityClass in group kueue.x-k8s.io",
                field_path=".kind",
            ),
            Rule(
                rule="self.group != 'scheduling.k8s.io' || self.kind == 'PriorityClass'",
                message="kind must be PriorityClass in group scheduling.k8s.io",
                field_path=".kind",
            ),
        )
    )

    group: PriorityClassGroup
    """``kueue.x-k8s.io`` or ``scheduling.k8s.io``."""
    kind: PriorityClassKind
    """``WorkloadPriorityClass`` (kueue.x-k8s.io) or ``PriorityClass`` (scheduling.k8s.io)."""
    name: Annotated[DNSSubdomain, Field(min_length=1)]
    """The priority class."""


class WorkloadSpec(KubeModel):
    """What a workload needs: its pod sets, its queue and its priority."""

    model_config = ConfigDict(
        json_schema_extra=model_extra(
            Rule(
                rule="!has(self.priorityClassRef) || has(self.priority)",
                message="priority must be set when priorityClassRef is set",
                field_path=".priority",
            )
        )
    )

    pod_sets: Annotated[
        list[PodSet],
        Field(min_length=1, max_length=18),
        K8s(list_type="map", list_map_keys=("name",)),
        K8s(optional_in_schema=True),
    ]
    """The pod sets, admitted all together or not at all."""
    queue_name: DNSSubdomain | None = None
    """The LocalQueue, in the workload's namespace."""
    priority_class_ref: PriorityClassRef | None = None
    """Where ``priority`` came from; needs ``priority`` to be set too."""
    priority: Int32 | None = None
    """Higher is admitted first and may preempt lower."""
    active: bool = True
    """false deactivates the workload: it is evicted and never admitted until reactivated."""
    maximum_execution_time_seconds: Annotated[Int32, Field(ge=1)] | None = None
    """How long the workload may run once admitted. Stored, not enforced."""
    preemption_gates: Annotated[
        list[PreemptionGate], Field(max_length=8), K8s(list_type="map", list_map_keys=("name",))
    ] = Field(default_factory=list)
    """Gates that hold preemptions back (orchestrated preemption). Stored, not acted on."""


class PreemptionGate(KubeModel):
    """A gate on a workload's preemptions."""

    name: Annotated[str, Field(min_length=1, max_length=63)]


class PodSetAssignment(KubeModel):
    """The flavors one pod set got, and the quota it uses."""

    name: PodSetName = "main"
    """The pod set."""
    flavors: dict[str, DNSSubdomain] = Field(default_factory=dict)
    """The flavor assigned to each resource."""
    resource_usage: ResourceList = Field(default_factory=dict)
    """The quota used, per resource: requests times count."""
    count: NonNegativeInt32 | None = None
    """The number of pods admitted (less than the pod set's count with partial admission)."""
    topology_assignment: TopologyAssignment | None = None
    """Where the pods go in the topology, written with the admission (docs/tas.md)."""
    delayed_topology_request: DelayedTopologyRequest | None = None
    """``Pending``: a worker places the pods by topology (a MultiKueue ClusterQueue)."""


class Admission(KubeModel):
    """Where a workload reserved quota, and which flavors it got."""

    cluster_queue: Annotated[DNSSubdomain, K8s(optional_in_schema=True)]
    """The ClusterQueue the quota is reserved in."""
    pod_set_assignments: Annotated[
        list[PodSetAssignment],
        Field(max_length=18),
        K8s(list_type="map", list_map_keys=("name",)),
    ] = Field(default_factory=list)
    """One entry per pod set."""


class PodSetUpdate(KubeModel):
    """Additions an admission check asks for in a pod set's pods."""

    name: PodSetName
    """The pod set to change."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Labels to add to the pods."""
    annotations: dict[str, str] = Field(default_factory=dict)
    """Annotations to add to the pods."""
    node_selector: dict[str, str] = Field(default_factory=dict)
    """Node selector entries to add to the pods."""
    tolerations: Annotated[list[Toleration], Field(max_length=8), K8s(list_type="atomic")] = Field(
        default_factory=list
    )
    """Tolerations to add to the pods."""


class AdmissionCheckState(KubeModel):
    """The state of one admission check for this workload."""

    name: Annotated[str, Field(min_length=1, max_length=316)]
    """The AdmissionCheck."""
    state: CheckState
    """Pending, Ready, Retry or Rejected."""
    last_transition_time: Time
    """When the state last changed."""
    message: Annotated[str, Field(max_length=32768)]
    """Why the check is in this state, for people."""
    pod_set_updates: Annotated[list[PodSetUpdate], Field(max_length=8), K8s(list_type="atomic")] = (
        Field(default_factory=list)
    )
    """Changes the check asks for in the pods once admitted."""
    requeue_after_seconds: NonNegativeInt32 | None = None
    """When a check in Retry may be tried again (ProvisioningRequest checks). Stored."""
    retry_count: NonNegativeInt32 | None = None
    """How many times the check was retried (ProvisioningRequest checks). Stored."""


class RequeueState(KubeModel):
    """Back-off bookkeeping for a workload evicted and requeued."""

    count: NonNegativeInt32 | None = None
    """How many times the workload was requeued."""
    requeue_at: Time | None = None
    """When the workload goes back to its queue."""


class ReclaimablePod(KubeModel):
    """Pods of a pod set that finished, whose quota can be released early."""

    name: PodSetName
    """The pod set."""
    count: NonNegativeInt32
    """How many of its pods finished."""


class WorkloadStatus(KubeModel):
    """Where a workload stands: conditions, admission, checks, and where it runs."""

    model_config = ConfigDict(
        json_schema_extra=model_extra(
            Rule(
                rule=(
                    "!has(self.clusterName) || !has(self.nominatedClusterNames)"
                    " || size(self.nominatedClusterNames) == 0"
                ),
                message="clusterName and nominatedClusterNames must not both be set",
                field_path=".clusterName",
            ),
            Rule(
                rule=(
                    "!has(oldSelf.clusterName) || !has(self.clusterName)"
                    " || oldSelf.clusterName == self.clusterName"
                ),
                message="clusterName cannot change once set (it may be cleared)",
                field_path=".clusterName",
            ),
        )
    )

    conditions: Conditions = Field(default_factory=list)
    """QuotaReserved, Admitted, Evicted, Preempted, Requeued, Finished, PodsReady."""
    admission: Admission | None = None
    """Set when quota is reserved."""
    requeue_state: RequeueState | None = None
    """Back-off after an eviction."""
    reclaimable_pods: Annotated[
        list[ReclaimablePod], Field(max_length=18), K8s(list_type="map", list_map_keys=("name",))
    ] = Field(default_factory=list)
    """Finished pods per pod set, whose quota is released early."""
    admission_checks: Annotated[
        list[AdmissionCheckState],
        Field(max_length=8),
        K8s(list_type="map", list_map_keys=("name",)),
    ] = Field(default_factory=list)
    """The state of each admission check of the workload's ClusterQueue."""
    nominated_cluster_names: Annotated[
        list[Annotated[str, Field(max_length=256)]], Field(max_length=20), K8s(list_type="atomic")
    ] = Field(default_factory=list)
    """Worker clusters the workload is being offered to (MultiKueue)."""
    cluster_name: Annotated[str, Field(max_length=256)] | None = None
    """The worker cluster that admitted the workload (MultiKueue)."""
    accumulated_past_execution_time_seconds: Int32 | None = None
    """Time run in earlier admissions (execution time limits). Stored, not acted on."""
    preemption_gates: Annotated[
        list[PreemptionGateState],
        Field(max_length=8),
        K8s(list_type="map", list_map_keys=("name",)),
    ] = Field(default_factory=list)
    """Each preemption gate's position. Stored, not acted on."""
    resource_requests: Annotated[
        list[PodSetRequest], Field(max_length=18), K8s(list_type="map", list_map_keys=("name",))
    ] = Field(default_factory=list)
    """A pending workload's requests per pod set (upstream publishes them). Stored."""
    scheduling_stats: SchedulingStats | None = None
    """Evictions by reason (upstream keeps them). Stored, not written by kfed."""
    unhealthy_nodes: Annotated[
        list[UnhealthyNode], Field(max_length=8), K8s(list_type="map", list_map_keys=("name",))
    ] = Field(default_factory=list)
    """Nodes to replace (topology-aware node replacement). Stored, not acted on."""


class GatePosition(StrEnum):
    CLOSED = "Closed"
    OPEN = "Open"


class PreemptionGateState(KubeModel):
    name: Annotated[str, Field(min_length=1, max_length=63)]
    position: GatePosition
    last_transition_time: Time


class PodSetRequest(KubeModel):
    name: PodSetName
    resources: ResourceList = Field(default_factory=dict)


class EvictionCount(KubeModel):
    reason: Annotated[str, Field(max_length=316)]
    underlying_cause: Annotated[str, Field(max_length=316)]
    count: NonNegativeInt32


class SchedulingStats(KubeModel):
    evictions: Annotated[
        list[EvictionCount],
        Field(max_length=256),
        K8s(list_type="map", list_map_keys=("reason", "underlyingCause")),
    ] = Field(default_factory=list)


class UnhealthyNode(KubeModel):
    name: Annotated[str, Field(max_length=63)]


class Workload(KubeObject):
    """A workload: a Job's pods as admission sees them."""

    model_config = ConfigDict(
        json_schema_extra=model_extra(
            Rule(
                rule=(
                    f"!({_QUOTA_RESERVED.format('self')} && has(self.status.admission))"
                    " || size(self.spec.podSets) == size(self.status.admission.podSetAssignments)"
                ),
                message="status.admission.podSetAssignments must have one entry per pod set",
            ),
            Rule(
                rule=(
                    f"!({_QUOTA_RESERVED.format('oldSelf')} && {_QUOTA_RESERVED.format('self')})"
                    " || (has(oldSelf.spec.queueName) == has(self.spec.queueName)"
                    " && (!has(self.spec.queueName)"
                    " || oldSelf.spec.queueName == self.spec.queueName))"
                ),
                message="spec.queueName is immutable while quota is reserved",
            ),
        )
    )

    resource: ClassVar[ResourceInfo] = ResourceInfo(
        group=GROUP,
        version=VERSION,
        kind="Workload",
        plural="workloads",
        singular="workload",
        scope="Namespaced",
        short_names=("wl", "kwl", "kueueworkload", "kueueworkloads"),
        printer_columns=(
            PrinterColumn("Queue", ".spec.queueName", "string", "The LocalQueue"),
            PrinterColumn(
                "Reserved in",
                ".status.admission.clusterQueue",
                "string",
                "The ClusterQueue where quota is reserved",
            ),
            PrinterColumn(
                "Admitted",
                ".status.conditions[?(@.type=='Admitted')].status",
                "string",
                "Whether the workload is admitted",
            ),
            PrinterColumn(
                "Finished",
                ".status.conditions[?(@.type=='Finished')].status",
                "string",
                "Whether the workload finished",
            ),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date", "Time since creation"),
        ),
        # Upstream's since v0.18: list the workloads holding quota in a ClusterQueue with
        # ``--field-selector status.admission.clusterQueue=NAME``.
        selectable_fields=(".status.admission.clusterQueue",),
    )

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["Workload"] = "Workload"
    spec: Annotated[WorkloadSpec, K8s(optional_in_schema=True)]
    status: WorkloadStatus | None = None
