"""A fenced run is never the job's result (issue 30, item 3), on real control planes.

Found: a worker's Secret replaced by a kubeconfig kfed refuses (fast policy): the worker's
shim fenced the copy by deactivating it and deleting its running pods at once, without
suspending its Job; with ``backoffLimit: 0`` the Job could end ``Failed`` (deleted running
pods count as failures unless the Job is suspended first). When the worker came back the
manager took that end as a run that "ended while it was unreachable": the healthy second run
elsewhere was stopped and the job recorded Failed.

Now the shim fences as upstream Kueue stops work (the Job suspended, so the Job controller
removes its pods uncounted), and the manager never takes the end of a fenced run as the
job's result: the fenced copy is collected, and the job completes from its real run.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import pytest

from e2e.waiting import wait_for
from manager.controllers import conditions
from manager.controllers import workloadstatus as ws
from manager.federation.decisions.leftovers import FENCED_ANNOTATION
from manager.federation.settings import RAN_ON_ANNOTATION
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj
from manager.kube.informer import Event, Informer
from tests.integration.federation import article
from tests.integration.federation.bed import NAMESPACE, Bed
from tests.integration.federation.runs import RunWatch, Watching
from tests.integration.federation.test_never_twice_never_stuck import (
    complete,
    manager_workload,
    placed_on,
    start,
    wait_active,
    yaml_with_skip_tls,
)

pytestmark = pytest.mark.full
NS = article.NS
JOB = "heavy-job"
RUN_MS = 20_000
"""How long each run's pod takes: the first is fenced long before, the second still runs
when the first worker is back (the moment the fenced run used to be taken as the result)."""


class JobConditions(Watching):
    """Every condition a Job named ``JOB`` ever showed, per cluster."""

    def __init__(self, apis: dict[str, KubeApi]) -> None:
        super().__init__()
        self.seen: dict[str, set[str]] = {name: set() for name in apis}
        self.fenced_on: set[str] = set()
        for name, api in apis.items():
            self.watch(Informer(api, R.JOBS, namespace=NS), functools.partial(self._on, name))

    def _on(self, cluster: str, event: Event) -> None:
        meta = event.obj["metadata"]
        if meta["name"] != JOB:
            return
        if FENCED_ANNOTATION in (meta.get("annotations") or {}):
            self.fenced_on.add(cluster)
        for c in (event.obj.get("status") or {}).get("conditions") or []:
            if c.get("status") == "True":
                self.seen[cluster].add(str(c["type"]))


def heavy_job(backoff_limit: int) -> Obj:
    job = article.seed_job("03-heavy-job.yaml", delay_ms=RUN_MS)
    job["spec"]["backoffLimit"] = backoff_limit
    return job


async def job_failed_by_its_deleted_pods(worker: KubeApi) -> None:
    """The fenced Job ends Failed as the Job controller ends one whose running pod was
    deleted while it still counted it (the finding, where the fence deleted running pods of
    a Job it had not suspended): written through the status subresource, since kwok drops a
    deleted pod's tracking finalizer before the Job controller here can count it."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    why = {
        "status": "True",
        "reason": "BackoffLimitExceeded",
        "message": "Job has reached the specified backoff limit",
        "lastProbeTime": now,
        "lastTransitionTime": now,
    }
    status = {
        "failed": 1,
        "startTime": now,
        "conditions": [{"type": "FailureTarget", **why}, {"type": "Failed", **why}],
    }
    await worker.patch(R.JOBS, JOB, {"status": status}, NS, subresource="status")


@asynccontextmanager
async def refused_secret(api: KubeApi, worker: str) -> AsyncIterator[None]:
    """The worker's Secret replaced by a kubeconfig kfed refuses; put back on exit."""
    secret = await api.get(R.SECRETS, worker, NAMESPACE)
    original = secret["data"]["kubeconfig"]
    await api.patch(
        R.SECRETS, worker, {"data": {"kubeconfig": yaml_with_skip_tls(original)}}, NAMESPACE
    )
    try:
        yield
    finally:
        await api.patch(R.SECRETS, worker, {"data": {"kubeconfig": original}}, NAMESPACE)


@asynccontextmanager
async def cut_proxy(bed: Bed, worker: str) -> AsyncIterator[None]:
    bed.proxies[worker].cut()
    try:
        yield
    finally:
        bed.proxies[worker].heal()


async def fenced_job_fails_over_and_completes_once(
    bed: Bed,
    caplog: pytest.LogCaptureFixture,
    *,
    backoff_limit: int,
    lose: Callable[[str], Any],
    healed: Callable[[str], Awaitable[None]],
    fenced_job_fails: bool = False,
) -> dict[str, float]:
    """The scenario; returns its phases' durations (s)."""
    caplog.set_level(logging.INFO, logger="manager.federation")
    await start(bed)  # the bed's fast policy
    api = bed.manager_api
    clusters = {"manager": api, **bed.worker_apis}
    timings: dict[str, float] = {}
    async with RunWatch(bed.worker_apis, NS) as runs, JobConditions(clusters) as jobs:
        t0 = time.monotonic()
        await api.create(R.JOBS, heavy_job(backoff_limit), NS)
        first = await wait_for(lambda: placed_on(api, JOB), timeout=60, what=f"{JOB} placed")
        assert first in ("worker-2", "worker-3"), first
        other = "worker-3" if first == "worker-2" else "worker-2"

        async def running_on(worker: str) -> bool:
            return worker in runs.clusters_of(JOB)

        await wait_for(functools.partial(running_on, first), timeout=60, what=f"on {first}")
        timings["placed and running"] = time.monotonic() - t0
        t1 = time.monotonic()
        async with lose(first):

            async def moved() -> bool:
                return await placed_on(api, JOB) == other

            await wait_for(moved, timeout=60, what=f"{JOB} moved from {first} to {other}")
            await wait_for(functools.partial(running_on, other), timeout=60, what=f"on {other}")
            timings["cut to running elsewhere"] = time.monotonic() - t1
            assert first in jobs.fenced_on, f"its Job on {first} was not marked fenced"
            fenced = await bed.worker_apis[first].get(R.JOBS, JOB, NS)
            assert fenced["spec"].get("suspend") is True, "fenced without being suspended"
            assert not (fenced.get("status") or {}).get("active"), f"pods still run on {first}"
            assert not runs.succeeded_on[JOB], "the second run must still run when healed"
            if fenced_job_fails:
                await job_failed_by_its_deleted_pods(bed.worker_apis[first])
        t2 = time.monotonic()
        await healed(first)

        async def first_collected() -> bool:
            worker = bed.worker_apis[first]
            left = [j for j in (await worker.list(R.JOBS, NS))["items"]]
            copies = (await worker.list(R.WORKLOADS, NS))["items"]
            return not left and not copies

        await wait_for(first_collected, timeout=60, what=f"the fenced copy collected on {first}")
        timings["healed to fenced copy collected"] = time.monotonic() - t2
        await wait_for(functools.partial(complete, api, JOB), timeout=90, what=f"{JOB} Complete")
        timings["total"] = time.monotonic() - t0

    assert "Failed" not in jobs.seen["manager"], "the fenced run was taken as the result"

    # The manager's Job is Complete once its status is copied back; its Workload is
    # Finished by the next reconcile, a moment later on a busy machine.
    async def finished_workload() -> Obj | None:
        wl = await manager_workload(api, JOB)
        found = wl is not None and conditions.find(ws.status_of(wl).get("conditions"), "Finished")
        return wl if found else None

    wl = await wait_for(finished_workload, timeout=30, what=f"{JOB}'s Workload Finished")
    assert wl is not None
    finished = conditions.find(ws.status_of(wl).get("conditions"), "Finished") or {}
    assert finished.get("reason") == "Succeeded", finished
    assert ws.status_of(wl).get("clusterName") == other
    assert (wl["metadata"].get("annotations") or {}).get(RAN_ON_ANNOTATION) in (None, other)
    assert runs.succeeded_on[JOB].keys() == {other}, "exactly one run counted: the healthy one"
    assert not runs.not_exactly_once([JOB])
    assert not runs.double_runs()
    taken = [
        r.getMessage()
        for r in caplog.records
        if "ended while it was unreachable" in r.getMessage() and first in r.getMessage()
    ]
    assert not taken, taken
    if fenced_job_fails:
        assert "Failed" in jobs.seen[first], f"the fenced Job on {first} never ended Failed"
    elif backoff_limit == 0:
        # Worker side: suspended, never failed by the fence (deleted pods uncounted).
        assert "Failed" not in jobs.seen[first], f"the fence failed the Job on {first}"
    return timings


async def test_a_fenced_run_of_a_job_without_retries_is_never_its_result(
    article_bed: Bed, caplog: pytest.LogCaptureFixture
) -> None:
    """backoffLimit 0, its worker's Secret replaced by a kubeconfig kfed refuses, then put
    back while the moved job still runs on the other worker: the job ends Complete from that
    run, and the fenced copy (never Failed) is collected."""
    bed = article_bed
    api = bed.manager_api

    async def healed(worker: str) -> None:
        await wait_active(api, worker)

    timings = await fenced_job_fails_over_and_completes_once(
        bed,
        caplog,
        backoff_limit=0,
        lose=lambda worker: refused_secret(api, worker),
        healed=healed,
    )
    print(f"timings (s): {timings}")


async def test_a_fenced_run_of_a_job_with_retries_is_never_its_result(
    article_bed: Bed, caplog: pytest.LogCaptureFixture
) -> None:
    """backoffLimit 3, its worker cut off (the shim fences on its lease's silence) and healed
    while the moved job still runs elsewhere: the same."""
    bed = article_bed
    api = bed.manager_api

    async def healed(worker: str) -> None:
        await wait_active(api, worker)

    timings = await fenced_job_fails_over_and_completes_once(
        bed,
        caplog,
        backoff_limit=3,
        lose=lambda worker: cut_proxy(bed, worker),
        healed=healed,
    )
    print(f"timings (s): {timings}")


async def test_a_fenced_run_whose_job_ended_failed_is_collected_never_its_result(
    article_bed: Bed, caplog: pytest.LogCaptureFixture
) -> None:
    """The finding itself: backoffLimit 0, its worker's Secret replaced by one kfed refuses,
    and the fenced Job there ends Failed (its running pods counted as failures) while the
    worker cannot be seen. Back, that end was taken as the run that "ended while it was
    unreachable": the healthy run elsewhere was stopped and the job recorded Failed. Now the
    fenced copy and its Failed Job are collected, and the job completes from its real run."""
    bed = article_bed
    api = bed.manager_api

    async def healed(worker: str) -> None:
        await wait_active(api, worker)

    timings = await fenced_job_fails_over_and_completes_once(
        bed,
        caplog,
        backoff_limit=0,
        lose=lambda worker: refused_secret(api, worker),
        healed=healed,
        fenced_job_fails=True,
    )
    print(f"timings (s): {timings}")
