"""The kinds kfed serves under kueue.x-k8s.io, and parsing an object by its kind."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from manager.api.admissioncheck import AdmissionCheck
from manager.api.batch import Job
from manager.api.clusterqueue import ClusterQueue
from manager.api.cohort import Cohort
from manager.api.localqueue import LocalQueue
from manager.api.meta import KubeObject
from manager.api.multikueue import MultiKueueCluster, MultiKueueConfig
from manager.api.priorityclass import WorkloadPriorityClass
from manager.api.resourceflavor import ResourceFlavor
from manager.api.tasprovisioning import ProvisioningRequestConfig, Topology
from manager.api.workload import Workload

KUEUE_KINDS: tuple[type[KubeObject], ...] = (
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    LocalQueue,
    MultiKueueCluster,
    MultiKueueConfig,
    ProvisioningRequestConfig,
    ResourceFlavor,
    Topology,
    WorkloadPriorityClass,
    Workload,
)
"""Every kind with a generated CRD, in file-name order."""

_MODELS: tuple[type[KubeObject], ...] = (*KUEUE_KINDS, Job)
_BY_TYPE = {(m.resource.api_version, m.resource.kind): m for m in _MODELS}


class UnknownKind(LookupError):
    """An object whose apiVersion and kind kfed has no model for."""


def model_for(api_version: str, kind: str) -> type[KubeObject]:
    """The model class for an apiVersion and kind; raises ``UnknownKind``."""
    try:
        return _BY_TYPE[(api_version, kind)]
    except KeyError:
        raise UnknownKind(f"kfed has no model for {kind} in {api_version}") from None


def parse_object(data: Mapping[str, Any]) -> KubeObject:
    """Parse an object (as read from the apiserver or a manifest) into its model."""
    model = model_for(str(data.get("apiVersion")), str(data.get("kind")))
    return model.model_validate(data)
