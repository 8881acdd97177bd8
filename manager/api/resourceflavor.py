"""ResourceFlavor: a kind of node (e.g. a GPU model), described by labels and taints."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from manager.api.constants import GROUP, VERSION
from manager.api.meta import KubeModel, KubeObject, ResourceInfo
from manager.api.pod import Taint, Toleration
from manager.api.schema import DNSSubdomain, K8s, Rule

_TOLERATION_RULES = (
    Rule(
        rule=(
            "self.all(t, (has(t.key) && t.key != '')"
            " || (has(t.operator) && t.operator == 'Exists'))"
        ),
        message="operator must be Exists when key is empty (which matches every taint)",
    ),
    Rule(
        rule="self.all(t, !has(t.operator) || t.operator in ['', 'Equal', 'Exists'])",
        message="operator must be Equal or Exists",
    ),
    Rule(
        rule=(
            "self.all(t, !(has(t.operator) && t.operator == 'Exists')"
            " || !has(t.value) || t.value == '')"
        ),
        message="value must be empty when operator is Exists",
    ),
    Rule(
        rule=(
            "self.all(t, !has(t.effect)"
            " || t.effect in ['', 'NoSchedule', 'PreferNoSchedule', 'NoExecute'])"
        ),
        message="effect must be NoSchedule, PreferNoSchedule or NoExecute",
    ),
    Rule(
        rule="self.all(t, !has(t.tolerationSeconds) || (has(t.effect) && t.effect == 'NoExecute'))",
        message="tolerationSeconds requires effect NoExecute",
    ),
)

_TAINT_RULES = (
    Rule(
        rule="self.all(t, t.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])",
        message="effect must be NoSchedule, PreferNoSchedule or NoExecute",
    ),
)


class ResourceFlavorSpec(KubeModel):
    """How to find, and get onto, the nodes of a flavor."""

    node_labels: Annotated[dict[str, str], Field(max_length=8), K8s(map_type="atomic")] = Field(
        default_factory=dict
    )
    """Labels of the flavor's nodes; admission adds them to the pods' nodeSelector."""
    node_taints: Annotated[
        list[Taint], Field(max_length=8), K8s(list_type="atomic", rules=_TAINT_RULES)
    ] = Field(default_factory=list)
    """Taints of the flavor's nodes: a workload must tolerate them to get this flavor."""
    tolerations: Annotated[
        list[Toleration], Field(max_length=8), K8s(list_type="atomic", rules=_TOLERATION_RULES)
    ] = Field(default_factory=list)
    """Tolerations that admission adds to the pods of workloads given this flavor."""
    topology_name: DNSSubdomain | None = None
    """The Topology of the flavor's nodes: pod sets given this flavor are placed by topology
    (docs/tas.md)."""


class ResourceFlavor(KubeObject):
    """A flavor of resources: the same cpu, memory or GPU quota, on a certain kind of node."""

    resource: ClassVar[ResourceInfo] = ResourceInfo(
        group=GROUP,
        version=VERSION,
        kind="ResourceFlavor",
        plural="resourceflavors",
        singular="resourceflavor",
        scope="Cluster",
        short_names=("rf", "flavor", "flavors"),
        status_subresource=False,
    )

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["ResourceFlavor"] = "ResourceFlavor"
    spec: ResourceFlavorSpec = Field(default_factory=ResourceFlavorSpec)
