"""kfed's API: pydantic models of the kueue.x-k8s.io/v1beta2 kinds and of batch/v1 Job.

The models are the single source of truth for the CRDs in ``crds/`` (see ``crdgen``).
The kinds can be imported from here; the quantity helpers live in
``manager.api.quantity`` and the well-known names in ``manager.api.constants``.

The re-exports are resolved lazily, so that importing the light modules (constants,
quantity), as the admission core does, does not build every model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from manager.api.admissioncheck import AdmissionCheck
    from manager.api.batch import Job
    from manager.api.clusterqueue import ClusterQueue
    from manager.api.cohort import Cohort
    from manager.api.kinds import KUEUE_KINDS, UnknownKind, model_for, parse_object
    from manager.api.localqueue import LocalQueue
    from manager.api.meta import Condition, KubeObject, ObjectMeta
    from manager.api.multikueue import MultiKueueCluster, MultiKueueConfig
    from manager.api.priorityclass import WorkloadPriorityClass
    from manager.api.quantity import Quantity
    from manager.api.resourceflavor import ResourceFlavor
    from manager.api.workload import Workload

_HOMES = {
    "AdmissionCheck": "admissioncheck",
    "ClusterQueue": "clusterqueue",
    "Cohort": "cohort",
    "Condition": "meta",
    "Job": "batch",
    "KUEUE_KINDS": "kinds",
    "KubeObject": "meta",
    "LocalQueue": "localqueue",
    "MultiKueueCluster": "multikueue",
    "MultiKueueConfig": "multikueue",
    "ObjectMeta": "meta",
    "Quantity": "quantity",
    "ResourceFlavor": "resourceflavor",
    "UnknownKind": "kinds",
    "Workload": "workload",
    "WorkloadPriorityClass": "priorityclass",
    "model_for": "kinds",
    "parse_object": "kinds",
}

__all__ = [
    "KUEUE_KINDS",
    "AdmissionCheck",
    "ClusterQueue",
    "Cohort",
    "Condition",
    "Job",
    "KubeObject",
    "LocalQueue",
    "MultiKueueCluster",
    "MultiKueueConfig",
    "ObjectMeta",
    "Quantity",
    "ResourceFlavor",
    "UnknownKind",
    "Workload",
    "WorkloadPriorityClass",
    "model_for",
    "parse_object",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
