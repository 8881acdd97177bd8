"""Upstream Kueue as the MultiKueue manager (worker-2) of a worker that runs kfed's CRDs and
shim (worker-3): the article's jobs are sent there once (no delete/recreate loop: kfed's
Workload schema keeps every field upstream writes), admitted by kfed's shim, run, and report
back as upstream expects (its check message, ``clusterName``, the Job's status); upstream
then removes the copies."""

from __future__ import annotations

import time
from typing import Any

import pytest

from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.federation.decisions import checkstatus
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.controllers.helpers import condition
from tests.integration.federation import article
from tests.integration.federation.bed import CHECK, Bed
from tests.integration.interop.conftest import (
    KFED_WORKER,
    KFED_WORKER_ON_KUEUE,
    KUEUE_ORIGIN,
    InteropClusters,
)
from tests.integration.interop.recording import WorkerRecord

pytestmark = pytest.mark.full
NS = article.NS
JOBS = {
    "b-light-job": ("02-light-job.yaml", "rtx-a1000"),
    "b-heavy-job": ("03-heavy-job.yaml", "h100"),
}


async def active(api: KubeApi, cluster: str) -> bool:
    found = condition(await api.get(R.MULTIKUEUE_CLUSTERS, cluster), "Active")
    return found is not None and found["status"] == "True"


async def workload_of(api: KubeApi, job_name: str) -> dict[str, Any]:
    """The Workload a Job's controller made for it, found by its owner (upstream names it
    ``job-<name>-<sha1 prefix>``, kfed ``job-<name>-<uid prefix>``)."""
    uid = (await api.get(R.JOBS, job_name, NS))["metadata"]["uid"]
    owned: dict[str, Any]
    (owned,) = [
        wl
        for wl in (await api.list(R.WORKLOADS, NS))["items"]
        if uid in {ref["uid"] for ref in wl["metadata"].get("ownerReferences") or []}
    ]
    return owned


async def complete(api: KubeApi, job_name: str) -> bool:
    found = condition(await api.get(R.JOBS, job_name, NS), "Complete")
    return found is not None and found["status"] == "True"


async def test_upstream_kueue_manager_runs_the_article_jobs_on_a_kfed_worker(
    bed: Bed, kueue_manager: KubeApi, interop: InteropClusters
) -> None:
    await bed.start_shim(KFED_WORKER)
    worker = bed.worker_apis[KFED_WORKER]
    await wait_for(
        lambda: active(kueue_manager, KFED_WORKER_ON_KUEUE),
        timeout=60,
        what="upstream's MultiKueueCluster for the kfed worker Active",
    )
    async with WorkerRecord(worker, NS) as there:
        started = time.monotonic()
        for name, (seed, _) in JOBS.items():
            job = article.seed_job(seed, metadata={"name": name}, delay_ms=2000)
            await kueue_manager.create(R.JOBS, job, NS)
        for name in JOBS:
            await wait_for(
                lambda n=name: complete(kueue_manager, n),  # type: ignore[misc]
                timeout=120,
                what=f"{name} Complete on upstream's manager",
            )
        submit_to_complete = time.monotonic() - started

        copies = []
        for name, (_, model) in JOBS.items():
            # Upstream's manager: its webhook made the Job MultiKueue's; its Workload got the
            # reservation on the kfed worker, in upstream's own words, and its clusterName.
            job = await kueue_manager.get(R.JOBS, name, NS)
            assert job["spec"]["managedBy"] == C.MULTIKUEUE_CONTROLLER_NAME
            wl = await workload_of(kueue_manager, name)
            assert ws.status_of(wl)["clusterName"] == KFED_WORKER_ON_KUEUE
            state, message = checkstatus.check_state(wl, CHECK)
            # v0.19 renamed "got reservation on" to "was admitted on" (upstream #13124).
            words = "got reservation on" if interop.version == "0.17.0" else "was admitted on"
            assert (state, message) == (
                "Ready",
                f'The workload {words} "{KFED_WORKER_ON_KUEUE}"',
            )
            finished = condition(wl, "Finished")
            assert finished is not None and finished["status"] == "True"

            # kfed's worker: the copy has the manager's name and upstream's origin, kfed's
            # shim admitted it, and its pods ran on the nodes with the job's GPU.
            copy = there.last[wl["metadata"]["name"]]
            copies.append(copy["metadata"]["name"])
            assert copy["metadata"]["labels"][C.MULTIKUEUE_ORIGIN_LABEL] == KUEUE_ORIGIN
            admitted = condition(copy, "Admitted")
            assert admitted is not None and admitted["status"] == "True"
            assert await there.gpu_models_of(name) == {model}

        # Sent once, no delete/recreate loop (upstream recreates a copy whose spec differs
        # from its own), and removed once, after the workload finished.
        assert {c: there.created[c] for c in copies} == dict.fromkeys(copies, 1)
        await wait_for(
            lambda: all(there.deleted[c] == 1 for c in copies), timeout=60, what="copies removed"
        )
    print(f"upstream Kueue manager -> kfed worker: submit to Complete {submit_to_complete:.1f}s")
