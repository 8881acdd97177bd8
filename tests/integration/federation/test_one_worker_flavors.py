"""A distributed job with a cpu-only launcher (issue "Never stuck, never a wrong result",
item 5), on real control planes with the real JobSet operator on the workers.

The article's manager ClusterQueue lists rtx-a1000 first, for cpu too; worker-1 has only
rtx-a1000, worker-2 and worker-3 only h100. A JobSet whose driver asks for cpu only and
selects no nodes, beside H100 trainers, used to get rtx-a1000 for the driver and h100 for
the trainers: no worker has both, so it waited until its quota was given back, while an H100
worker could run it whole. Now the manager gives it flavors one worker offers together.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest
import yaml

from e2e.examples import JOBS
from e2e.waiting import wait_for
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.jobset import JOBSET
from manager.kube import resources as R
from tests.integration.federation import article
from tests.integration.federation.bed import Bed
from tests.integration.federation.test_job_kinds import (
    H100_WORKERS,
    check_message,
    ended,
    placed_on,
    workload_of,
)
from tests.integration.federation.test_never_twice_never_stuck import start

pytestmark = pytest.mark.full
NS = article.NS
Obj = dict[str, Any]


def the_example() -> Obj:
    (body,) = [d for d in yaml.safe_load_all((JOBS / "jobset-h100.yaml").read_text()) if d]
    assert isinstance(body, dict)
    return body


def without_selector(pod_set: Obj) -> bool:
    spec = pod_set["template"]["spec"]["template"]["spec"]
    return not spec.get("nodeSelector") and not spec.get("affinity")


async def test_a_jobset_with_a_cpu_only_launcher_runs_whole_on_the_worker_its_trainers_need(
    article_bed: Bed,
) -> None:
    """``examples/jobs/jobset-h100.yaml`` as shipped: its driver has no node selector. It is
    charged h100 for every pod set, placed on an H100 worker, the driver's pod runs on an H100
    node there, and the JobSet ends Completed on the manager."""
    bed = article_bed
    api = bed.manager_api
    body = the_example()
    driver = next(r for r in body["spec"]["replicatedJobs"] if r["name"] == "driver")
    assert without_selector(driver), "the example's driver must select no nodes"
    await start(bed)
    submitted = time.monotonic()
    await api.create(JOBSET.resource, copy.deepcopy(body), NS)
    name = body["metadata"]["name"]
    worker = await wait_for(lambda: placed_on(api, JOBSET, name), timeout=60, what="placed")
    placed_after = time.monotonic() - submitted
    assert worker in H100_WORKERS, worker
    wl = await workload_of(api, JOBSET, name)
    assert wl is not None
    flavors = {
        psa["name"]: set((psa.get("flavors") or {}).values())
        for psa in ws.status_of(wl)["admission"]["podSetAssignments"]
    }
    assert flavors == {"driver": {"h100"}, "workers": {"h100"}}, flavors

    wapi = bed.worker_apis[worker]

    async def driver_node() -> str | None:
        pods = (await wapi.list(R.PODS, NS, label_selector=f"{JOBSET.pod_label}={name}"))["items"]
        return next(
            (
                p["spec"].get("nodeName")
                for p in pods
                if "-driver-" in p["metadata"]["name"] and p["spec"].get("nodeName")
            ),
            None,
        )

    node_name = await wait_for(driver_node, timeout=60, what="the driver's pod bound")
    node = await wapi.get(R.NODES, str(node_name))
    assert node["metadata"]["labels"].get("gpu.model") == "h100", node["metadata"]["labels"]
    assert await ended(api, JOBSET, name) is True
    completed_after = time.monotonic() - submitted
    print(
        f"\ncpu-only launcher JobSet: placed on {worker} after {placed_after:.1f}s, "
        f"Completed on the manager after {completed_after:.1f}s; flavors {flavors}"
    )


async def test_a_job_no_single_worker_offers_waits_saying_why_per_worker(
    article_bed: Bed,
) -> None:
    """GPU trainers on rtx-a1000 beside GPU trainers on h100: no worker has both. The manager
    reserves nothing and says why for each worker's set of flavors; nothing is created on
    any worker."""
    bed = article_bed
    api = bed.manager_api
    body = the_example()
    body["metadata"]["name"] = "split-gpus"
    driver = next(r for r in body["spec"]["replicatedJobs"] if r["name"] == "driver")
    pod = driver["template"]["spec"]["template"]["spec"]
    pod["nodeSelector"] = {"gpu.model": "rtx-a1000"}
    pod["containers"][0]["resources"] = {
        "requests": {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": "1"},
        "limits": {"nvidia.com/gpu": "1"},
    }
    await start(bed)
    await api.create(JOBSET.resource, body, NS)

    async def says_why() -> str | None:
        wl = await workload_of(api, JOBSET, "split-gpus")
        if wl is None:
            return None
        for cond in ws.status_of(wl).get("conditions") or []:
            if cond.get("type") == "QuotaReserved" and "one worker" in str(cond.get("message")):
                return str(cond["message"])
        return None

    message = await wait_for(says_why, timeout=30, what="pending, saying why")
    assert message is not None and "[rtx-a1000]" in message and "[h100]" in message, message
    wl = await workload_of(api, JOBSET, "split-gpus")
    assert wl is not None and not ws.has_reservation(wl)
    assert await check_message(api, JOBSET, "split-gpus") == ""
    for worker, wapi in bed.worker_apis.items():
        assert not (await wapi.list(JOBSET.resource, NS))["items"], worker
