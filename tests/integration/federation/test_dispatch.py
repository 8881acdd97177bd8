"""Scenario A (the article across clusters) and B (capacity): each job goes to ONE worker
with free quota in its flavor, runs there to completion, and its status comes back."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.federation import checkstatus
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.informer import Event
from tests.integration.federation import article
from tests.integration.federation.bed import CHECK, Bed

pytestmark = pytest.mark.full
NS = article.NS


@pytest.fixture
async def article_bed(bed: Bed) -> AsyncIterator[Bed]:
    await article.set_up(
        bed.fed, bed.manager_api, bed.worker_apis, only=("worker-1", "worker-2", "worker-3")
    )
    yield bed
    await bed.stop_all()
    await article.tear_down(bed.manager_api, bed.worker_apis)


def record_copies(bed: Bed) -> Counter[tuple[str, str]]:
    """(worker, workload key) -> how many times a copy appeared there."""
    seen: Counter[tuple[str, str]] = Counter()
    for worker, shim in bed.shims.items():

        def on_event(event: Event, worker: str = worker) -> None:
            if event.type == "ADDED":
                seen[(worker, event.key)] += 1

        shim.state.workloads.subscribe(on_event)
    return seen


async def submit(api: KubeApi, name: str, **kw: Any) -> None:
    job = article.seed_job(name, **kw)
    job["spec"]["managedBy"] = C.MULTIKUEUE_MANAGED_BY  # until the webhook does it
    await api.create(R.JOBS, job, NS)


async def placed(api: KubeApi, job_name: str) -> dict[str, Any] | None:
    job = await api.get(R.JOBS, job_name, NS)
    wl_name = ws.workload_name_for_job(job_name, job["metadata"]["uid"])
    try:
        wl = await api.get(R.WORKLOADS, wl_name, NS)
    except Exception:
        return None
    state, _ = checkstatus.check_state(wl, CHECK)
    return wl if state == "Ready" else None


async def complete(api: KubeApi, job_name: str) -> bool:
    job = await api.get(R.JOBS, job_name, NS)
    return any(
        c["type"] == "Complete" and c["status"] == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


async def test_a_article_jobs_go_to_the_worker_with_their_gpu(article_bed: Bed) -> None:
    bed = article_bed
    for worker in ("worker-1", "worker-2", "worker-3"):
        await bed.start_shim(worker)
    seen = record_copies(bed)
    await bed.start_manager()
    api = bed.manager_api
    await submit(api, "02-light-job.yaml")
    await submit(api, "03-heavy-job.yaml")

    light = await wait_for(lambda: placed(api, "light-job"), timeout=60, what="light-job placed")
    heavy = await wait_for(lambda: placed(api, "heavy-job"), timeout=60, what="heavy-job placed")
    assert ws.status_of(light)["clusterName"] == "worker-1"
    assert ws.status_of(heavy)["clusterName"] in ("worker-2", "worker-3")

    for job in ("light-job", "heavy-job"):
        await wait_for(
            lambda j=job: complete(api, j), timeout=60, what=f"manager Job {job} Complete"
        )  # type: ignore[misc]

    copies = {key: n for key, n in seen.items()}
    assert sorted(copies) == sorted(
        [("worker-1", ws.key_of(light)), (ws.status_of(heavy)["clusterName"], ws.key_of(heavy))]
    )
    assert all(n == 1 for n in copies.values()), f"a copy was created more than once: {copies}"
    assert bed.manager is not None
    assert bed.manager.dispatcher.stats.remote_workloads_created == 2

    async def copies_removed() -> bool:
        for worker, wapi in bed.worker_apis.items():
            if (await wapi.list(R.WORKLOADS, NS))["items"]:
                return False
        return True

    await wait_for(copies_removed, timeout=30, what="remote copies removed after finishing")
