"""A worker that grows (issue #46 item 3, the part this bed can run): worker-1 is a cloud worker
with no GPU node until pods wait for one, its H100 nodes made on demand by a real autoscaler
(Karpenter with its kwok cloud provider, built from its Go module; ``e2e/local/autoscaler.py``)
and removed once empty; worker-2 is on-premises with two H100 nodes. worker-1 comes first in
the MultiKueueConfig and has as much quota, so neither config order nor best fit would keep
jobs off it: the manager, reading the worker's NodePools, sends a job there only when the
on-premises worker cannot take it (``decisions/growth.py``), its quota (not its nodes, of
which it has none) bounding what it takes. The job then runs on nodes the autoscaler made for
it, and the worker goes back to zero GPU nodes when the job is done. A batch/v1 Job and a
JobSet alike. The times (submission to running on a new node, to zero nodes again) are
printed."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from e2e.local import autoscaler
from e2e.local.federation import LocalFederation
from e2e.local.proxy import CuttableProxy
from e2e.waiting import wait_for
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.jobkinds.jobset import JOBSET
from manager.federation.settings import PLACEMENT_ANNOTATION
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.conftest import REPO, _state_root
from tests.integration.controllers.builders import jobset
from tests.integration.federation import article
from tests.integration.federation.bed import Bed, federation_of_its_own
from tests.integration.federation.test_job_kinds import ended, placed_on, workload_of
from tests.integration.federation.test_never_twice_never_stuck import start

pytestmark = pytest.mark.full
NS = article.NS
Obj = dict[str, Any]
NODES = REPO / "tests" / "data" / "growing-nodes.yaml"
CLOUD, ON_PREM = "worker-1", "worker-2"
QUOTA = {"cpu": 128, "memory": "1Ti", "nvidia.com/gpu": 8}
"""Each worker's H100 quota: two nodes' worth (the cloud worker's NodePool limit too)."""


@pytest.fixture(scope="module")
def growing(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[LocalFederation, dict[str, CuttableProxy]]]:
    fed = LocalFederation(
        "growing",
        workers=2,
        full=True,
        nodes_file=NODES,
        root=_state_root(tmp_path_factory),
        tie_to_parent=True,
        operators=("jobset",),
        dra=False,
    )
    with federation_of_its_own(fed) as running:
        yield running


@pytest.fixture
async def bed(growing: tuple[LocalFederation, dict[str, CuttableProxy]]) -> AsyncIterator[Bed]:
    fed, proxies = growing
    manager_api = await KubeApi.from_kubeconfig_file(fed.kubeconfig("manager"), name="manager")
    worker_apis = {
        w.name: await KubeApi.from_kubeconfig_file(w.kubeconfig, name=w.name) for w in fed.workers
    }
    bed = Bed(fed, proxies, manager_api, worker_apis)
    try:  # the clients closed even when the set-up fails (left open, they fail a later test)
        await article.set_up(fed, manager_api, worker_apis, only=())
        await _manager_quota(manager_api)
        for api in worker_apis.values():
            for res, body in article.worker_queue_objects("h100", QUOTA):
                # The namespace outlives a test: emptied, not deleted (emptying.py).
                with contextlib.suppress(errors.AlreadyExists):
                    await api.create(res, body, body["metadata"].get("namespace"))
        try:
            yield bed
        finally:
            await bed.stop_all()
            await article.tear_down(manager_api, worker_apis)
    finally:
        await manager_api.close()
        for api in worker_apis.values():
            await api.close()


async def _manager_quota(api: KubeApi) -> None:
    """The article's manager ClusterQueue, its H100 quota both workers' together."""
    cq = await api.get(R.CLUSTER_QUEUES, "gpu-cq")
    for group in cq["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            if flavor["name"] == "h100":
                flavor["resources"] = [
                    {"name": r, "nominalQuota": str(2 * q) if isinstance(q, int) else "2Ti"}
                    for r, q in QUOTA.items()
                ]
    await api.replace(R.CLUSTER_QUEUES, cq)


def gpu_job(name: str, *, gpus: int, delay_ms: int) -> Obj:
    body = article.seed_job("03-heavy-job.yaml", delay_ms=delay_ms)
    body["metadata"]["name"] = name
    resources = body["spec"]["template"]["spec"]["containers"][0]["resources"]
    for part in ("requests", "limits"):
        resources[part].update({"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)})
    return body


async def cloud_nodes(api: KubeApi) -> list[Obj]:
    """The nodes the autoscaler made (Karpenter labels each with its NodePool)."""
    return list((await api.list(R.NODES, label_selector=autoscaler.NODEPOOL_LABEL))["items"])


async def running_on(api: KubeApi, selector: str) -> set[str]:
    """The nodes of the running pods the selector picks."""
    pods = (await api.list(R.PODS, NS, label_selector=selector))["items"]
    return {
        p["spec"].get("nodeName", "")
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running"
    }


async def placed(api: KubeApi, kind: JobKind, name: str) -> str:
    cluster = await wait_for(
        lambda: placed_on(api, kind, name), timeout=60, what=f"{kind.resource.kind} {name} placed"
    )
    return str(cluster)


async def back_to_zero(api: KubeApi) -> float:
    """Waits until the cloud worker has no node the autoscaler made; returns when."""

    async def none_left() -> bool:
        return not await cloud_nodes(api)

    await wait_for(none_left, timeout=120, what="the cloud worker back to zero GPU nodes")
    return time.monotonic()


async def test_jobs_go_on_premises_first_and_the_cloud_worker_grows_for_the_overflow(
    bed: Bed,
) -> None:
    """Two Jobs of 4 GPUs fill the on-premises worker although the cloud worker is first in
    the config and as large; the third goes to the cloud worker, whose placement says its nodes
    come on demand, runs on a node the autoscaler made for it, and when it is done the cloud
    worker has no GPU node again."""
    api, cloud = bed.manager_api, bed.worker_apis[CLOUD]
    await start(bed)
    assert await cloud_nodes(cloud) == []
    for name in ("onprem-a", "onprem-b"):
        await api.create(R.JOBS, gpu_job(name, gpus=4, delay_ms=60_000), NS)
        assert await placed(api, BATCH_JOB, name) == ON_PREM
    submitted = time.monotonic()
    await api.create(R.JOBS, gpu_job("overflow", gpus=4, delay_ms=4_000), NS)
    assert await placed(api, BATCH_JOB, "overflow") == CLOUD
    workload = await workload_of(api, BATCH_JOB, "overflow")
    assert workload is not None
    assert (
        "nodes on demand from NodePool h100-cloud"
        in (workload["metadata"]["annotations"][PLACEMENT_ANNOTATION])
    )

    async def on_a_new_node() -> set[str] | None:
        nodes = await running_on(cloud, "job-name=overflow")
        made = {n["metadata"]["name"] for n in await cloud_nodes(cloud)}
        return nodes if nodes and nodes <= made else None

    await wait_for(on_a_new_node, timeout=90, what="the overflow Job running on a new node")
    running = time.monotonic()
    assert await ended(api, BATCH_JOB, "overflow") is True
    finished = time.monotonic()
    zero = await back_to_zero(cloud)
    print(
        f"\n[growing worker, Job] submitted -> running on a new cloud node "
        f"{running - submitted:.1f}s; finished -> zero GPU nodes {zero - finished:.1f}s"
    )
    for name in ("onprem-a", "onprem-b"):
        await api.delete(R.JOBS, name, NS)


async def test_a_jobset_the_on_premises_worker_cannot_hold_makes_the_cloud_worker_grow(
    bed: Bed,
) -> None:
    """With half the on-premises worker busy, a JobSet of two 4-GPU workers (and a cpu-only
    driver) fits only on the cloud worker: it goes there whole, the autoscaler makes two nodes
    for it, it completes, and the nodes go again."""
    api, cloud = bed.manager_api, bed.worker_apis[CLOUD]
    await start(bed)
    await api.create(R.JOBS, gpu_job("onprem-busy", gpus=4, delay_ms=60_000), NS)
    assert await placed(api, BATCH_JOB, "onprem-busy") == ON_PREM
    submitted = time.monotonic()
    # A cpu-only driver and two workers of 4 GPUs each (one pod per replica).
    body = jobset(NS, "grow-js", "gpu-lq", workers=2, model="h100", delay_ms=4_000)
    workers = body["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    workers["containers"][0]["resources"] = {
        part: {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "4"}
        for part in ("requests", "limits")
    }
    await api.create(JOBSET.resource, body, NS)
    assert await placed(api, JOBSET, "grow-js") == CLOUD

    async def two_new_nodes() -> bool:
        nodes = await running_on(cloud, "jobset.sigs.k8s.io/jobset-name=grow-js")
        return len(nodes) == 2 and len(await cloud_nodes(cloud)) == 2

    await wait_for(two_new_nodes, timeout=90, what="the JobSet's two pods on two new nodes")
    running = time.monotonic()
    assert await ended(api, JOBSET, "grow-js") is True
    finished = time.monotonic()
    zero = await back_to_zero(cloud)
    print(
        f"\n[growing worker, JobSet] submitted -> 2 pods running on 2 new cloud nodes "
        f"{running - submitted:.1f}s; finished -> zero GPU nodes {zero - finished:.1f}s"
    )
    await api.delete(R.JOBS, "onprem-busy", NS)
