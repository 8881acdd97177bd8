"""PyTorchJobs (and the other training-operator v1 kinds: TFJob, XGBoostJob, PaddleJob,
JAXJob) and MPIJobs federated like JobSets, under the real Kubeflow training-operator v1
and MPI operator v2 on the workers (the bed runs them, ``e2e/local/operators.py``; the manager
has only their CRDs): placed whole on one worker with room for every pod set, run there,
their status back on the manager's object until it says Succeeded, and moved once, never
twice, when their worker is cut off. The bed and helpers are ``test_job_kinds.py``'s."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Any

import pytest

from e2e.examples import JOBS
from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.jaxjob import JAXJOB
from manager.controllers.jobkinds.kubeflow import JOB_NAME_LABEL, KubeflowJobKind
from manager.controllers.jobkinds.mpijob import MPIJOB
from manager.controllers.jobkinds.paddlejob import PADDLEJOB
from manager.controllers.jobkinds.pytorchjob import PYTORCHJOB
from manager.controllers.jobkinds.tfjob import TFJOB
from manager.controllers.jobkinds.xgboostjob import XGBOOSTJOB
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
from tests.integration.federation.test_never_twice_never_stuck import start

pytestmark = pytest.mark.full
NS = article.NS
Obj = dict[str, Any]


CONTAINERS = {"PyTorchJob": "pytorch", "TFJob": "tensorflow", "XGBoostJob": "xgboost"}
CONTAINERS |= {"PaddleJob": "paddle", "JAXJob": "jax"}
"""The container name each training-operator kind wants in its replicas."""


def training_job(kind: KubeflowJobKind, name: str, replicas: dict[str, int], delay_ms: int) -> Obj:
    """A training-operator job of these replica types and counts, each pod of one H100 GPU, in
    the H100 queue."""

    def replica(count: int) -> Obj:
        tmpl = pod_template(1, model="h100", delay_ms=delay_ms)
        tmpl["spec"]["containers"][0]["name"] = CONTAINERS[kind.resource.kind]
        return {"replicas": count, "restartPolicy": "OnFailure", "template": tmpl}

    return {
        "apiVersion": kind.resource.api_version,
        "kind": kind.resource.kind,
        "metadata": {"name": name, "namespace": NS, "labels": {C.QUEUE_NAME_LABEL: "gpu-lq"}},
        "spec": {kind.replica_specs_field: {t: replica(n) for t, n in replicas.items()}},
    }


def pytorchjob(name: str, *, workers: int, delay_ms: int) -> Obj:
    """A master and ``workers`` workers, each of one H100 GPU, in the H100 queue."""
    return training_job(PYTORCHJOB, name, {"Master": 1, "Worker": workers}, delay_ms)


def tfjob(name: str, *, workers: int, delay_ms: int) -> Obj:
    """A chief, a parameter server and ``workers - 1`` workers, as upstream's MultiKueue test
    has them (the chief decides its success)."""
    return training_job(TFJOB, name, {"Chief": 1, "PS": 1, "Worker": workers - 1}, delay_ms)


def xgboostjob(name: str, *, workers: int, delay_ms: int) -> Obj:
    return training_job(XGBOOSTJOB, name, {"Master": 1, "Worker": workers}, delay_ms)


def paddlejob(name: str, *, workers: int, delay_ms: int) -> Obj:
    return training_job(PADDLEJOB, name, {"Master": 1, "Worker": workers}, delay_ms)


def jaxjob(name: str, *, workers: int, delay_ms: int) -> Obj:
    """Workers only (its one replica type), as many pods as the others have in all."""
    return training_job(JAXJOB, name, {"Worker": workers + 1}, delay_ms)


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
    "tfjob": (TFJOB, tfjob, {"chief": 1, "ps": 1, "worker": 1}),
    "xgboostjob": (XGBOOSTJOB, xgboostjob, {"master": 1, "worker": 2}),
    "paddlejob": (PADDLEJOB, paddlejob, {"master": 1, "worker": 2}),
    "jaxjob": (JAXJOB, jaxjob, {"worker": 3}),
}
RUN_MS = {"pytorchjob": 10_000, "mpijob": 10_000}
"""How long each pod of the "runs whole" test runs; the later kinds' (the default) is
shorter, for the bed's time."""
FAILOVER = ("mpijob", "pytorchjob", "tfjob")
"""The kinds the failover test runs: the training-operator's others fail over alike."""
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
    """Upstream's MultiKueue "Should run a PyTorchJob / an MPIJob / a TFJob / a PaddleJob / a
    XGBoostJob on worker if admitted" (a JAXJob likewise):
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
        await api.create(
            kind.resource, build(name, workers=2, delay_ms=RUN_MS.get(which, 5_000)), NS
        )
        created = await api.get(kind.resource, name, NS)
        assert created["spec"]["runPolicy"]["suspend"] is True
        assert created["spec"]["runPolicy"]["managedBy"] == C.MULTIKUEUE_MANAGED_BY
        wl = await wait_for(lambda: workload_of(api, kind, name), timeout=60, what="its Workload")
        assert wl is not None
        assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == list(
            pod_sets.items()
        ), "upstream's pod sets, in its order"
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
        # Its first pod set's type (Master, Launcher, Chief; a JAXJob's workers) decides.
        [(first, count)] = [
            (t, pod_sets[t.lower()]) for t in kind.replica_types if t.lower() in pod_sets
        ][:1]
        assert status["replicaStatuses"][first]["succeeded"] == count, status

        async def finished() -> bool:
            # The manager finishes the Workload from the job's status: a moment after it.
            wl = await workload_of(api, kind, name)
            return wl is not None and ws.is_finished(wl)

        await wait_for(finished, timeout=30, what=f"{name}'s Workload finished")
        assert runs.clusters_of(name) == {worker}, "every pod set ran on that one worker"
        assert not runs.double_runs()

        async def copies_gone() -> bool:
            return not await nothing_of(bed, kind, name)

        await wait_for(copies_gone, timeout=60, what="its copies removed once finished")


@pytest.mark.parametrize("which", FAILOVER)
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

        def count(worker: KubeApi) -> Awaitable[int]:
            return running_pods(worker, kind, name)

        async with cut_until_moved(bed, first, other, count, PODS, what=which):
            pass
        done = await ended(api, kind, name)
        assert done is True
    assert not runs.double_runs(), f"pods of the {kind.resource.kind} ran on two workers at once"
    assert runs.clusters_of(name) == {first, other}


async def test_the_kubeflow_examples_run_through_kfed_submit(article_bed: Bed) -> None:
    """``examples/jobs/pytorchjob-h100.yaml``, ``mpijob-h100.yaml``, ``tfjob-h100.yaml`` and
    ``jaxjob-h100.yaml`` as documented: ``kfed submit`` each; each runs whole on one H100
    worker and ends Succeeded. (The XGBoostJob's and PaddleJob's are the PyTorchJob's shape:
    tests/unit/cli/test_jobfiles.py reads their pod sets.)"""
    bed = article_bed
    api = bed.manager_api
    await start(bed)
    for kind in (PYTORCHJOB, MPIJOB, TFJOB, JAXJOB):
        file = f"{kind.workload_prefix}-h100.yaml"
        name = example(file)["metadata"]["name"]
        code, out, err = await kfed(bed, "submit", str(JOBS / file), "--timeout", "90s")
        assert code == 0, (out, err)
        assert f"created {kind.resource.kind} {NS}/{name}" in out, out
        assert await placed_on(api, kind, name) in H100_WORKERS
        done = await ended(api, kind, name)
        assert done is True, f"{name} failed"
