"""JobSets through the job framework on a real API server with JobSet's own CRD (from its Go
module at the pinned version): one Workload with a pod set per replicated job, admitted whole
or not at all, each pod set's template given its flavor, restored on eviction. The JobSet
operator itself is not needed here: kfed only suspends, resumes and edits the JobSet."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.binaries import operators
from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.jobset import JOBSETS, JobSetKind
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.controllers.builders import jobset
from tests.integration.controllers.conftest import (
    StartController,
    h100_queue,
)
from tests.integration.controllers.helpers import condition, install_crds

pytestmark = pytest.mark.full
Obj = dict[str, Any]


async def workload_of_jobset(api: KubeApi, ns: str, name: str) -> Obj | None:
    js = await api.get(JOBSETS, name, ns)
    key = JobSetKind().workload_key(js)
    try:
        return await api.get(R.WORKLOADS, key.split("/", 1)[1], ns)
    except errors.NotFound:
        return None


def templates(js: Obj) -> dict[str, Obj]:
    return {
        rj["name"]: rj["template"]["spec"]["template"]["spec"]
        for rj in js["spec"]["replicatedJobs"]
    }


@pytest.fixture
async def gpu_queue(api: KubeApi, ns: str, unique: str, cluster_objects: list[Any]) -> str:
    await install_crds(api, operators.JOBSET, JOBSETS)
    return await h100_queue(api, ns, f"js-{unique}", gpus=4, cleanup=cluster_objects)


async def test_a_jobset_is_admitted_whole_with_its_flavor_in_every_pod_set(
    api: KubeApi, ns: str, gpu_queue: str, start_controller: StartController
) -> None:
    await start_controller()
    await api.create(JOBSETS, jobset(ns, "train", gpu_queue, workers=4), ns)

    async def admitted() -> Obj | None:
        wl = await workload_of_jobset(api, ns, "train")
        return wl if wl is not None and ws.is_admitted(wl) else None

    wl = await wait_for(admitted, timeout=30, what="the JobSet's Workload admitted")
    assert wl is not None
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [
        ("driver", 1),
        ("workers", 4),
    ]
    owner = wl["metadata"]["ownerReferences"][0]
    assert (owner["apiVersion"], owner["kind"], owner["name"]) == (
        JOBSETS.api_version,
        "JobSet",
        "train",
    )
    assignments = ws.status_of(wl)["admission"]["podSetAssignments"]
    assert sorted(a["name"] for a in assignments) == ["driver", "workers"]

    async def resumed() -> Obj | None:
        js = await api.get(JOBSETS, "train", ns)
        return js if js["spec"].get("suspend") is False else None

    js = await wait_for(resumed, timeout=30, what="the JobSet resumed")
    assert js is not None
    for name, spec in templates(js).items():
        assert spec.get("nodeSelector") == {"gpu.model": "h100"}, name


async def test_a_jobset_bigger_than_the_free_quota_is_never_admitted_in_part(
    api: KubeApi, ns: str, gpu_queue: str, start_controller: StartController
) -> None:
    """4 GPUs of quota: a JobSet of 6 GPU workers waits whole; nothing of it starts."""
    await start_controller()
    await api.create(JOBSETS, jobset(ns, "big", gpu_queue, workers=6), ns)

    async def pending_with_reason() -> Obj | None:
        wl = await workload_of_jobset(api, ns, "big")
        c = condition(wl, C.QUOTA_RESERVED)
        return wl if c is not None and c.get("status") == "False" and c.get("message") else None

    wl = await wait_for(
        pending_with_reason, timeout=30, what="the JobSet's Workload pending, saying why"
    )
    assert wl is not None
    assert not ws.is_admitted(wl) and not ws.status_of(wl).get("admission")
    message = str((condition(wl, C.QUOTA_RESERVED) or {}).get("message"))
    assert "nvidia.com/gpu" in message, message
    js = await api.get(JOBSETS, "big", ns)
    assert js["spec"]["suspend"] is True
    assert all("nodeSelector" not in spec for spec in templates(js).values())


async def test_an_evicted_jobset_is_suspended_and_its_templates_restored(
    api: KubeApi, ns: str, gpu_queue: str, start_controller: StartController
) -> None:
    await start_controller()
    body = jobset(ns, "evict-me", gpu_queue, workers=2)
    body["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["nodeSelector"] = {
        "team": "a"
    }
    await api.create(JOBSETS, body, ns)

    async def running() -> bool:
        js = await api.get(JOBSETS, "evict-me", ns)
        return js["spec"].get("suspend") is False

    await wait_for(running, timeout=30, what="the JobSet resumed")
    wl = await workload_of_jobset(api, ns, "evict-me")
    assert wl is not None
    await api.patch(R.WORKLOADS, wl["metadata"]["name"], {"spec": {"active": False}}, ns)

    async def restored() -> Obj | None:
        js = await api.get(JOBSETS, "evict-me", ns)
        specs = templates(js)
        ok = (
            js["spec"].get("suspend") is True
            and "nodeSelector" not in specs["driver"]
            and specs["workers"].get("nodeSelector") == {"team": "a"}
        )
        return js if ok else None

    await wait_for(restored, timeout=30, what="the JobSet suspended, its templates as submitted")
