"""Scenario A (the article across clusters) and B (capacity): each job goes to ONE worker
with free quota in its flavor, runs there to completion, and its status comes back."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections import Counter
from typing import Any

import pytest

from e2e.waiting import deadline_scale, wait_for
from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.federation.decisions import checkstatus
from manager.federation.settings import DispatchMode
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.informer import Event
from tests.integration.eventlog import wait_for_story
from tests.integration.federation import article
from tests.integration.federation.bed import CHECK, Bed

pytestmark = pytest.mark.full
NS = article.NS


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
    await api.create(R.JOBS, article.seed_job(name, **kw), NS)


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


async def test_a_article_jobs_go_to_the_worker_with_their_gpu_and_events_tell_it(
    article_bed: Bed,
) -> None:
    bed = article_bed
    for worker in ("worker-1", "worker-2", "worker-3"):
        await bed.start_shim(worker)
    seen = record_copies(bed)
    await bed.start_manager()
    api = bed.manager_api
    # The article's manifests, unchanged (kubectl apply), through the manager's webhook.
    # (in a thread: the webhook answering kubectl runs on this event loop)
    for manifest in ("02-light-job.yaml", "03-heavy-job.yaml"):
        await asyncio.to_thread(
            bed.fed.kubectl, "manager", "apply", "-f", str(article.SEED / manifest)
        )
    for name in ("light-job", "heavy-job"):
        job = await api.get(R.JOBS, name, NS)
        assert job["spec"]["managedBy"] == C.MULTIKUEUE_MANAGED_BY, "the webhook sets managedBy"

    light = await wait_for(lambda: placed(api, "light-job"), timeout=60, what="light-job placed")
    heavy = await wait_for(lambda: placed(api, "heavy-job"), timeout=60, what="heavy-job placed")
    assert ws.status_of(light)["clusterName"] == "worker-1"
    assert ws.status_of(heavy)["clusterName"] in ("worker-2", "worker-3")

    for name in ("light-job", "heavy-job"):
        await wait_for(
            functools.partial(complete, api, name), timeout=60, what=f"manager Job {name} Complete"
        )

    copies = {key: n for key, n in seen.items()}
    assert sorted(copies) == sorted(
        [("worker-1", ws.key_of(light)), (ws.status_of(heavy)["clusterName"], ws.key_of(heavy))]
    )
    assert all(n == 1 for n in copies.values()), f"a copy was created more than once: {copies}"
    assert bed.manager is not None
    assert bed.manager.dispatcher.stats.remote_workloads_created == 2
    latencies = bed.manager.dispatcher.stats.dispatch_latencies
    print(f"dispatch latency (manager reservation to remote admitted): {latencies}")

    async def copies_removed() -> bool:
        for wapi in bed.worker_apis.values():
            if (await wapi.list(R.WORKLOADS, NS))["items"]:
                return False
        return True

    await wait_for(copies_removed, timeout=90, what="remote copies removed after finishing")
    await events_tell_the_article_story(bed, {"light-job": light, "heavy-job": heavy})


async def events_tell_the_article_story(bed: Bed, placed: dict[str, dict[str, Any]]) -> None:
    """``kubectl get events`` on the manager and on the chosen worker shows each step of the
    article's jobs with upstream Kueue's reasons (#20)."""
    api = bed.manager_api
    for job, wl in placed.items():
        name, cluster = wl["metadata"]["name"], ws.status_of(wl)["clusterName"]
        await wait_for_story(
            api,
            NS,
            "Job",
            job,
            ["CreatedWorkload", "Started", "FinishedWorkload"],
            component="kfed-manager",
        )
        story = await wait_for_story(
            api, NS, "Workload", name, ["QuotaReserved", "Dispatched", "MultiKueue", "Admitted"]
        )
        told = {t.reason: t.message for t in story}
        assert told["MultiKueue"] == f'The workload was admitted on "{cluster}"'
        assert told["Dispatched"].startswith(f'Sent to "{cluster}": ')
        assert told["Admitted"].startswith("Admitted by ClusterQueue gpu-cq, wait time since")
        assert not [t for t in story if t.type == "Warning"], story

        worker = bed.worker_apis[cluster]
        copy_story = await wait_for_story(
            worker, NS, "Workload", name, ["QuotaReserved", "Admitted"], where=f" on {cluster}"
        )
        assert {t.component for t in copy_story} == {"kfed-worker-shim"}
        await wait_for_story(
            worker,
            NS,
            "Job",
            job,
            ["Started", "FinishedWorkload"],
            where=f" on {cluster}",
            component="kfed-worker-shim",
        )
        listed = await asyncio.to_thread(bed.fed.kubectl, cluster, "get", "events", "-n", NS)
        assert "QuotaReserved" in listed.stdout and "FinishedWorkload" in listed.stdout
    listed = await asyncio.to_thread(bed.fed.kubectl, "manager", "get", "events", "-n", NS)
    for reason in ("CreatedWorkload", "QuotaReserved", "Dispatched", "MultiKueue", "Admitted"):
        assert reason in listed.stdout, listed.stdout


def h100_job(name: str, *, gpus: int = 1, delay_ms: int = 2000) -> dict[str, Any]:
    job = article.seed_job("03-heavy-job.yaml", delay_ms=delay_ms)
    job["metadata"]["name"] = name
    container = job["spec"]["template"]["spec"]["containers"][0]
    for part in ("requests", "limits"):
        container["resources"][part].update(
            {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)}
        )
    return job


async def fill_worker(api: KubeApi, name: str) -> None:
    """A local job on the worker itself that takes all 4 of its h100 GPUs for a long time."""
    job = h100_job(name, gpus=4, delay_ms=600_000)
    await api.create(R.JOBS, job, NS)

    async def reserved() -> bool:
        cq = await api.get(R.CLUSTER_QUEUES, "gpu-cq")
        for flavor in (cq.get("status") or {}).get("flavorsReservation") or []:
            for r in flavor["resources"]:
                if r["name"] == "nvidia.com/gpu" and r.get("total") == "4":
                    return True
        return False

    await wait_for(reserved, timeout=90, what=f"{name} holding all GPUs")


async def check_message(api: KubeApi, job_name: str) -> str:
    job = await api.get(R.JOBS, job_name, NS)
    try:
        name = ws.workload_name_for_job(job_name, job["metadata"]["uid"])
        wl = await api.get(R.WORKLOADS, name, NS)
    except errors.NotFound:
        return ""
    return checkstatus.check_state(wl, CHECK)[1]


async def test_b_a_full_worker_is_skipped_and_none_free_means_a_clear_wait(
    article_bed: Bed,
) -> None:
    bed = article_bed
    await bed.start_federation()
    api = bed.manager_api
    await fill_worker(bed.worker_apis["worker-2"], "local-hog")
    await api.create(R.JOBS, h100_job("next-h100"), NS)
    wl = await wait_for(lambda: placed(api, "next-h100"), timeout=60, what="next-h100 placed")
    assert ws.status_of(wl)["clusterName"] == "worker-3", "worker-2 is full: the other h100 worker"

    await fill_worker(bed.worker_apis["worker-3"], "local-hog")
    await wait_for(lambda: complete(api, "next-h100"), timeout=60, what="next-h100 Complete")
    await api.create(R.JOBS, h100_job("waits"), NS)

    async def waiting_with_reason() -> str | None:
        text = await check_message(api, "waits")
        return text if "no worker can admit it now" in text else None

    message = await wait_for(waiting_with_reason, timeout=90, what="a clear pending reason")
    assert message is not None
    assert "worker-2: insufficient nvidia.com/gpu in flavor h100: 1 requested, 0 free" in message
    assert "worker-3: insufficient nvidia.com/gpu in flavor h100" in message
    assert "worker-1: ClusterQueue gpu-cq has no flavor matching h100" in message

    # Capacity frees up on worker-3: the waiting job goes there without anyone asking.
    await bed.worker_apis["worker-3"].delete(R.JOBS, "local-hog", NS)
    wl = await wait_for(
        lambda: placed(api, "waits"), timeout=60, what="waiting job placed once capacity frees"
    )
    assert ws.status_of(wl)["clusterName"] == "worker-3"


async def test_d_drain_moves_work_away_and_uncordon_restores(article_bed: Bed) -> None:
    bed = article_bed
    await bed.start_federation()
    api = bed.manager_api
    await api.create(R.JOBS, h100_job("long", delay_ms=120_000), NS)
    wl = await wait_for(lambda: placed(api, "long"), timeout=60, what="long placed")
    first = ws.status_of(wl)["clusterName"]
    other = "worker-3" if first == "worker-2" else "worker-2"
    try:
        await api.patch(
            R.MULTIKUEUE_CLUSTERS,
            first,
            {"metadata": {"annotations": {C.MAINTENANCE_ANNOTATION: "drain"}}},
        )

        async def moved() -> dict[str, Any] | None:
            now = await placed(api, "long")
            return (
                now if now is not None and ws.status_of(now).get("clusterName") == other else None
            )

        await wait_for(moved, timeout=60, what=f"long moved from draining {first} to {other}")

        async def gone_from_drained() -> bool:
            return (
                not (await bed.worker_apis[first].list(R.WORKLOADS, NS))["items"]
                and not (await bed.worker_apis[first].list(R.PODS, NS))["items"]
            )

        await wait_for(gone_from_drained, timeout=90, what=f"nothing left running on {first}")
        # Nothing new lands on a drained (or cordoned) worker.
        await bed.worker_apis[other].create(R.JOBS, h100_job("hog", gpus=3, delay_ms=600_000), NS)
        await api.create(R.JOBS, h100_job("new"), NS)

        async def refused_for_maintenance() -> bool:
            return f"{first}: in maintenance (drain)" in await check_message(api, "new")

        await wait_for(
            refused_for_maintenance, timeout=90, what="new job not placed on the drained worker"
        )
        await api.patch(
            R.MULTIKUEUE_CLUSTERS,
            first,
            {"metadata": {"annotations": {C.MAINTENANCE_ANNOTATION: None}}},
        )
        wl = await wait_for(lambda: placed(api, "new"), timeout=60, what="placed after uncordon")
        assert ws.status_of(wl)["clusterName"] == first

        # The Events tell it (#20): the worker's maintenance, and the move, as Normal
        # Events (a drain is planned, not a fault).
        await wait_for_story(api, "default", "MultiKueueCluster", first, ["Draining", "Uncordoned"])
        long = await placed(api, "long")
        assert long is not None
        story = await wait_for_story(
            api,
            NS,
            "Workload",
            long["metadata"]["name"],
            ["Dispatched", "Failover", "Dispatched"],
            component="kfed-manager",
        )
        failover = next(t for t in story if t.reason == "Failover")
        assert failover.type == "Normal"
        assert failover.message.startswith(f'Leaving "{first}" (drain)'), failover
    finally:
        await api.patch(
            R.MULTIKUEUE_CLUSTERS,
            first,
            {"metadata": {"annotations": {C.MAINTENANCE_ANNOTATION: None}}},
        )


async def test_all_at_once_copies_everywhere_and_keeps_one(article_bed: Bed) -> None:
    """Upstream's AllAtOnce mode, for comparison: a copy on every worker, the first to admit
    wins, the others are deleted before the Job is created on the winner."""
    bed = article_bed
    for worker in ("worker-1", "worker-2", "worker-3"):
        await bed.start_shim(worker)
    seen = record_copies(bed)
    await bed.start_manager(mode=DispatchMode.ALL_AT_ONCE)
    api = bed.manager_api
    await api.create(R.JOBS, h100_job("everywhere", delay_ms=1000), NS)
    wl = await wait_for(lambda: placed(api, "everywhere"), timeout=60, what="placed")
    winner = ws.status_of(wl)["clusterName"]
    await wait_for(lambda: complete(api, "everywhere"), timeout=60, what="complete")
    assert bed.manager is not None
    assert bed.manager.dispatcher.stats.remote_workloads_created == 3, "one copy per worker"
    assert {w for (w, _key) in seen} == {"worker-1", "worker-2", "worker-3"}
    assert bed.manager.dispatcher.stats.remote_jobs_created == 1, "the Job only on the winner"
    assert winner in ("worker-2", "worker-3")


async def test_incremental_adds_workers_round_by_round(article_bed: Bed) -> None:
    """Upstream's Incremental mode: workers in MultiKueueConfig order, ``incremental_step``
    more each round. worker-1 (no h100) gets the first round alone; worker-2 the second.
    The round lasts long enough for worker-2 to admit on a loaded machine (a 2 s round once
    let CI's busy worker-2 run out of time, and worker-3's round rightly came)."""
    bed = article_bed
    bed.settings = dataclasses.replace(
        bed.settings, incremental_step=1, incremental_round_timeout=5.0 * deadline_scale()
    )
    for worker in ("worker-1", "worker-2", "worker-3"):
        await bed.start_shim(worker)
    seen = record_copies(bed)
    await bed.start_manager(mode=DispatchMode.INCREMENTAL)
    api = bed.manager_api
    await api.create(R.JOBS, h100_job("stepwise", delay_ms=500), NS)
    wl = await wait_for(lambda: placed(api, "stepwise"), timeout=60, what="placed")
    assert ws.status_of(wl)["clusterName"] == "worker-2"
    assert {w for (w, _key) in seen} == {"worker-1", "worker-2"}, "worker-3's round came"
