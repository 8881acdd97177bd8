"""Plain dicts of the objects the CLI reads, for unit tests."""

from __future__ import annotations

from typing import Any

from manager.api import constants as C

Obj = dict[str, Any]


def flavor(name: str, labels: dict[str, str] | None = None, taints: list[Obj] | None = None) -> Obj:
    spec: Obj = {"nodeLabels": labels if labels is not None else {"gpu.model": name}}
    if taints:
        spec["nodeTaints"] = taints
    return {
        "apiVersion": C.API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": spec,
    }


def cluster_queue(
    name: str,
    quotas: dict[str, dict[str, Any]],
    *,
    reserved: dict[str, dict[str, Any]] | None = None,
    covered: tuple[str, ...] = ("cpu", "memory", "nvidia.com/gpu"),
    cohort: str | None = None,
) -> Obj:
    """``quotas``: flavor -> resource -> nominal quota, in flavor order."""
    spec: Obj = {
        "resourceGroups": [
            {
                "coveredResources": list(covered),
                "flavors": [
                    {
                        "name": f,
                        "resources": [{"name": r, "nominalQuota": q} for r, q in res.items()],
                    }
                    for f, res in quotas.items()
                ],
            }
        ]
    }
    if cohort:
        spec["cohortName"] = cohort
    status = {
        "flavorsReservation": [
            {"name": f, "resources": [{"name": r, "total": str(v)} for r, v in res.items()]}
            for f, res in (reserved or {}).items()
        ]
    }
    return {
        "apiVersion": C.API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
        "status": status,
    }


def condition(kind: str, status: bool, reason: str = "", message: str = "") -> Obj:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason or kind,
        "message": message,
        "lastTransitionTime": "2024-01-01T00:00:00Z",
    }


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
    created: str = "2024-01-01T00:00:00Z",
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
    return {
        "apiVersion": C.API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "creationTimestamp": created,
            "annotations": annotations or {},
        },
        "spec": {"queueName": queue, "podSets": []},
        "status": status,
    }


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
