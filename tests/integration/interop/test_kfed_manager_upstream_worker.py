"""kfed's manager with a worker that runs upstream Kueue instead of kfed's shim (worker-1): the
article's jobs are placed there, admitted there by upstream Kueue, run, and report back; their
remote copies are collected when the jobs go; and a worker of upstream Kueue that is cut off
gets the conservative timeout (it cannot fence), so a job on it never runs a second time."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import pytest

from e2e.waiting import WaitTimeout, wait_for
from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.informer import Event
from tests.integration.controllers.helpers import condition
from tests.integration.federation import article
from tests.integration.federation.bed import Bed
from tests.integration.federation.runs import RunWatch
from tests.integration.federation.test_dispatch import complete, placed
from tests.integration.interop.conftest import KFED_WORKER, KUEUE_WORKER
from tests.integration.interop.recording import WorkerRecord

pytestmark = pytest.mark.full
NS = article.NS
KWOK_DELAY = "pod-complete.stage.kwok.x-k8s.io/delay"


async def maintenance(api: KubeApi, worker: str, mode: str | None) -> None:
    """``kfed.io/maintenance`` on a worker's MultiKueueCluster (None lifts it)."""
    patch = {"metadata": {"annotations": {C.MAINTENANCE_ANNOTATION: mode}}}
    await api.patch(R.MULTIKUEUE_CLUSTERS, worker, patch)


async def placed_on(api: KubeApi, job: str, worker: str) -> dict[str, Any] | None:
    wl = await placed(api, job)
    return wl if wl is not None and ws.status_of(wl).get("clusterName") == worker else None


async def wait_placed(api: KubeApi, job: str) -> dict[str, Any]:
    """The manager's workload of ``job`` once placed on upstream Kueue's worker."""
    wl: dict[str, Any] | None = await wait_for(
        lambda: placed_on(api, job, KUEUE_WORKER), timeout=60, what=f"{job} placed on worker-1"
    )
    assert wl is not None
    return wl


async def test_kfed_manager_runs_the_article_jobs_on_a_worker_running_upstream_kueue(
    bed: Bed,
) -> None:
    manager = bed.manager_api
    await maintenance(manager, KFED_WORKER, C.MAINTENANCE_CORDON)  # so all go to worker-1
    try:
        await bed.start_manager()
        async with WorkerRecord(bed.worker_apis[KUEUE_WORKER], NS) as there:
            started = time.monotonic()
            jobs = {"light-job": "02-light-job.yaml", "heavy-job": "03-heavy-job.yaml"}
            for name, seed in jobs.items():
                job = article.seed_job(seed, metadata={"name": f"a-{name}"}, delay_ms=2000)
                await manager.create(R.JOBS, job, NS)
            placed = {name: await wait_placed(manager, f"a-{name}") for name in jobs}
            for name in jobs:
                await wait_for(
                    lambda n=name: complete(manager, f"a-{n}"),  # type: ignore[misc]
                    timeout=90,
                    what=f"a-{name} Complete on the manager",
                )
            submit_to_complete = time.monotonic() - started

            # Upstream Kueue admitted the copies (no kfed shim runs there) into the article's
            # gpu-cq, with the flavor each job's GPU needs, and the pods ran on those nodes.
            copies = []
            for name, model in (("light-job", "rtx-a1000"), ("heavy-job", "h100")):
                copy = there.last[placed[name]["metadata"]["name"]]
                copies.append(copy["metadata"]["name"])
                origin = copy["metadata"]["labels"][C.MULTIKUEUE_ORIGIN_LABEL]
                assert origin == bed.settings.origin
                admission = ws.status_of(copy)["admission"]
                assert admission["clusterQueue"] == "gpu-cq"
                assert admission["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"] == model
                admitted = condition(copy, "Admitted")
                assert admitted is not None and admitted["status"] == "True"
                assert await there.gpu_models_of(f"a-{name}") == {model}
            assert bed.manager is not None
            remote = bed.manager.registry.remote(KUEUE_WORKER)
            assert remote is not None and not remote.can_fence, "upstream Kueue cannot fence"
            # Each copy made once and removed once the job finished.
            assert {c: there.created[c] for c in copies} == dict.fromkeys(copies, 1)
            await wait_for(
                lambda: all(there.deleted[c] == 1 for c in copies), timeout=60, what="removed"
            )

            # A job deleted on the manager while it runs there: its copies go too.
            job = article.seed_job("02-light-job.yaml", metadata={"name": "a-deleted"})
            job["spec"]["template"]["metadata"]["annotations"][KWOK_DELAY] = "600000"
            await manager.create(R.JOBS, job, NS)
            running = await wait_placed(manager, "a-deleted")
            await wait_for(lambda: there.nodes["a-deleted"], timeout=60, what="its pod bound")
            await manager.delete(R.JOBS, "a-deleted", NS, propagation="Foreground")
            copy_name = running["metadata"]["name"]
            # A chain of controllers on two loaded clusters (the manager's garbage collector,
            # kfed, upstream Kueue and the worker's garbage collector): a generous deadline,
            # and where it stopped if it is missed.
            try:
                await wait_for(
                    lambda: there.deleted[copy_name] >= 1, timeout=120, what="its copy collected"
                )
            except WaitTimeout as err:
                raise AssertionError(f"{err}; {await deletion_chain(bed, copy_name)}") from err
            assert there.created[copy_name] == there.deleted[copy_name] == 1
            await wait_for(
                lambda: remote_job_gone(bed.worker_apis[KUEUE_WORKER], "a-deleted"),
                timeout=60,
                what="its Job there removed",
            )
        print(
            f"kfed manager -> upstream Kueue worker: submit to Complete {submit_to_complete:.1f}s"
        )
    finally:
        await maintenance(manager, KFED_WORKER, None)


async def deletion_chain(bed: Bed, workload: str) -> str:
    """Where the deletion of a placed job stands: its workload on the manager and its copy and
    Job on upstream Kueue's worker (finalizers and deletion timestamps)."""

    async def state(api: KubeApi, res: R.Resource, name: str) -> str:
        try:
            meta = (await api.get(res, name, NS))["metadata"]
        except errors.NotFound:
            return "gone"
        return f"deleting={meta.get('deletionTimestamp')} finalizers={meta.get('finalizers')}"

    worker = bed.worker_apis[KUEUE_WORKER]
    jobs = [j["metadata"]["name"] for j in (await worker.list(R.JOBS, NS))["items"]]
    return (
        f"manager workload: {await state(bed.manager_api, R.WORKLOADS, workload)}; "
        f"worker copy: {await state(worker, R.WORKLOADS, workload)}; worker jobs: {jobs}"
    )


async def remote_job_gone(api: KubeApi, name: str) -> bool:
    return not [j for j in (await api.list(R.JOBS, NS))["items"] if j["metadata"]["name"] == name]


async def test_a_cut_off_upstream_worker_gets_the_conservative_timeout_and_runs_nothing_twice(
    bed: Bed,
) -> None:
    """Upstream Kueue cannot fence: kfed moves nothing off it before the worker-lost timeout,
    even under the bed's fast failover policy (which moves a kfed worker's jobs 5.5 s after a
    cut) and with a free kfed worker beside it; when the link heals within the timeout, the
    same pod finishes there. ``test_g_...`` in test_failover.py is the same case with a shim
    that does not fence; this is the real thing."""
    bed.settings = dataclasses.replace(bed.settings, worker_lost_timeout=40.0)
    manager = bed.manager_api
    await bed.start_shim(KFED_WORKER)
    await maintenance(manager, KFED_WORKER, C.MAINTENANCE_CORDON)
    controller = await bed.start_manager()
    name = "cut-light-job"
    placements: list[str] = []

    def on_workload(event: Event) -> None:
        owner = (event.obj["metadata"].get("ownerReferences") or [{}])[0].get("name")
        cluster = ws.status_of(event.obj).get("clusterName")
        if owner == name and cluster and (not placements or placements[-1] != cluster):
            placements.append(cluster)

    controller.manager.state.workloads.subscribe(on_workload)
    async with RunWatch(bed.worker_apis, NS) as runs:
        job = article.seed_job("02-light-job.yaml", metadata={"name": name}, delay_ms=30_000)
        await manager.create(R.JOBS, job, NS)
        await wait_for(
            lambda: placed_on(manager, name, KUEUE_WORKER), timeout=60, what="placed on worker-1"
        )
        await wait_for(
            lambda: runs.clusters_of(name) == {KUEUE_WORKER}, timeout=60, what="running there"
        )
        await maintenance(manager, KFED_WORKER, None)  # from now on it could move to worker-3
        remote = controller.registry.remote(KUEUE_WORKER)
        assert remote is not None and not remote.can_fence
        bed.proxies[KUEUE_WORKER].cut()
        await wait_for(lambda: remote.state.lost_since is not None, timeout=30, what="lost")
        # The stimulus, not a synchronisation: a partition three times as long as the fast policy's
        # failover, well inside the worker-lost timeout.
        await asyncio.sleep(3 * bed.settings.fenced_failover_after)
        assert placements == [KUEUE_WORKER], "nothing moves off a worker that cannot fence"
        bed.proxies[KUEUE_WORKER].heal()
        await wait_for(lambda: complete(manager, name), timeout=90, what=f"{name} Complete")
        assert placements == [KUEUE_WORKER]
        assert runs.clusters_of(name) == {KUEUE_WORKER}
        assert runs.not_exactly_once([name]) == {}
        assert runs.double_runs() == []
