"""Reading the article's objects back in tests."""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path
from typing import Any

import yaml

from e2e.binaries import operators
from e2e.examples import ARTICLE
from e2e.waiting import wait_for
from manager.controllers import conditions
from manager.controllers import workloadstatus as ws
from manager.kube import discovery, errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

SEED = ARTICLE


def seed(name: str) -> Path:
    return SEED / name


def seed_job(
    name: str, *, new_name: str | None = None, delay_ms: int | None = None
) -> dict[str, Any]:
    job: dict[str, Any] = copy.deepcopy(yaml.safe_load(seed(name).read_text()))
    if new_name:
        job["metadata"]["name"] = new_name
    if delay_ms is not None:
        job["spec"]["template"].setdefault("metadata", {}).setdefault("annotations", {})[
            "pod-complete.stage.kwok.x-k8s.io/delay"
        ] = str(delay_ms)
    return job


async def workload_of(api: KubeApi, namespace: str, job_name: str) -> dict[str, Any] | None:
    job = await api.get(R.JOBS, job_name, namespace)
    name = ws.workload_name_for_job(job_name, job["metadata"]["uid"])
    try:
        return await api.get(R.WORKLOADS, name, namespace)
    except errors.NotFound:
        return None


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    return conditions.find(ws.status_of(obj or {}).get("conditions"), kind)


def flavors_of(wl: dict[str, Any]) -> set[str]:
    admission = ws.status_of(wl).get("admission") or {}
    return {
        f
        for psa in admission.get("podSetAssignments") or []
        for f in (psa.get("flavors") or {}).values()
    }


async def job_complete(api: KubeApi, namespace: str, name: str) -> bool:
    job = await api.get(R.JOBS, name, namespace)
    return any(
        c.get("type") == "Complete" and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


async def node_models_of_job(api: KubeApi, namespace: str, job_name: str) -> set[str]:
    pods = (await api.list(R.PODS, namespace, label_selector=f"job-name={job_name}"))["items"]
    models = set()
    for pod in pods:
        node_name = pod["spec"].get("nodeName")
        if node_name:
            node = await api.get(R.NODES, node_name)
            models.add(node["metadata"]["labels"].get("gpu.model", ""))
    return models


async def install_crds(api: KubeApi, operator: operators.Operator, served: R.Resource) -> None:
    """The operator's CRDs at the pinned version (kept when already there: the cluster is
    shared), once ``served`` is served."""
    for path in operators.crd_files(operator):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                with contextlib.suppress(errors.AlreadyExists):
                    await api.create(R.CRDS, doc)
    await wait_for(
        lambda: discovery.serves(api, served), timeout=30, what=f"{served.plural} served"
    )
