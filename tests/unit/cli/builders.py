"""Plain dicts of the objects the CLI reads, for unit tests: the shared builders
(``tests/builders``) with the CLI tests' defaults (namespace ``ml-jobs``, queue ``gpu-lq``,
a ClusterQueue's reservation in its status)."""

from __future__ import annotations

from typing import Any

from manager.api import constants as C
from tests import builders
from tests.builders import T0, condition

__all__ = ["admission", "cluster_queue", "condition", "flavor", "reserved_conditions", "workload"]

Obj = dict[str, Any]


def flavor(name: str, labels: dict[str, str] | None = None, taints: list[Obj] | None = None) -> Obj:
    node_labels = labels if labels is not None else {"gpu.model": name}
    return builders.resource_flavor(name, node_labels=node_labels, taints=taints or ())


def cluster_queue(
    name: str,
    quotas: dict[str, dict[str, Any]],
    *,
    reserved: dict[str, dict[str, Any]] | None = None,
    covered: tuple[str, ...] = ("cpu", "memory", "nvidia.com/gpu"),
    cohort: str | None = None,
) -> Obj:
    """``quotas``: flavor -> resource -> nominal quota, in flavor order; ``reserved`` the
    same shape, as the status's ``flavorsReservation``."""
    body = builders.cluster_queue(name, quotas, covered=covered, cohort=cohort)
    del body["spec"]["namespaceSelector"]
    body["status"] = {
        "flavorsReservation": [
            {"name": f, "resources": [{"name": r, "total": str(v)} for r, v in res.items()]}
            for f, res in (reserved or {}).items()
        ]
    }
    return body


def workload(
    name: str,
    *,
    namespace: str = "ml-jobs",
    queue: str = "gpu-lq",
    conditions: list[Obj] | None = None,
    admission: Obj | None = None,
    checks: list[Obj] | None = None,
    cluster: str | None = None,
    nominated: list[str] | None = None,
    annotations: dict[str, str] | None = None,
    created: str = T0,
) -> Obj:
    status: Obj = {"conditions": conditions or []}
    if admission is not None:
        status["admission"] = admission
    if checks is not None:
        status["admissionChecks"] = checks
    if cluster:
        status["clusterName"] = cluster
    if nominated:
        status["nominatedClusterNames"] = nominated
    return builders.workload(
        name,
        namespace=namespace,
        queue=queue,
        pod_sets=[],
        annotations=annotations or {},
        created=created,
        status=status,
    )


def admission(cq: str, flavor_name: str, gpus: int = 1) -> Obj:
    return {
        "clusterQueue": cq,
        "podSetAssignments": [
            {
                "name": "main",
                "flavors": {"cpu": flavor_name, "nvidia.com/gpu": flavor_name},
                "resourceUsage": {"cpu": "2", "nvidia.com/gpu": str(gpus)},
                "count": 1,
            }
        ],
    }


def reserved_conditions(admitted: bool) -> list[Obj]:
    conds = [condition(C.QUOTA_RESERVED, True, message="Quota reserved in ClusterQueue cq")]
    if admitted:
        conds.append(condition(C.ADMITTED, True, message="The workload is admitted"))
    return conds
