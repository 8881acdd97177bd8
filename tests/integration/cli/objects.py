"""Builders for the kueue objects the CLI integration tests arrange (names are the test's)."""

from __future__ import annotations

import json
from typing import Any

from manager.api import constants as C
from manager.federation.decisions import capacity
from manager.federation.settings import PLACEMENT_ANNOTATION
from tests import builders
from tests.builders import T0
from tests.builders import local_queue as local_queue
from tests.builders import multikueue_check as multikueue_check

Obj = dict[str, Any]


def flavor(name: str) -> Obj:
    return builders.gpu_flavor(name)


def cluster_queue(name: str, gpus: dict[str, int], checks: list[str] | None = None) -> Obj:
    quotas = {f: {"cpu": 64, "nvidia.com/gpu": n} for f, n in gpus.items()}
    return builders.cluster_queue(name, quotas, checks=checks or ())


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
    return builders.workload(name, namespace=namespace, queue=queue, annotations=annotations or {})


def condition(kind: str, status: bool, reason: str, message: str) -> Obj:
    return builders.condition(kind, status, reason, message)


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
                "rule": capacity.RULE,
                "candidates": candidates,
                "at": 1704067260.0,
            }
        )
    }
