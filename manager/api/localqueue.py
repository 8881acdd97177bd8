"""LocalQueue: the namespaced name users submit to; it points at one ClusterQueue."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from manager.api.clusterqueue import StopPolicy
from manager.api.constants import GROUP, VERSION
from manager.api.meta import Conditions, KubeModel, KubeObject, PrinterColumn, ResourceInfo, Time
from manager.api.pod import ResourceList
from manager.api.quota import FairSharing, FairSharingStatus, LocalQueueFlavorUsages
from manager.api.schema import DNSSubdomain, Int32, K8s, Rule


class LocalQueueSpec(KubeModel):
    """Which ClusterQueue a LocalQueue feeds, and whether it is stopped."""

    cluster_queue: Annotated[
        DNSSubdomain,
        K8s(rules=(Rule(rule="self == oldSelf", message="clusterQueue is immutable"),)),
        K8s(optional_in_schema=True),
    ]
    """The ClusterQueue whose quota this queue's workloads use. Immutable."""
    stop_policy: StopPolicy = StopPolicy.NONE
    """``Hold`` stops admitting; ``HoldAndDrain`` also evicts the admitted workloads."""
    fair_sharing: FairSharing | None = None
    """This queue's weight when fair sharing is enabled."""


class LocalQueueStatus(KubeModel):
    """What a LocalQueue holds: workload counts and the quota its workloads use."""

    conditions: Conditions = Field(default_factory=list)
    """``Active``: whether the queue and its ClusterQueue can admit workloads."""
    pending_workloads: Int32 | None = None
    """Workloads waiting for quota."""
    reserving_workloads: Int32 | None = None
    """Workloads holding quota, admitted or waiting for admission checks."""
    admitted_workloads: Int32 | None = None
    """Admitted workloads that have not finished."""
    flavors_reservation: LocalQueueFlavorUsages = Field(default_factory=list)
    """Quota reserved by this queue's workloads, per flavor and resource."""
    flavors_usage: LocalQueueFlavorUsages = Field(default_factory=list)
    """Quota used by this queue's admitted workloads, per flavor and resource."""
    fair_sharing: LocalQueueFairSharingStatus | None = None
    """The queue's current share when fair sharing is enabled."""


class AdmissionFairSharingStatus(KubeModel):
    """Upstream's admission fair sharing usage of a LocalQueue. Stored, not written."""

    consumed_resources: ResourceList
    last_update: Time


class LocalQueueFairSharingStatus(FairSharingStatus):
    admission_fair_sharing_status: AdmissionFairSharingStatus | None = None


class LocalQueue(KubeObject):
    """A namespaced queue: Jobs name it in the ``kueue.x-k8s.io/queue-name`` label."""

    resource: ClassVar[ResourceInfo] = ResourceInfo(
        group=GROUP,
        version=VERSION,
        kind="LocalQueue",
        plural="localqueues",
        singular="localqueue",
        scope="Namespaced",
        short_names=("lq", "queue", "queues"),
        printer_columns=(
            PrinterColumn("ClusterQueue", ".spec.clusterQueue", "string", "The ClusterQueue"),
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
    kind: Literal["LocalQueue"] = "LocalQueue"
    spec: Annotated[LocalQueueSpec, K8s(optional_in_schema=True)]
    status: LocalQueueStatus | None = None
