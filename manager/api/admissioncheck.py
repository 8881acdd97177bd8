"""AdmissionCheck: a gate, beyond quota, that a workload passes before it is admitted.

MultiKueue is one: a ClusterQueue on the manager lists an AdmissionCheck whose
``controllerName`` is ``kueue.x-k8s.io/multikueue``, and the workload is admitted on the
manager only once a worker cluster has admitted its copy.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar, Literal

from pydantic import Field

from manager.api.constants import GROUP, VERSION
from manager.api.meta import Conditions, KubeModel, KubeObject, ResourceInfo
from manager.api.schema import DNS1123_LABEL, DNS1123_SUBDOMAIN, K8s, Rule

_KIND = r"^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$"


class CheckState(StrEnum):
    """The state of one admission check for one workload."""

    PENDING = "Pending"
    READY = "Ready"
    RETRY = "Retry"
    """Evict the workload, release its quota, and try again later."""
    REJECTED = "Rejected"
    """Deactivate the workload: it will never pass this check."""


class AdmissionCheckParametersReference(KubeModel):
    """Points at an object that configures the check's controller (e.g. a MultiKueueConfig)."""

    api_group: Annotated[str, Field(min_length=1, max_length=253, pattern=DNS1123_SUBDOMAIN)]
    """The API group of the parameters object, e.g. ``kueue.x-k8s.io``."""
    kind: Annotated[str, Field(min_length=1, max_length=63, pattern=_KIND)]
    """The kind of the parameters object, e.g. ``MultiKueueConfig``."""
    name: Annotated[str, Field(min_length=1, max_length=63, pattern=DNS1123_LABEL)]
    """The name of the parameters object."""


class AdmissionCheckSpec(KubeModel):
    """Which controller decides the check, and with what parameters."""

    controller_name: Annotated[
        str,
        Field(min_length=1, max_length=253),
        K8s(rules=(Rule(rule="self == oldSelf", message="controllerName is immutable"),)),
    ]
    """The controller that sets this check's state; ``kueue.x-k8s.io/multikueue`` for MultiKueue."""
    parameters: AdmissionCheckParametersReference | None = None
    """The object configuring the controller (for MultiKueue: a MultiKueueConfig)."""


class AdmissionCheckStatus(KubeModel):
    """Whether the check's controller is ready."""

    conditions: Conditions = Field(default_factory=list)
    """``Active``: whether the check's controller is ready to evaluate workloads."""


class AdmissionCheck(KubeObject):
    """An admission check that ClusterQueues can require."""

    resource: ClassVar[ResourceInfo] = ResourceInfo(
        group=GROUP,
        version=VERSION,
        kind="AdmissionCheck",
        plural="admissionchecks",
        singular="admissioncheck",
        scope="Cluster",
        short_names=("ac",),
    )

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["AdmissionCheck"] = "AdmissionCheck"
    spec: Annotated[AdmissionCheckSpec, K8s(optional_in_schema=True)]
    status: AdmissionCheckStatus | None = None
