"""Retention of a finished job's objects on its worker (``--finished-retention``, ClusterQueue
annotation ``kfed.io/finished-retention``): the worker's copy of the Workload, our Job and
its pods stay there for the retention counted from the manager Workload's Finished time,
then go; `kfed explain` still names the worker and the Job's final status afterwards. A
workload deleted from the manager takes its objects with it at once. The default (0, as
upstream) removes them at once: test_dispatch.py shows it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from e2e.waiting import wait_for
from manager.controllers import workloadstatus as ws
from manager.federation.decisions import retention
from manager.federation.engine.retaining import INVALID_REASON
from manager.federation.settings import RETENTION_ANNOTATION
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.eventlog import events_about
from tests.integration.federation import article
from tests.integration.federation.bed import Bed
from tests.integration.federation.test_dispatch import complete, placed

pytestmark = pytest.mark.full
NS = article.NS
KFED = str(Path(sys.executable).with_name("kfed"))
WORKER = "worker-1"
"""The only worker with rtx-a1000: where the article's light job runs."""


def light_job(name: str) -> dict[str, Any]:
    job = article.seed_job("02-light-job.yaml", delay_ms=500)
    job["metadata"]["name"] = name
    return job


@dataclasses.dataclass
class OnWorker:
    """Our objects for one job on its worker, read directly there."""

    copy: bool
    job: bool
    pods: int

    @property
    def any(self) -> bool:
        return self.copy or self.job or self.pods > 0

    @property
    def all(self) -> bool:
        return self.copy and self.job and self.pods > 0


async def on_worker(api: KubeApi, workload: str, job: str) -> OnWorker:
    try:
        await api.get(R.WORKLOADS, workload, NS)
        copy = True
    except errors.NotFound:
        copy = False
    try:
        await api.get(R.JOBS, job, NS)
        has_job = True
    except errors.NotFound:
        has_job = False
    pods = await api.list(R.PODS, NS, label_selector=f"batch.kubernetes.io/job-name={job}")
    return OnWorker(copy, has_job, len(pods["items"]))


async def run_to_completion(bed: Bed, name: str) -> tuple[dict[str, Any], float]:
    """Submit the light job, wait until it is Complete on the manager: its Workload (placed
    on worker-1) and the time it finished there (its Finished condition)."""
    api = bed.manager_api
    await api.create(R.JOBS, light_job(name), NS)
    wl = await wait_for(lambda: placed(api, name), timeout=60, what=f"{name} placed")
    assert ws.status_of(wl)["clusterName"] == WORKER
    await wait_for(lambda: complete(api, name), timeout=60, what=f"manager Job {name} Complete")

    async def finished() -> tuple[dict[str, Any], float] | None:
        now = await api.get(R.WORKLOADS, wl["metadata"]["name"], NS)
        at = retention.finished_at(now)
        return (now, at) if at is not None else None

    found: tuple[dict[str, Any], float] | None = await wait_for(
        finished, timeout=30, what=f"{name}'s Workload Finished"
    )
    assert found is not None
    return found


async def kfed_explain(bed: Bed, key: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        *[KFED, "explain", key, "-o", "json", "--kubeconfig", str(bed.fed.kubeconfig("manager"))],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    explained: dict[str, Any] = json.loads(out)
    return explained


async def start(bed: Bed, *, setting: float) -> None:
    bed.settings = dataclasses.replace(bed.settings, finished_retention=setting)
    await bed.start_shim(WORKER)
    await bed.start_manager()


async def test_a_finished_job_stays_on_its_worker_for_the_retention_then_goes(
    article_bed: Bed,
) -> None:
    """The manager's setting: kept (copy, Job, pods) within it, gone after it, never
    sooner; `kfed explain` then still names the worker and says Complete."""
    bed = article_bed
    kept_for = 20.0  # long enough to look at the objects before they are due, on a busy host
    await start(bed, setting=kept_for)
    worker = bed.worker_apis[WORKER]
    wl, finished_at = await run_to_completion(bed, "kept-job")
    name = wl["metadata"]["name"]
    due = finished_at + kept_for

    await wait_for(
        lambda: _all_there(worker, name, "kept-job"), timeout=10, what="objects on the worker"
    )
    looked_at = time.time()
    assert looked_at < due, (
        f"looked {looked_at - due:.1f}s too late to tell: retry on a calmer host"
    )

    gone = await wait_for(
        lambda: _gone_at(worker, name, "kept-job"), timeout=kept_for + 60, what="collected"
    )
    assert gone is not None
    assert gone >= due, f"collected {due - gone:.1f}s before its retention was over"
    print(f"kept {gone - finished_at:.1f}s after finishing (retention {kept_for:.0f}s)")

    explained = await kfed_explain(bed, f"{NS}/kept-job")
    assert explained["state"] == "Finished"
    assert explained["cluster"] == WORKER
    assert explained["result"].startswith("Complete"), explained["result"]
    assert explained["summary"].startswith(f"finished on {WORKER} (Succeeded)")


async def test_the_cluster_queue_annotation_overrides_the_setting_and_a_bad_one_is_told(
    article_bed: Bed,
) -> None:
    bed = article_bed
    api = bed.manager_api
    await api.patch(
        R.CLUSTER_QUEUES, "gpu-cq", {"metadata": {"annotations": {RETENTION_ANNOTATION: "soon"}}}
    )
    await start(bed, setting=3600.0)

    async def told() -> str | None:
        about = await events_about(api, "default", "ClusterQueue", "gpu-cq")
        return next((t.message for t in about if t.reason == INVALID_REASON), None)

    message = await wait_for(told, timeout=30, what=f"a {INVALID_REASON} Event on gpu-cq")
    assert message is not None
    assert "'soon' is not a duration" in message and "--finished-retention (1h)" in message

    short = 3.0
    await api.patch(
        R.CLUSTER_QUEUES, "gpu-cq", {"metadata": {"annotations": {RETENTION_ANNOTATION: "3s"}}}
    )
    worker = bed.worker_apis[WORKER]
    wl, finished_at = await run_to_completion(bed, "short-job")
    gone = await wait_for(
        lambda: _gone_at(worker, wl["metadata"]["name"], "short-job"),
        timeout=60,
        what="collected after the ClusterQueue's 3 s, not the manager's hour",
    )
    assert gone is not None
    assert gone >= finished_at + short
    print(f"collected {gone - finished_at:.1f}s after finishing (retention {short:.0f}s)")


async def test_a_deleted_workload_takes_its_kept_objects_at_once(article_bed: Bed) -> None:
    bed = article_bed
    await start(bed, setting=3600.0)
    api, worker = bed.manager_api, bed.worker_apis[WORKER]
    wl, _ = await run_to_completion(bed, "deleted-job")
    name = wl["metadata"]["name"]
    await wait_for(lambda: _all_there(worker, name, "deleted-job"), timeout=10, what="kept")

    await api.delete(R.JOBS, "deleted-job", NS)
    deleted = time.monotonic()
    await wait_for(lambda: _gone_at(worker, name, "deleted-job"), timeout=60, what="collected")
    print(f"collected {time.monotonic() - deleted:.1f}s after the manager's Job was deleted")


async def _all_there(api: KubeApi, workload: str, job: str) -> bool:
    return (await on_worker(api, workload, job)).all


async def _gone_at(api: KubeApi, workload: str, job: str) -> float | None:
    """The wall-clock time by which every one of them is gone; None while one is there."""
    return None if (await on_worker(api, workload, job)).any else time.time()
