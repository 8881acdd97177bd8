"""Builders for the kueue objects the CLI integration tests arrange (names are the test's)."""

from __future__ import annotations

import json
from typing import Any

from manager.api import constants as C
from manager.federation.settings import PLACEMENT_ANNOTATION

Obj = dict[str, Any]
T0 = "2024-01-01T00:00:00Z"


def flavor(name: str) -> Obj:
    return {
        "apiVersion": C.API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": {"gpu.model": name}},
    }


def cluster_queue(name: str, gpus: dict[str, int], checks: list[str] | None = None) -> Obj:
    spec: Obj = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": f,
                        "resources": [
                            {"name": "cpu", "nominalQuota": 64},
                            {"name": "nvidia.com/gpu", "nominalQuota": n},
                        ],
                    }
                    for f, n in gpus.items()
                ],
            }
        ],
    }
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    return {
        "apiVersion": C.API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def local_queue(namespace: str, name: str, cq: str) -> Obj:
    return {
        "apiVersion": C.API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def multikueue_check(name: str, config: str) -> Obj:
    return {
        "apiVersion": C.API_VERSION,
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {
            "controllerName": C.MULTIKUEUE_CONTROLLER_NAME,
            "parameters": {"apiGroup": C.GROUP, "kind": "MultiKueueConfig", "name": config},
        },
    }


def job_yaml(
    namespace: str,
    name: str,
    *,
    gpus: int = 1,
    model: str | None = None,
    labels: dict[str, str] | None = None,
) -> str:
    selector = f"\n      nodeSelector:\n        gpu.model: {model}" if model else ""
    label_lines = "".join(f"\n    {k}: {v}" for k, v in (labels or {}).items())
    return f"""apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: {namespace}
  labels:{label_lines or " {}"}
spec:
  template:
    spec:
      restartPolicy: Never{selector}
      containers:
        - name: main
          image: busybox
          resources:
            requests:
              cpu: "1"
              nvidia.com/gpu: "{gpus}"
            limits:
              nvidia.com/gpu: "{gpus}"
"""


def workload(
    namespace: str, name: str, queue: str, *, annotations: dict[str, str] | None = None
) -> Obj:
    return {
        "apiVersion": C.API_VERSION,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}},
        "spec": {
            "queueName": queue,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}},
                }
            ],
        },
    }


def condition(kind: str, status: bool, reason: str, message: str) -> Obj:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": T0,
    }


def pending_status(message: str) -> Obj:
    return {"conditions": [condition(C.QUOTA_RESERVED, False, "Pending", message)]}


def reserved_status(
    cq: str,
    flavor_name: str,
    check: str,
    *,
    state: str,
    message: str,
    cluster: str | None = None,
    nominated: list[str] | None = None,
) -> Obj:
    conditions = [
        condition(C.QUOTA_RESERVED, True, "QuotaReserved", f"Quota reserved in ClusterQueue {cq}")
    ]
    if state == "Ready":
        conditions.append(condition(C.ADMITTED, True, "Admitted", "The workload is admitted"))
    status: Obj = {
        "conditions": conditions,
        "admission": {
            "clusterQueue": cq,
            "podSetAssignments": [
                {
                    "name": "main",
                    "flavors": {"cpu": flavor_name, "nvidia.com/gpu": flavor_name},
                    "resourceUsage": {"cpu": "1", "nvidia.com/gpu": "4"},
                    "count": 1,
                }
            ],
        },
        "admissionChecks": [
            {"name": check, "state": state, "message": message, "lastTransitionTime": T0}
        ],
    }
    if cluster:
        status["clusterName"] = cluster
    if nominated:
        status["nominatedClusterNames"] = nominated
    return status


def placement(cluster: str, candidates: list[str]) -> dict[str, str]:
    return {
        PLACEMENT_ANNOTATION: json.dumps(
            {
                "cluster": cluster,
                "reason": "fits in worker-cq (4 nvidia.com/gpu free)",
                "rule": "best fit, then fewest waiting, then config order",
                "candidates": candidates,
                "at": 1704067260.0,
            }
        )
    }
