"""Typed views of the ``core/v1`` pod types that admission reads and writes.

Admission needs a pod's resource requests, where it may run (nodeSelector, required node
affinity, tolerations) and little else. These models type exactly those parts and keep
every other field as it came (``extra="allow"`` in Python, and
``x-kubernetes-preserve-unknown-fields`` where they are embedded in a CRD, i.e.
``Workload.spec.podSets[].template``). Upstream Kueue embeds the full 18,000-line pod
schema there; kfed validates the parts it acts on and leaves the rest to the apiserver
that validates the Pods themselves.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import ConfigDict, Field

from manager.api.meta import EmbeddedObjectMeta, KubeModel, Time
from manager.api.quantity import Quantity
from manager.api.schema import Int32, Int64, K8s, model_extra

ResourceList = dict[str, Quantity]
"""Quantities by resource name, e.g. ``{"cpu": "2", "nvidia.com/gpu": 1}``."""


class PassThroughModel(KubeModel):
    """A partially typed object: in a CRD its unknown fields are kept, not pruned."""

    model_config = ConfigDict(json_schema_extra=model_extra(preserve_unknown_fields=True))


class TaintEffect(StrEnum):
    """What happens to pods that do not tolerate a taint."""

    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class TolerationOperator(StrEnum):
    """How a toleration matches a taint's value."""

    EQUAL = "Equal"
    EXISTS = "Exists"


class Taint(KubeModel):
    """A node taint (``core/v1`` Taint)."""

    key: str
    """The taint key."""
    value: str | None = None
    """The taint value."""
    effect: str
    """NoSchedule, PreferNoSchedule or NoExecute."""
    time_added: Time | None = None
    """When a NoExecute taint was added."""


class Toleration(KubeModel):
    """A pod toleration (``core/v1`` Toleration)."""

    key: str | None = None
    """The taint key matched; empty with operator Exists matches every taint."""
    operator: str | None = None
    """Equal (the default) or Exists."""
    value: str | None = None
    """The taint value matched when the operator is Equal."""
    effect: str | None = None
    """The taint effect matched; empty matches all effects."""
    toleration_seconds: Int64 | None = None
    """How long a NoExecute taint is tolerated; unset means forever."""


class NodeSelectorRequirement(KubeModel):
    """One ``key operator values`` term matched against node labels or fields."""

    key: str
    """The node label (or field) key."""
    operator: str
    """In, NotIn, Exists, DoesNotExist, Gt or Lt."""
    values: Annotated[list[str], K8s(list_type="atomic")] = Field(default_factory=list)
    """The values to compare with."""


class NodeSelectorTerm(KubeModel):
    """A term of a node selector: all its requirements must match."""

    model_config = ConfigDict(json_schema_extra=K8s(map_type="atomic").keywords())

    match_expressions: Annotated[list[NodeSelectorRequirement], K8s(list_type="atomic")] = Field(
        default_factory=list
    )
    """Requirements on node labels."""
    match_fields: Annotated[list[NodeSelectorRequirement], K8s(list_type="atomic")] = Field(
        default_factory=list
    )


class NodeSelector(KubeModel):
    """Node selector terms: at least one of them must match (they are ORed)."""

    model_config = ConfigDict(json_schema_extra=K8s(map_type="atomic").keywords())

    node_selector_terms: Annotated[list[NodeSelectorTerm], K8s(list_type="atomic")]
    """The terms; a node matches if any term matches."""


class NodeAffinity(PassThroughModel):
    """Node affinity: kfed reads only the required part (preferences are kept as is)."""

    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    """Nodes the pod may run on; a flavor is only eligible if its labels satisfy it."""


class Affinity(PassThroughModel):
    """Pod affinity rules: kfed reads only node affinity (pod (anti-)affinity is kept)."""

    node_affinity: NodeAffinity | None = None


class ResourceRequirements(PassThroughModel):
    """A container's (or pod's) resource requests and limits."""

    requests: ResourceList = Field(default_factory=dict)
    """What the container is guaranteed: what admission counts against quota."""
    limits: ResourceList = Field(default_factory=dict)
    """The most the container may use; requests default to limits when unset."""


class Container(PassThroughModel):
    """A container: kfed reads its name and resources."""

    name: str
    """The container's name, unique in the pod."""
    image: str | None = None
    """The container image."""
    resources: ResourceRequirements | None = None
    """Requests and limits: what admission counts."""
    restart_policy: str | None = None
    """``Always`` on an init container makes it a sidecar that runs for the pod's life."""


class PodSpec(PassThroughModel):
    """A pod spec: containers and placement; everything else passes through."""

    containers: Annotated[list[Container], K8s(list_type="map", list_map_keys=("name",))]
    """The containers; their requests add up to the pod's."""
    init_containers: Annotated[list[Container], K8s(list_type="map", list_map_keys=("name",))] = (
        Field(default_factory=list)
    )
    """Init containers; the largest request among them also bounds the pod's."""
    node_selector: Annotated[dict[str, str], K8s(map_type="atomic")] = Field(default_factory=dict)
    """Node labels the pod requires; admission adds the flavor's nodeLabels here."""
    affinity: Affinity | None = None
    """Scheduling constraints; a flavor must satisfy the required node affinity."""
    tolerations: Annotated[list[Toleration], K8s(list_type="atomic")] = Field(default_factory=list)
    """Taints the pod tolerates; admission adds the flavor's tolerations here."""
    priority_class_name: str | None = None
    """The pods' PriorityClass; also the workload's priority unless a
    WorkloadPriorityClass is set."""
    priority: Int32 | None = None
    """The pods' priority, resolved from the PriorityClass."""
    restart_policy: str | None = None
    """Always, OnFailure or Never."""
    scheduler_name: str | None = None
    """The scheduler that places the pods."""
    overhead: ResourceList = Field(default_factory=dict)
    """Per-pod resources on top of the containers' (from the RuntimeClass)."""
    resources: ResourceRequirements | None = None
    """Pod-level resources, when the PodLevelResources feature is used."""


class PodTemplateSpec(KubeModel):
    """A pod template: the metadata and spec each pod of a Job or pod set is made from."""

    metadata: EmbeddedObjectMeta = Field(default_factory=EmbeddedObjectMeta)
    """Labels and annotations of the pods."""
    spec: Annotated[PodSpec, K8s(optional_in_schema=True)]
    """The pods' spec."""
