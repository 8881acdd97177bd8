"""PyTorchJobs and MPIJobs federated like JobSets, under the real Kubeflow training-operator v1
and MPI operator v2 on the workers (the bed runs them, ``e2e/local/operators.py``; the manager
has only their CRDs): placed whole on one worker with room for every pod set, run there,
their status back on the manager's object until it says Succeeded, and moved once, never
twice, when their worker is cut off. The bed and helpers are ``test_job_kinds.py``'s."""

from __future__ import annotations

import time
from typing import Any

import pytest

from e2e.examples import JOBS
from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.kubeflow import JOB_NAME_LABEL
from manager.controllers.jobkinds.mpijob import MPIJOB
from manager.controllers.jobkinds.pytorchjob import PYTORCHJOB
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.controllers.builders import pod_template
from tests.integration.federation import article
from tests.integration.federation.bed import Bed
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
from tests.integration.federation.test_never_twice_never_stuck import start

pytestmark = pytest.mark.full
NS = article.NS
Obj = dict[str, Any]


def pytorchjob(name: str, *, workers: int, delay_ms: int) -> Obj:
    """A master and ``workers`` workers, each of one H100 GPU, in the H100 queue."""

    def replica(count: int) -> Obj:
        tmpl = pod_template(1, model="h100", delay_ms=delay_ms)
        tmpl["spec"]["containers"][0]["name"] = "pytorch"  # the operator's container name
        return {"replicas": count, "restartPolicy": "OnFailure", "template": tmpl}

    return {
        "apiVersion": PYTORCHJOB.resource.api_version,
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": NS, "labels": {C.QUEUE_NAME_LABEL: "gpu-lq"}},
        "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(workers)}},
    }


def mpijob(name: str, *, workers: int, delay_ms: int) -> Obj:
    """A cpu-only launcher (no node selector: it goes where its workers go) that kwok
    completes after ``delay_ms``, and ``workers`` workers of one H100 GPU each."""
    launcher = pod_template(0, delay_ms=delay_ms)
    worker = pod_template(1, model="h100")
    return {
        "apiVersion": MPIJOB.resource.api_version,
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": NS, "labels": {C.QUEUE_NAME_LABEL: "gpu-lq"}},
        "spec": {
            "slotsPerWorker": 1,
            "runPolicy": {"cleanPodPolicy": "Running"},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": launcher},
                "Worker": {"replicas": workers, "template": worker},
            },
        },
    }


KINDS = {
    "pytorchjob": (PYTORCHJOB, pytorchjob, {"master": 1, "worker": 2}),
    "mpijob": (MPIJOB, mpijob, {"launcher": 1, "worker": 2}),
}
PODS = 3
"""Every job here: three pods, two or three of them on one H100 GPU each."""


async def running_pods(api: KubeApi, kind: JobKind, name: str) -> int:
    """Its pods Running there, not deleting (found by the kind's pod selector)."""
    pods = (await api.list(R.PODS, NS, label_selector=kind.pod_selector(name)))["items"]
    return sum(
        1
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    )


@pytest.mark.parametrize("which", sorted(KINDS))
async def test_upstream_a_kubeflow_job_runs_whole_on_one_worker_and_ends_succeeded(
    article_bed: Bed, which: str
) -> None:
    """Upstream's MultiKueue "Should run a PyTorchJob / an MPIJob on worker if admitted":
    suspended in ``spec.runPolicy`` and given MultiKueue's ``managedBy`` there by the webhook,
    its Workload has upstream's pod sets; placed whole on one H100 worker, all its pods run
    there under the real operator (suspended, no managedBy, resumed by the worker's admission),
    and the manager's object ends Succeeded with the worker's status; its copies go."""
    kind, build, pod_sets = KINDS[which]
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    name = f"{which}-one"
    async with RunWatch(bed.worker_apis, NS, label=JOB_NAME_LABEL) as runs:
        submitted = time.monotonic()
        await api.create(kind.resource, build(name, workers=2, delay_ms=10_000), NS)
        created = await api.get(kind.resource, name, NS)
        assert created["spec"]["runPolicy"]["suspend"] is True
        assert created["spec"]["runPolicy"]["managedBy"] == C.MULTIKUEUE_MANAGED_BY
        wl = await wait_for(lambda: workload_of(api, kind, name), timeout=60, what="its Workload")
        assert wl is not None
        assert {ps["name"]: ps["count"] for ps in wl["spec"]["podSets"]} == pod_sets
        worker = await wait_for(lambda: placed_on(api, kind, name), timeout=60, what="placed")
        assert worker in H100_WORKERS
        wapi = bed.worker_apis[worker]

        async def all_running() -> bool:
            return await running_pods(wapi, kind, name) == PODS

        await wait_for(all_running, timeout=90, interval=0.2, what=f"all {PODS} pods running")
        print(
            f"{which}: submit -> all pods running on {worker}: {time.monotonic() - submitted:.1f}s"
        )
        remote = await wapi.get(kind.resource, name, NS)
        assert remote["spec"]["runPolicy"].get("suspend") is False
        assert "managedBy" not in remote["spec"]["runPolicy"]
        done = await ended(api, kind, name)
        assert done is True
        print(f"{which}: submit -> Succeeded on the manager: {time.monotonic() - submitted:.1f}s")
        status = (await api.get(kind.resource, name, NS))["status"]
        succeeded = [c for c in status["conditions"] if c["type"] == "Succeeded"]
        assert succeeded and succeeded[0]["status"] == "True", status
        first = kind.replica_types[0]  # Master, Launcher: it decides the job's success
        assert status["replicaStatuses"][first]["succeeded"] == 1, status
        wl = await workload_of(api, kind, name)
        assert wl is not None and ws.is_finished(wl)
        assert runs.clusters_of(name) == {worker}, "every pod set ran on that one worker"
        assert not runs.double_runs()

        async def copies_gone() -> bool:
            return not await nothing_of(bed, kind, name)

        await wait_for(copies_gone, timeout=60, what="its copies removed once finished")


@pytest.mark.parametrize("which", sorted(KINDS))
async def test_a_running_kubeflow_job_cut_off_with_its_worker_runs_once_elsewhere(
    article_bed: Bed, which: str
) -> None:
    """The fast policy's partition failover (as for a JobSet): all its pods run on one H100
    worker, which is cut off; the worker fences it (suspended in ``spec.runPolicy``, its pods
    stop), and only then does it run on the other H100 worker, whole, never on two workers at
    once; it ends Succeeded."""
    kind, build, _ = KINDS[which]
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    name = f"{which}-cut"
    async with RunWatch(bed.worker_apis, NS, label=JOB_NAME_LABEL) as runs:
        await api.create(kind.resource, build(name, workers=2, delay_ms=25_000), NS)
        first = await wait_for(lambda: placed_on(api, kind, name), timeout=60, what="placed")
        assert first is not None
        other = other_h100(first)

        async def running_there() -> bool:
            return await running_pods(bed.worker_apis[first], kind, name) == PODS

        await wait_for(running_there, timeout=90, what=f"all pods running on {first}")
        bed.proxies[first].cut()
        cut = time.monotonic()
        try:

            async def running_elsewhere() -> bool:
                return await running_pods(bed.worker_apis[other], kind, name) == PODS

            await wait_for(running_elsewhere, timeout=90, what=f"all pods running on {other}")
            print(f"{which}: cut -> all pods running on {other}: {time.monotonic() - cut:.1f}s")
            assert await running_pods(bed.worker_apis[first], kind, name) == 0, "fenced there"
        finally:
            bed.proxies[first].heal()
        done = await ended(api, kind, name)
        assert done is True
    assert not runs.double_runs(), f"pods of the {kind.resource.kind} ran on two workers at once"
    assert runs.clusters_of(name) == {first, other}


async def test_the_kubeflow_examples_run_through_kfed_submit(article_bed: Bed) -> None:
    """``examples/jobs/pytorchjob-h100.yaml`` and ``mpijob-h100.yaml`` as documented:
    ``kfed submit`` each; each runs whole on one H100 worker and ends Succeeded."""
    bed = article_bed
    api = bed.manager_api
    await start(bed)
    for file, kind in (("pytorchjob-h100.yaml", PYTORCHJOB), ("mpijob-h100.yaml", MPIJOB)):
        name = example(file)["metadata"]["name"]
        code, out, err = await kfed(bed, "submit", str(JOBS / file), "--timeout", "90s")
        assert code == 0, (out, err)
        assert f"created {kind.resource.kind} {NS}/{name}" in out, out
        assert await placed_on(api, kind, name) in H100_WORKERS
        done = await ended(api, kind, name)
        assert done is True, f"{name} failed"
