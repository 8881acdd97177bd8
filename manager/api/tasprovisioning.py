"""Topology and ProvisioningRequestConfig: upstream kinds kfed serves with upstream's v1beta2
schemas, so that upstream's manifests for them apply unchanged. A Topology's levels are
acted on by topology-aware scheduling (docs/tas.md); a ProvisioningRequestConfig is stored,
not acted on (no ProvisioningRequest admission check; docs/api.md)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar, Literal

from pydantic import Field

from manager.api.constants import GROUP, VERSION
from manager.api.meta import KubeModel, KubeObject, PrinterColumn, ResourceInfo
from manager.api.schema import DNSSubdomain, Int32, K8s, Rule

QUALIFIED_NAME = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
"""A label key (``example.com/rack``), as Kubernetes validates it."""


class TopologyLevel(KubeModel):
    """One level of a topology: the node label that names its domains."""

    node_label: Annotated[str, Field(min_length=1, max_length=316, pattern=QUALIFIED_NAME)]
    """The node label, e.g. ``cloud.provider.com/topology-rack``."""


class TopologySpec(KubeModel):
    """A topology's levels, from the largest domain to the smallest."""

    levels: Annotated[
        list[TopologyLevel],
        Field(min_length=1, max_length=16),
        K8s(
            list_type="atomic",
            rules=(
                Rule(rule="self == oldSelf", message="field is immutable"),
                Rule(
                    rule="size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0",
                    message="must be unique",
                ),
                Rule(
                    rule=(
                        "size(self.filter(i, i.nodeLabel == 'kubernetes.io/hostname')) == 0"
                        " || self[size(self) - 1].nodeLabel == 'kubernetes.io/hostname'"
                    ),
                    message=(
                        "the kubernetes.io/hostname label can only be used at the lowest "
                        "level of topology"
                    ),
                ),
            ),
        ),
    ]
    """The levels, largest first; ``kubernetes.io/hostname`` only as the last."""


class Topology(KubeObject):
    """A data center's topology for topology-aware scheduling: its levels, widest first."""

    resource: ClassVar[ResourceInfo] = ResourceInfo(
        group=GROUP,
        version=VERSION,
        kind="Topology",
        plural="topologies",
        singular="topology",
        scope="Cluster",
        short_names=("topo",),
        printer_columns=(
            PrinterColumn("Age", ".metadata.creationTimestamp", "date", "Time since creation"),
        ),
        status_subresource=False,
    )

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["Topology"] = "Topology"
    spec: Annotated[TopologySpec, K8s(optional_in_schema=True)]


class PodSetMergePolicy(StrEnum):
    IDENTICAL_POD_TEMPLATES = "IdenticalPodTemplates"
    IDENTICAL_WORKLOAD_SCHEDULING_REQUIREMENTS = "IdenticalWorkloadSchedulingRequirements"


class NodeSelectorFromDetail(KubeModel):
    """A node selector entry whose value comes from the ProvisioningRequest's details."""

    key: Annotated[str, Field(min_length=1, max_length=317, pattern=QUALIFIED_NAME)]
    """The node label."""
    value_from_provisioning_class_detail: Annotated[str, Field(min_length=1, max_length=32768)]
    """The detail whose value becomes the label's."""


class ProvisioningPodSetUpdates(KubeModel):
    """What to add to the pods once the ProvisioningRequest is provisioned."""

    node_selector: Annotated[
        list[NodeSelectorFromDetail],
        Field(max_length=8),
        K8s(list_type="map", list_map_keys=("key",)),
    ] = Field(default_factory=list)
    """Node selector entries."""


class RetryStrategy(KubeModel):
    """How often and when a failed ProvisioningRequest is tried again."""

    backoff_limit_count: Int32 = 3
    """Retries before the workload is rejected."""
    backoff_base_seconds: Int32 = 60
    """The first back-off, doubled at each retry."""
    backoff_max_seconds: Int32 = 1800
    """The longest back-off."""


class ProvisioningRequestConfigSpec(KubeModel):
    """The ProvisioningRequest a ProvisioningRequest admission check creates."""

    provisioning_class_name: Annotated[DNSSubdomain, Field(min_length=1)]
    """The cluster autoscaler's provisioning class."""
    parameters: Annotated[
        dict[str, Annotated[str, Field(max_length=255)]], Field(max_length=100)
    ] = Field(default_factory=dict)
    """Parameters for the provisioning class."""
    managed_resources: Annotated[list[str], Field(max_length=100), K8s(list_type="set")] = Field(
        default_factory=list
    )
    """The resources the autoscaler manages."""
    retry_strategy: RetryStrategy = Field(
        default_factory=RetryStrategy,
        json_schema_extra={
            "default": {"backoffBaseSeconds": 60, "backoffLimitCount": 3, "backoffMaxSeconds": 1800}
        },
    )
    """Retries of a failed request."""
    pod_set_updates: ProvisioningPodSetUpdates | None = None
    """What to add to the pods."""
    pod_set_merge_policy: PodSetMergePolicy | None = None
    """How pod sets are merged into the request's pod sets."""


class ProvisioningRequestConfig(KubeObject):
    """Parameters of upstream's ProvisioningRequest admission check. Stored, not acted on:
    kfed runs no ProvisioningRequest check."""

    resource: ClassVar[ResourceInfo] = ResourceInfo(
        group=GROUP,
        version=VERSION,
        kind="ProvisioningRequestConfig",
        plural="provisioningrequestconfigs",
        singular="provisioningrequestconfig",
        scope="Cluster",
        short_names=("prc",),
        printer_columns=(
            PrinterColumn("Age", ".metadata.creationTimestamp", "date", "Time since creation"),
        ),
        status_subresource=False,
    )

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["ProvisioningRequestConfig"] = "ProvisioningRequestConfig"
    spec: Annotated[ProvisioningRequestConfigSpec, K8s(optional_in_schema=True)]
