"""Never twice, never stuck: the holes found by adversarial testing, each a named scenario on
real control planes (issue "Never twice, never stuck").

- A Job of the same name that kfed did not create already on the worker: kfed never touches
  it, never reports the workload running there, and places it elsewhere or waits, saying why.
- A Job deleted and submitted again under the same name while its old remote copy is still
  terminating: the new workload never adopts the dying copy.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import pytest

from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.federation import checkstatus
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.federation import article
from tests.integration.federation.bed import CHECK, Bed

pytestmark = pytest.mark.full
NS = article.NS


async def manager_workload(api: KubeApi, job_name: str) -> dict[str, Any] | None:
    try:
        job = await api.get(R.JOBS, job_name, NS)
        return await api.get(
            R.WORKLOADS, ws.workload_name_for_job(job_name, job["metadata"]["uid"]), NS
        )
    except errors.NotFound:
        return None


async def check_says(api: KubeApi, job_name: str, words: str) -> tuple[str, str] | None:
    wl = await manager_workload(api, job_name)
    if wl is None:
        return None
    state, message = checkstatus.check_state(wl, CHECK)
    return (state, message) if words in message else None


async def complete(api: KubeApi, job_name: str) -> bool:
    try:
        job = await api.get(R.JOBS, job_name, NS)
    except errors.NotFound:
        return False
    return any(
        c["type"] == "Complete" and c["status"] == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


async def gone(api: KubeApi, res: R.Resource, name: str) -> bool:
    try:
        await api.get(res, name, NS)
    except errors.NotFound:
        return True
    return False


async def start(bed: Bed, **settings: Any) -> None:
    bed.settings = dataclasses.replace(bed.settings, **settings)
    for worker in ("worker-1", "worker-2", "worker-3"):
        await bed.start_shim(worker)
    await bed.start_manager()


async def test_a_foreign_job_of_the_same_name_on_the_worker_is_left_alone_never_reported_running(
    article_bed: Bed,
) -> None:
    """Finding 5. Before: AlreadyExists was swallowed, the check went Ready "on worker-1",
    nothing ran, and quota was held on both sides. Only worker-1 offers rtx-a1000 here, so
    the light job must wait, saying why, until the foreign Job is gone."""
    bed = article_bed
    await start(bed, foreign_object_recheck=2.0)
    worker = bed.worker_apis["worker-1"]
    foreign = article.seed_job("02-light-job.yaml")
    foreign["metadata"]["labels"] = {"team": "someone-else"}  # no queue, no origin: not ours
    foreign = await worker.create(R.JOBS, foreign, NS)

    await bed.manager_api.create(R.JOBS, article.seed_job("02-light-job.yaml"), NS)
    said = await wait_for(
        lambda: check_says(bed.manager_api, "light-job", "kfed did not create"),
        timeout=60,
        what="the light job's check naming the foreign Job",
    )
    assert said is not None
    state, message = said
    assert state != "Ready", message
    assert "worker-1" in message and "ml-jobs/light-job" in message, message
    wl = await manager_workload(bed.manager_api, "light-job")
    assert wl is not None and not ws.status_of(wl).get("clusterName")

    async def our_copy_withdrawn() -> bool:
        items = (await worker.list(R.WORKLOADS, NS))["items"]
        return not [w for w in items if w["metadata"]["name"] == wl["metadata"]["name"]]

    await wait_for(our_copy_withdrawn, timeout=30, what="our copy withdrawn from worker-1")
    still = await worker.get(R.JOBS, "light-job", NS)
    assert still["metadata"]["uid"] == foreign["metadata"]["uid"], "the foreign Job was replaced"
    assert C.MULTIKUEUE_ORIGIN_LABEL not in (still["metadata"].get("labels") or {})
    assert still["spec"]["suspend"] is True, "kfed changed a Job it does not own"

    # Once the foreign Job is gone, worker-1 is considered again and the job runs there.
    await worker.delete(R.JOBS, "light-job", NS, propagation="Foreground")
    await wait_for(
        functools.partial(gone, worker, R.JOBS, "light-job"), timeout=60, what="foreign Job gone"
    )
    await wait_for(
        functools.partial(complete, bed.manager_api, "light-job"),
        timeout=90,
        what="light-job Complete on the manager after the foreign Job left",
    )
    final = await manager_workload(bed.manager_api, "light-job")
    assert final is not None and ws.status_of(final).get("clusterName") == "worker-1"


HOLD = "kfed.io/test-hold"


async def test_a_job_submitted_again_never_adopts_its_predecessors_terminating_copy(
    article_bed: Bed,
) -> None:
    """Finding 4. Before: the remote Job was found by namespace/name only, so the new
    workload adopted the dying copy, was reported Admitted and active, and never ran."""
    bed = article_bed
    await start(bed)
    api, worker = bed.manager_api, bed.worker_apis["worker-1"]
    await api.create(R.JOBS, article.seed_job("02-light-job.yaml", delay_ms=600_000), NS)

    async def remote_job() -> dict[str, Any] | None:
        try:
            return await worker.get(R.JOBS, "light-job", NS)
        except errors.NotFound:
            return None

    old = await wait_for(remote_job, timeout=60, what="the first light-job running on worker-1")
    await worker.patch(R.JOBS, "light-job", {"metadata": {"finalizers": [HOLD]}}, NS)
    await api.delete(R.JOBS, "light-job", NS, propagation="Foreground")

    async def old_terminating() -> bool:
        job = await remote_job()
        return job is not None and bool(job["metadata"].get("deletionTimestamp"))

    await wait_for(old_terminating, timeout=60, what="the old remote Job terminating")
    await wait_for(
        functools.partial(gone, api, R.JOBS, "light-job"), timeout=60, what="manager Job gone"
    )
    try:
        await api.create(R.JOBS, article.seed_job("02-light-job.yaml", delay_ms=1000), NS)
        said = await wait_for(
            lambda: check_says(api, "light-job", "of an earlier workload"),
            timeout=60,
            what="the new workload waiting for the old remote Job",
        )
        assert said is not None
        state, message = said
        assert state != "Ready", message
        held = await remote_job()
        assert held is not None and held["metadata"]["uid"] == old["metadata"]["uid"]
        new_wl = await manager_workload(api, "light-job")
        assert new_wl is not None
        assert (held["metadata"].get("labels") or {}).get(C.PREBUILT_WORKLOAD_LABEL) != new_wl[
            "metadata"
        ]["name"]
    finally:
        await worker.patch(R.JOBS, "light-job", {"metadata": {"finalizers": None}}, NS)

    await wait_for(
        functools.partial(complete, api, "light-job"),
        timeout=90,
        what="the new light-job Complete after the old copy went",
    )
