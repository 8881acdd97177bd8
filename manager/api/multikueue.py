"""MultiKueueConfig and MultiKueueCluster: the worker clusters a manager dispatches to.

A MultiKueueCluster says how to reach one worker (a kubeconfig in a Secret, or a
ClusterProfile of the cluster inventory API); a MultiKueueConfig lists, in order, the
clusters an AdmissionCheck may dispatch to.
kfed adds ``kfed.io/maintenance: cordon|drain`` as an annotation on a MultiKueueCluster,
never as a field.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar, Literal

from pydantic import ConfigDict, Field

from manager.api.constants import GROUP, VERSION
from manager.api.meta import Conditions, KubeModel, KubeObject, PrinterColumn, ResourceInfo
from manager.api.schema import K8s, Rule, model_extra

ClusterName = Annotated[str, Field(max_length=256)]


class MultiKueueConfigSpec(KubeModel):
    """The worker clusters to dispatch to."""

    clusters: Annotated[
        list[ClusterName],
        Field(min_length=1, max_length=20),
        K8s(
            list_type="atomic",
            rules=(
                Rule(
                    rule="self.all(c, self.exists_one(x, x == c))",
                    message="clusters must not repeat a cluster",
                ),
            ),
        ),
    ]
    """MultiKueueCluster names, in order of preference (the order matters for
    incremental dispatch)."""
    quota_management: QuotaManagement | None = None
    """``Manual`` (the default: quotas as written) or ``Automated``: the nominal quota of each
    manager ClusterQueue whose MultiKueue check names this config follows the sum of its
    workers' (upstream's alpha MultiKueueManagerQuotaAutomation; docs/federation.md)."""


class QuotaManagement(StrEnum):
    MANUAL = "Manual"
    AUTOMATED = "Automated"


class MultiKueueConfig(KubeObject):
    """A set of worker clusters, referenced by an AdmissionCheck's parameters."""

    resource: ClassVar[ResourceInfo] = ResourceInfo(
        group=GROUP,
        version=VERSION,
        kind="MultiKueueConfig",
        plural="multikueueconfigs",
        singular="multikueueconfig",
        scope="Cluster",
        short_names=("mkconf",),
        status_subresource=False,
    )

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["MultiKueueConfig"] = "MultiKueueConfig"
    spec: Annotated[MultiKueueConfigSpec, K8s(optional_in_schema=True)]


class LocationType(StrEnum):
    """Where a worker's kubeconfig is kept."""

    SECRET = "Secret"
    """A Secret in the manager's namespace, key ``kubeconfig``."""
    PATH = "Path"
    """A file on the manager's filesystem."""


class KubeConfig(KubeModel):
    """Where to find the kubeconfig of a worker cluster."""

    location: Annotated[str, Field(min_length=1, max_length=256)]
    """The Secret's name, or the file's path."""
    location_type: LocationType = LocationType.SECRET
    """``Secret`` (the default) or ``Path``."""


class ClusterProfileReference(KubeModel):
    """A ClusterProfile (sigs.k8s.io/cluster-inventory-api) describing the worker, in the
    manager's namespace."""

    name: Annotated[str, Field(min_length=1, max_length=256)]
    """The ClusterProfile's name."""


class ClusterSource(KubeModel):
    """How to reach a worker: exactly one of a kubeconfig or a ClusterProfile."""

    model_config = ConfigDict(
        json_schema_extra=model_extra(
            Rule(
                rule="has(self.kubeConfig) != has(self.clusterProfileRef)",
                message="exactly one of kubeConfig and clusterProfileRef must be set",
            )
        )
    )

    kube_config: KubeConfig | None = None
    """Where the worker's kubeconfig is kept."""
    cluster_profile_ref: ClusterProfileReference | None = None
    """A ClusterProfile in the manager's namespace: its access providers give the worker's
    endpoint, the manager's configured plugin its credentials (docs/clusterprofile.md)."""


class MultiKueueClusterSpec(KubeModel):
    """How to reach a worker cluster."""

    cluster_source: ClusterSource
    """How to reach the worker."""


class MultiKueueClusterStatus(KubeModel):
    """Whether the worker is connected (condition ``Active``)."""

    conditions: Conditions = Field(default_factory=list)
    """``Active``: True when connected; False with a reason (BadKubeConfig,
    ClientConnectionFailed...) otherwise."""


class MultiKueueCluster(KubeObject):
    """A worker cluster the manager can dispatch workloads to."""

    resource: ClassVar[ResourceInfo] = ResourceInfo(
        group=GROUP,
        version=VERSION,
        kind="MultiKueueCluster",
        plural="multikueueclusters",
        singular="multikueuecluster",
        scope="Cluster",
        short_names=("mkc",),
        printer_columns=(
            PrinterColumn(
                "Connected",
                ".status.conditions[?(@.type=='Active')].status",
                "string",
                "Whether the manager is connected to the cluster",
            ),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date", "Time since creation"),
        ),
    )

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["MultiKueueCluster"] = "MultiKueueCluster"
    spec: Annotated[MultiKueueClusterSpec, K8s(optional_in_schema=True)]
    status: MultiKueueClusterStatus | None = None
