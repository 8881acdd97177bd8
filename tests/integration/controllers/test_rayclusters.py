"""RayClusters through the job framework on a real API server with KubeRay's own CRD (from its
Go module at the pinned version): a head and a GPU worker group, admitted together, each
group's template given its flavor. KubeRay itself is not needed: kfed only suspends, resumes
and edits the RayCluster."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.binaries import operators
from e2e.waiting import wait_for
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.raycluster import RAYCLUSTERS, RayClusterKind
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.controllers import builders as b
from tests.integration.controllers.conftest import (
    StartController,
    h100_queue,
)
from tests.integration.controllers.helpers import install_crds

pytestmark = pytest.mark.full
Obj = dict[str, Any]


async def test_a_raycluster_is_admitted_with_its_head_and_workers_together(
    api: KubeApi,
    ns: str,
    unique: str,
    cluster_objects: list[Any],
    start_controller: StartController,
) -> None:
    await install_crds(api, operators.KUBERAY, RAYCLUSTERS)
    await h100_queue(api, ns, f"ray-{unique}", gpus=2, cleanup=cluster_objects)
    await start_controller()
    await api.create(RAYCLUSTERS, b.raycluster(ns, "ray", "q", gpu_workers=2), ns)

    async def resumed() -> Obj | None:
        rc = await api.get(RAYCLUSTERS, "ray", ns)
        return rc if rc["spec"].get("suspend") is False else None

    rc = await wait_for(resumed, timeout=30, what="the RayCluster resumed")
    assert rc is not None
    spec = rc["spec"]
    for template in (spec["headGroupSpec"]["template"], spec["workerGroupSpecs"][0]["template"]):
        assert template["spec"]["nodeSelector"] == {"gpu.model": "h100"}
    key = RayClusterKind().workload_key(rc)
    wl = await api.get(R.WORKLOADS, key.split("/", 1)[1], ns)
    assert ws.is_admitted(wl)
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("head", 1), ("gpu", 2)]

    # Deleting the RayCluster deletes its Workload (the job's end: it never "finishes").
    await api.delete(RAYCLUSTERS, "ray", ns)

    async def workload_gone() -> bool:
        try:
            await api.get(R.WORKLOADS, key.split("/", 1)[1], ns)
        except errors.NotFound:
            return True
        return False

    await wait_for(workload_gone, timeout=30, what="the RayCluster's Workload deleted")
