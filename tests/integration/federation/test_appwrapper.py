"""AppWrappers federated under the real AppWrapper operator (project-codeflare, built from its
Go module; the bed runs it on the workers, ``e2e/local/operators.py``; the manager has only
its CRD): an AppWrapper of a batch/v1 Job of H100 pods is placed whole on one H100 worker,
where the operator creates the Job once the worker resumes it (the Job itself never queued
there), its status comes back to the manager's object until it says Succeeded; and it moves
once, never running on two workers at once, when its worker is cut off. The bed and helpers
are ``test_job_kinds.py``'s."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Any

import pytest

from e2e.examples import JOBS
from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.appwrapper import APPWRAPPER, APPWRAPPER_LABEL
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.controllers.builders import pod_template
from tests.integration.federation import article
from tests.integration.federation.bed import Bed
from tests.integration.federation.cutting import cut_until_moved
from tests.integration.federation.runs import RunWatch
from tests.integration.federation.test_drill import kfed
from tests.integration.federation.test_job_kinds import (
    H100_WORKERS,
    ended,
    example,
    nothing_of,
    other_h100,
    placed_on,
    workload_of,
)
from tests.integration.federation.test_kubeflow_kinds import running_pods
from tests.integration.federation.test_never_twice_never_stuck import start

pytestmark = pytest.mark.full
NS = article.NS
Obj = dict[str, Any]
PODS = 2


def appwrapper(name: str, *, delay_ms: int) -> Obj:
    """An AppWrapper of one Job of ``PODS`` pods of one H100 GPU each, which kwok completes
    after ``delay_ms``, in the H100 queue."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{name}-job"},
        "spec": {
            "parallelism": PODS,
            "completions": PODS,
            "template": pod_template(1, model="h100", delay_ms=delay_ms),
        },
    }
    return {
        "apiVersion": APPWRAPPER.resource.api_version,
        "kind": "AppWrapper",
        "metadata": {"name": name, "namespace": NS, "labels": {C.QUEUE_NAME_LABEL: "gpu-lq"}},
        "spec": {"components": [{"template": job}]},
    }


async def workloads_owned_by_jobs(api: KubeApi) -> list[str]:
    """Workloads of ``NS`` there that a batch/v1 Job owns: a wrapped Job queued again."""
    return [
        wl["metadata"]["name"]
        for wl in (await api.list(R.WORKLOADS, NS))["items"]
        if ws.owner_kind(wl) == "Job"
    ]


async def test_upstream_an_appwrapper_runs_whole_on_one_worker_and_ends_succeeded(
    article_bed: Bed,
) -> None:
    """Upstream's MultiKueue "Should run an appwrapper on worker if admitted": suspended and
    given MultiKueue's ``managedBy`` by the webhook, its Workload has upstream's pod set
    (``<name>-0``, the Job's pods); placed whole on one H100 worker, where the operator
    creates the Job from the resumed copy (no ``managedBy``) and both its pods run there; the
    Job is not queued a second time there; the manager's object ends Succeeded with the
    worker's status, its Workload finished, its copies gone."""
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    name = "aw-one"
    async with RunWatch(bed.worker_apis, NS, label=APPWRAPPER_LABEL) as runs:
        submitted = time.monotonic()
        await api.create(APPWRAPPER.resource, appwrapper(name, delay_ms=10_000), NS)
        created = await api.get(APPWRAPPER.resource, name, NS)
        assert created["spec"]["suspend"] is True
        assert created["spec"]["managedBy"] == C.MULTIKUEUE_MANAGED_BY
        wl = await wait_for(lambda: workload_of(api, APPWRAPPER, name), timeout=60, what="its WL")
        assert wl is not None
        assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [(f"{name}-0", PODS)]
        worker = await wait_for(lambda: placed_on(api, APPWRAPPER, name), timeout=60, what="placed")
        assert worker in H100_WORKERS
        wapi = bed.worker_apis[worker]

        async def all_running() -> bool:
            return await running_pods(wapi, APPWRAPPER, name) == PODS

        await wait_for(all_running, timeout=90, interval=0.2, what=f"all {PODS} pods running")
        took = time.monotonic() - submitted
        print(f"appwrapper: submit -> all pods running on {worker}: {took:.1f}s")
        remote = await wapi.get(APPWRAPPER.resource, name, NS)
        assert remote["spec"].get("suspend") is not True
        assert "managedBy" not in remote["spec"]
        wrapped = await wapi.get(R.JOBS, f"{name}-job", NS)
        assert wrapped["metadata"]["labels"][APPWRAPPER_LABEL] == name
        assert C.QUEUE_NAME_LABEL not in wrapped["metadata"]["labels"]
        assert wrapped["spec"]["template"]["spec"]["nodeSelector"]["gpu.model"] == "h100"
        assert await workloads_owned_by_jobs(wapi) == [], "the wrapped Job is not queued there"
        done = await ended(api, APPWRAPPER, name)
        assert done is True
        print(
            f"appwrapper: submit -> Succeeded on the manager: {time.monotonic() - submitted:.1f}s"
        )
        status = (await api.get(APPWRAPPER.resource, name, NS))["status"]
        assert status["phase"] == "Succeeded", status
        assert [c["name"] for c in status["componentStatus"]] == [f"{name}-job"], status

        async def finished() -> bool:
            # The manager finishes the Workload from the AppWrapper's status: a moment after it.
            wl = await workload_of(api, APPWRAPPER, name)
            return wl is not None and ws.is_finished(wl)

        await wait_for(finished, timeout=30, what=f"{name}'s Workload finished")
        assert runs.clusters_of(name) == {worker}, "every pod ran on that one worker"
        assert not runs.double_runs()

        async def copies_gone() -> bool:
            return not await nothing_of(bed, APPWRAPPER, name)

        await wait_for(copies_gone, timeout=60, what="its copies removed once finished")


async def test_a_running_appwrapper_cut_off_with_its_worker_runs_once_elsewhere(
    article_bed: Bed,
) -> None:
    """The fast policy's partition failover: both pods run on one H100 worker, which is cut
    off; its shim fences the copy (suspended: the operator deletes the Job and its pods), and
    only then does it run on the other H100 worker, whole, never on two workers at once; it
    ends Succeeded."""
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    name = "aw-cut"
    async with RunWatch(bed.worker_apis, NS, label=APPWRAPPER_LABEL) as runs:
        await api.create(APPWRAPPER.resource, appwrapper(name, delay_ms=15_000), NS)
        first = await wait_for(lambda: placed_on(api, APPWRAPPER, name), timeout=60, what="placed")
        assert first is not None
        other = other_h100(first)

        def count(worker: KubeApi) -> Awaitable[int]:
            return running_pods(worker, APPWRAPPER, name)

        async with cut_until_moved(bed, first, other, count, PODS, what="appwrapper"):
            fenced = await bed.worker_apis[first].get(APPWRAPPER.resource, name, NS)
            assert fenced["spec"]["suspend"] is True
        done = await ended(api, APPWRAPPER, name)
        assert done is True
    assert not runs.double_runs(), "pods of the AppWrapper ran on two workers at once"
    assert runs.clusters_of(name) == {first, other}


async def test_the_appwrapper_example_runs_through_kfed_submit(article_bed: Bed) -> None:
    """``examples/jobs/appwrapper-h100.yaml`` as documented: ``kfed submit``; it runs whole on
    one H100 worker and ends Succeeded."""
    bed = article_bed
    await start(bed)
    file = "appwrapper-h100.yaml"
    name = example(file)["metadata"]["name"]
    code, out, err = await kfed(bed, "submit", str(JOBS / file), "--timeout", "90s")
    assert code == 0, (out, err)
    assert f"created AppWrapper {NS}/{name}" in out, out
    assert await placed_on(bed.manager_api, APPWRAPPER, name) in H100_WORKERS
    assert await ended(bed.manager_api, APPWRAPPER, name) is True
