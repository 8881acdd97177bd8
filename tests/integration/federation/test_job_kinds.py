"""JobSets, TrainJobs and RayClusters federated like Jobs, under the real JobSet, Trainer and
KubeRay operators on the workers (the bed runs them, ``e2e/local/operators.py``; the manager
has only their CRDs): placed whole on one worker with the free GPUs, run there, their status
back on the manager's object, moved once when their worker is cut off or drained, and a kind
with no adapter refused as upstream refuses it."""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Awaitable
from typing import Any

import pytest
import yaml

from e2e import binaries
from e2e.binaries import operators
from e2e.examples import JOBS
from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.jobset import JOBSET
from manager.controllers.jobkinds.raycluster import RAYCLUSTER
from manager.controllers.jobkinds.trainjob import CLUSTER_TRAINING_RUNTIMES, TRAINJOB
from manager.federation.decisions import checkstatus
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.controllers.builders import jobset, raycluster
from tests.integration.federation import article
from tests.integration.federation.bed import CHECK, Bed
from tests.integration.federation.cutting import all_running, cut_until_moved
from tests.integration.federation.runs import RunWatch
from tests.integration.federation.test_dispatch import h100_job
from tests.integration.federation.test_drill import kfed
from tests.integration.federation.test_never_twice_never_stuck import start

pytestmark = pytest.mark.full
NS = article.NS
Obj = dict[str, Any]
H100_WORKERS = ("worker-2", "worker-3")
JOBSET_POD_LABEL = JOBSET.pod_label


async def workload_of(api: KubeApi, kind: JobKind, name: str) -> Obj | None:
    try:
        job = await api.get(kind.resource, name, NS)
        return await api.get(R.WORKLOADS, kind.workload_name(name, job["metadata"]["uid"]), NS)
    except errors.NotFound:
        return None


async def placed_on(api: KubeApi, kind: JobKind, name: str) -> str | None:
    wl = await workload_of(api, kind, name)
    if wl is None or checkstatus.check_state(wl, CHECK)[0] != "Ready":
        return None
    return str(ws.status_of(wl).get("clusterName") or "") or None


async def check_message(api: KubeApi, kind: JobKind, name: str) -> str:
    wl = await workload_of(api, kind, name)
    return checkstatus.check_state(wl, CHECK)[1] if wl is not None else ""


async def outcome(api: KubeApi, kind: JobKind, name: str) -> bool | None:
    """True/False once the manager's object says it succeeded/failed."""
    found = kind.outcome(await api.get(kind.resource, name, NS))
    return found.succeeded if found is not None else None


async def ended(api: KubeApi, kind: JobKind, name: str) -> bool | None:
    """Once the manager's object says how it ended: whether it succeeded."""
    return await wait_for(
        lambda: outcome(api, kind, name), timeout=120, what=f"{kind.resource.kind} {name} ended"
    )


async def jobset_pods(api: KubeApi, name: str, phase: str = "Running") -> int:
    pods = (await api.list(R.PODS, NS, label_selector=f"{JOBSET_POD_LABEL}={name}"))["items"]
    return sum(
        1
        for p in pods
        if (p.get("status") or {}).get("phase") == phase
        and not p["metadata"].get("deletionTimestamp")
    )


async def nothing_of(bed: Bed, kind: JobKind, name: str) -> list[str]:
    """The workers that hold a copy of the workload or an object of the job."""
    found = []
    for worker, wapi in bed.worker_apis.items():
        copies = (await wapi.list(R.WORKLOADS, NS))["items"]
        jobs = (await wapi.list(kind.resource, NS))["items"]
        if [c for c in copies if f"-{name}-" in c["metadata"]["name"]] or [
            j for j in jobs if j["metadata"]["name"] == name
        ]:
            found.append(worker)
    return found


def other_h100(worker: str) -> str:
    return next(w for w in H100_WORKERS if w != worker)


async def running_jobset(bed: Bed, name: str, *, delay_ms: int) -> tuple[str, str]:
    """Submit a JobSet of a driver and four one-GPU H100 workers; once all 5 pods run on one
    H100 worker: that worker and the other H100 worker."""
    api = bed.manager_api
    body = jobset(NS, name, "gpu-lq", workers=4, model="h100", delay_ms=delay_ms)
    await api.create(JOBSET.resource, body, NS)
    first = await wait_for(lambda: placed_on(api, JOBSET, name), timeout=60, what="placed")
    assert first is not None
    await all_running(bed, first, lambda worker: jobset_pods(worker, name), 5)
    return first, other_h100(first)


async def test_upstream_a_jobset_runs_on_one_worker_and_ends_completed_with_its_status(
    article_bed: Bed,
) -> None:
    """Upstream's MultiKueue "Should run a jobSet on worker if admitted": a driver and four
    one-GPU H100 workers (5 pods) are placed whole on one H100 worker, run there under the
    real JobSet controller, and the manager's JobSet ends Completed with the worker's status;
    its copies are removed once it finished."""
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    async with RunWatch(bed.worker_apis, NS, label=JOBSET_POD_LABEL) as runs:
        submitted = time.monotonic()
        await api.create(
            JOBSET.resource,
            jobset(NS, "train", "gpu-lq", workers=4, model="h100", delay_ms=10_000),
            NS,
        )
        created = await api.get(JOBSET.resource, "train", NS)
        assert created["spec"]["suspend"] is True
        assert created["spec"]["managedBy"] == C.MULTIKUEUE_MANAGED_BY
        worker = await wait_for(
            lambda: placed_on(api, JOBSET, "train"), timeout=60, what="the JobSet placed"
        )
        assert worker in H100_WORKERS
        wapi = bed.worker_apis[worker]

        async def all_five_running() -> bool:
            return await jobset_pods(wapi, "train") == 5

        await wait_for(all_five_running, timeout=90, interval=0.2, what="all 5 pods running")
        print(f"submit -> all 5 pods running on {worker}: {time.monotonic() - submitted:.1f}s")
        remote = await wapi.get(JOBSET.resource, "train", NS)
        assert remote["spec"]["suspend"] is False and "managedBy" not in remote["spec"]
        done = await ended(api, JOBSET, "train")
        assert done is True
        manager_status = (await api.get(JOBSET.resource, "train", NS))["status"]
        assert manager_status.get("terminalState") == "Completed", manager_status
        succeeded = {s["name"]: s.get("succeeded") for s in manager_status["replicatedJobsStatus"]}
        assert succeeded == {"driver": 1, "workers": 2}, "the worker's replicated job counts"

        async def finished() -> bool:
            # The JobSet's status comes back first; its Workload is finished from it after.
            wl = await workload_of(api, JOBSET, "train")
            return wl is not None and ws.is_finished(wl)

        await wait_for(finished, timeout=30, what="its Workload Finished")
        assert runs.clusters_of("train") == {worker}, "every pod set ran on that one worker"
        assert not runs.double_runs()

        async def copies_gone() -> bool:
            return not await nothing_of(bed, JOBSET, "train")

        await wait_for(copies_gone, timeout=60, what="its copies removed once finished")


async def test_a_jobset_that_no_single_worker_can_hold_waits_and_is_never_split(
    article_bed: Bed,
) -> None:
    """Each H100 worker has 2 of its 4 GPUs free: 4 are free in all, as many as the JobSet
    asks for, but on no one worker. It waits with a reason naming both, nothing of it is
    created anywhere, and once one worker has 4 free it runs there whole."""
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    for worker in H100_WORKERS:
        await bed.worker_apis[worker].create(R.JOBS, h100_job("half", gpus=2, delay_ms=600_000), NS)
    await api.create(JOBSET.resource, jobset(NS, "big", "gpu-lq", workers=4, model="h100"), NS)

    async def waiting_for_both() -> str | None:
        message = await check_message(api, JOBSET, "big")
        return message if all(w in message for w in H100_WORKERS) else None

    message = await wait_for(waiting_for_both, timeout=60, what="a wait naming both workers")
    print(message)
    assert await placed_on(api, JOBSET, "big") is None
    assert not await nothing_of(bed, JOBSET, "big"), "nothing of it on any worker"
    await bed.worker_apis["worker-3"].delete(R.JOBS, "half", NS, propagation="Background")
    chosen = await wait_for(
        lambda: placed_on(api, JOBSET, "big"), timeout=90, what="placed once a worker has room"
    )
    assert chosen == "worker-3"

    async def all_five_running() -> bool:
        return await jobset_pods(bed.worker_apis["worker-3"], "big") == 5

    await wait_for(all_five_running, timeout=90, what="all 5 pods running on worker-3")
    assert await jobset_pods(bed.worker_apis["worker-2"], "big") == 0


async def test_upstream_a_raycluster_becomes_ready_on_a_worker_and_its_deletion_reaches_it(
    article_bed: Bed,
) -> None:
    """Upstream's MultiKueue "Should run a RayCluster on worker if admitted": a head and a
    group of two one-GPU H100 workers, placed on one worker, ready there under the real KubeRay
    operator, the manager's RayCluster shows it ready; deleted on the manager, it is deleted
    on the worker."""
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    await api.create(
        RAYCLUSTER.resource, raycluster(NS, "ray", "gpu-lq", gpu_workers=2, model="h100"), NS
    )
    worker = await wait_for(
        lambda: placed_on(api, RAYCLUSTER, "ray"), timeout=60, what="the RayCluster placed"
    )
    assert worker in H100_WORKERS

    async def ready_on_manager() -> bool:
        status = (await api.get(RAYCLUSTER.resource, "ray", NS)).get("status") or {}
        return status.get("state") == "ready"

    await wait_for(ready_on_manager, timeout=120, what="the manager's RayCluster ready")
    remote = await bed.worker_apis[worker].get(RAYCLUSTER.resource, "ray", NS)
    assert (remote.get("status") or {}).get("state") == "ready"
    assert not await nothing_of(bed, RAYCLUSTER, "ray") or await nothing_of(
        bed, RAYCLUSTER, "ray"
    ) == [worker], "on that worker only"
    await api.delete(RAYCLUSTER.resource, "ray", NS)

    async def gone_everywhere() -> bool:
        return not await nothing_of(bed, RAYCLUSTER, "ray")

    await wait_for(gone_everywhere, timeout=60, what="the RayCluster gone from the worker")


async def test_a_running_jobset_cut_off_with_its_worker_is_fenced_and_runs_once_elsewhere(
    article_bed: Bed,
) -> None:
    """The fast policy's partition failover, for a JobSet: all 5 pods run on one H100 worker,
    which is cut off; the worker fences the JobSet (its pods stop), and only then does it run
    on the other H100 worker, whole, never on two workers at once; it ends Completed."""
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    async with RunWatch(bed.worker_apis, NS, label=JOBSET_POD_LABEL) as runs:
        first, other = await running_jobset(bed, "cut", delay_ms=25_000)

        def count(worker: KubeApi) -> Awaitable[int]:
            return jobset_pods(worker, "cut")

        async with cut_until_moved(bed, first, other, count, 5, what="jobset"):
            pass
        done = await ended(api, JOBSET, "cut")
        assert done is True
    assert not runs.double_runs(), "pods of the JobSet ran on two workers at once"
    assert runs.clusters_of("cut") == {first, other}


async def test_a_running_jobset_moves_off_a_drained_worker_whole(article_bed: Bed) -> None:
    """``drain`` on the JobSet's worker: its pods stop there and it runs on the other H100
    worker, whole; nothing of it is left on the drained one."""
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    first, other = await running_jobset(bed, "drained", delay_ms=120_000)
    annotate = {"metadata": {"annotations": {C.MAINTENANCE_ANNOTATION: "drain"}}}
    await api.patch(R.MULTIKUEUE_CLUSTERS, first, annotate)
    try:

        async def moved_whole() -> bool:
            return await jobset_pods(bed.worker_apis[other], "drained") == 5

        await wait_for(moved_whole, timeout=90, what=f"all 5 pods running on {other}")

        async def nothing_left() -> bool:
            return first not in await nothing_of(bed, JOBSET, "drained") and (
                await jobset_pods(bed.worker_apis[first], "drained") == 0
            )

        await wait_for(nothing_left, timeout=90, what=f"nothing of it left on {first}")
    finally:
        cleared = {"metadata": {"annotations": {C.MAINTENANCE_ANNOTATION: None}}}
        await api.patch(R.MULTIKUEUE_CLUSTERS, first, cleared)


async def test_a_jobset_asking_more_gpus_than_any_worker_has_waits_with_a_reason(
    article_bed: Bed,
) -> None:
    """Six H100 GPUs, more than the global quota (and any worker) holds: the Workload stays
    pending with the admission's readable reason, and nothing is created on any worker."""
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    await api.create(JOBSET.resource, jobset(NS, "huge", "gpu-lq", workers=6, model="h100"), NS)

    async def pending_reason() -> str | None:
        wl = await workload_of(api, JOBSET, "huge")
        for c in ws.status_of(wl or {}).get("conditions") or []:
            if c["type"] == C.QUOTA_RESERVED and c["status"] == "False" and c.get("message"):
                return str(c["message"])
        return None

    message = await wait_for(pending_reason, timeout=60, what="a pending reason")
    assert message is not None and "nvidia.com/gpu" in message, message
    assert not await nothing_of(bed, JOBSET, "huge")


async def test_upstream_a_workload_of_a_kind_without_an_adapter_is_rejected_and_never_sent(
    article_bed: Bed,
) -> None:
    """Upstream's rejection, in its words: a Workload whose owner is of a kind MultiKueue has
    no adapter for (here a ConfigMap) gets the check Rejected and is deactivated; nothing is
    sent to any worker."""
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    owner = await api.create(R.CONFIGMAPS, {"metadata": {"name": "odd-owner"}}, NS)
    request = {"cpu": "1", "nvidia.com/gpu": "1"}
    await api.create(
        R.WORKLOADS,
        {
            "apiVersion": C.API_VERSION,
            "kind": "Workload",
            "metadata": {
                "name": "odd",
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "name": "odd-owner",
                        "uid": owner["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "queueName": "gpu-lq",
                "podSets": [
                    {
                        "name": "main",
                        "count": 1,
                        "template": {
                            "spec": {
                                "nodeSelector": {"gpu.model": "h100"},
                                "containers": [
                                    {
                                        "name": "c",
                                        "image": "busybox",
                                        "resources": {"requests": request},
                                    }
                                ],
                            }
                        },
                    }
                ],
            },
        },
        NS,
    )

    async def rejected() -> str | None:
        wl = await api.get(R.WORKLOADS, "odd", NS)
        if ws.is_active(wl):
            return None
        for c in ws.status_of(wl).get("conditions") or []:
            if c["type"] == C.EVICTED and c["status"] == "True" and "rejected" in c["message"]:
                return str(c["message"])
        return None

    message = await wait_for(rejected, timeout=60, what="the workload rejected and deactivated")
    expected = 'No multikueue adapter found for owner kind "/v1, Kind=ConfigMap"'
    assert message is not None and f"{CHECK}: {expected}" in message, message
    for worker, wapi in bed.worker_apis.items():
        copies = (await wapi.list(R.WORKLOADS, NS))["items"]
        assert not [c for c in copies if c["metadata"]["name"] == "odd"], worker


async def install_runtime(api: KubeApi, name: str = "torch_distributed.yaml") -> str:
    """One of the trainer's stock ClusterTrainingRuntimes on the manager (the bed installs
    them on the workers, where the trainer runs); returns its name."""
    path = binaries.operator_dir("trainer") / "runtimes" / name
    (runtime,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
    with contextlib.suppress(errors.AlreadyExists):
        await api.create(CLUSTER_TRAINING_RUNTIMES, runtime)
    return str(runtime["metadata"]["name"])


TRAINJOB_EXAMPLE = (
    "trainjob-h100-trainer-2.1.yaml"
    if binaries.operator_version("trainer").startswith("2.1.")
    else "trainjob-h100.yaml"
)
"""The TrainJob example of the bed's Trainer: 2.2 removed ``podTemplateOverrides``."""


def users_trainjob_entry(pod_set: str, template: Obj) -> dict[str, list[Obj]]:
    """A user's change of one replicated job's pod ``template`` (its ``metadata``, ``spec``)
    in the shape of the bed's Trainer: a podTemplateOverride (2.1) or a runtime patch (2.2
    and after), as the TrainJob's ``spec`` field that holds it."""
    if TRAINJOB_EXAMPLE != "trainjob-h100.yaml":
        return {"podTemplateOverrides": [{"targetJobs": [{"name": pod_set}], **template}]}
    replicated = {"name": pod_set, "template": {"spec": {"template": template}}}
    patch = {"template": {"spec": {"replicatedJobs": [replicated]}}}
    return {"runtimePatches": [{"manager": "example.com/ml-team", "trainingRuntimeSpec": patch}]}


def example(name: str) -> Obj:
    """One of ``examples/jobs/``, as a user submits it."""
    (doc,) = [d for d in yaml.safe_load_all((JOBS / name).read_text()) if d]
    return dict(doc)


async def test_upstream_a_trainjob_runs_on_a_worker_and_ends_complete(article_bed: Bed) -> None:
    """Upstream's MultiKueue "Should run a TrainJob on worker if admitted": its pod sets come
    from its ClusterTrainingRuntime (``examples/jobs/trainjob-h100.yaml``, or its twin for
    the bed's Trainer 2.1: 2 one-GPU H100 nodes); placed on an H100 worker, run there by the
    real trainer (as a JobSet), its flavors written in the shape of the worker's Trainer; the
    manager's TrainJob ends Complete with the worker's status."""
    bed = article_bed
    api = bed.manager_api
    tj = example(TRAINJOB_EXAMPLE)
    assert tj["spec"]["runtimeRef"]["name"] == await install_runtime(api)
    name = tj["metadata"]["name"]
    await start(bed)
    await api.create(TRAINJOB.resource, tj, NS)
    wl = await wait_for(lambda: workload_of(api, TRAINJOB, name), timeout=60, what="its Workload")
    assert wl is not None
    counts = {ps["name"]: ps["count"] for ps in wl["spec"]["podSets"]}
    assert counts == {"node": 2}, counts
    worker = await wait_for(
        lambda: placed_on(api, TRAINJOB, name), timeout=60, what="the TrainJob placed"
    )
    assert worker in H100_WORKERS
    wapi = bed.worker_apis[worker]

    async def resumed_with_flavors() -> Obj | None:
        remote = await wapi.get(TRAINJOB.resource, name, NS)
        return remote if remote["spec"].get("suspend") is False else None

    remote = await wait_for(resumed_with_flavors, timeout=60, what="resumed on the worker")
    assert remote is not None
    # Not MultiKueue's: the worker's trainer runs it (its webhook names itself).
    assert remote["spec"].get("managedBy") in (None, TRAINJOB.default_managed_by)
    assert TRAINJOB.placements_of(remote)["node"].node_selector == {"gpu.model": "h100"}
    done = await ended(api, TRAINJOB, name)
    assert done is True
    status = (await api.get(TRAINJOB.resource, name, NS))["status"]
    assert {s["name"] for s in status.get("jobsStatus") or []} == {"node"}, status


async def test_a_trainjob_waits_for_its_runtime_and_runs_once_it_exists(article_bed: Bed) -> None:
    """A TrainJob whose runtime does not exist on the manager has no pod sets: no Workload is
    made and nothing goes to any worker (the manager says why in its log) until the runtime
    is created; then it is queued and runs like any other."""
    bed = article_bed
    api = bed.manager_api
    await start(bed)
    path = binaries.operator_dir("trainer") / "runtimes" / "torch_distributed.yaml"
    (runtime,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
    runtime["metadata"] = {"name": f"late-{int(time.time())}"}
    tj = example(TRAINJOB_EXAMPLE)
    tj["metadata"]["name"] = "late"
    tj["spec"]["runtimeRef"]["name"] = runtime["metadata"]["name"]
    await api.create(TRAINJOB.resource, tj, NS)
    deadline = time.monotonic() + 3.0

    async def none_yet() -> bool:
        assert await workload_of(api, TRAINJOB, "late") is None, "a Workload without pod sets"
        return time.monotonic() >= deadline

    await wait_for(none_yet, timeout=10, what="no Workload while its runtime is missing")
    assert not await nothing_of(bed, TRAINJOB, "late")
    await api.create(CLUSTER_TRAINING_RUNTIMES, runtime)
    try:
        for wapi in bed.worker_apis.values():
            with contextlib.suppress(errors.AlreadyExists):
                await wapi.create(CLUSTER_TRAINING_RUNTIMES, copy.deepcopy(runtime))
        done = await ended(api, TRAINJOB, "late")
        assert done is True
    finally:
        for each in (api, *bed.worker_apis.values()):
            await each.delete(CLUSTER_TRAINING_RUNTIMES, runtime["metadata"]["name"])


def yaml_blocks(markdown: str) -> list[Obj]:
    """The YAML documents of a Markdown file's ```yaml blocks, in order."""
    found = []
    for block in markdown.split("```yaml")[1:]:
        found += [d for d in yaml.safe_load_all(block.split("```", 1)[0]) if d]
    return found


def as_submitted(manifest: Obj) -> Obj:
    """The manifest with the queue label added, in the bed's namespace (``kubectl -n``)."""
    submitted = copy.deepcopy(manifest)
    meta = submitted.setdefault("metadata", {})
    meta["namespace"] = NS
    meta.setdefault("labels", {})[C.QUEUE_NAME_LABEL] = "gpu-lq"
    return submitted


async def test_the_operators_own_examples_run_through_kfed_unchanged(article_bed: Bed) -> None:
    """Manifests the operators document, read from their Go modules at the pinned versions
    (never copied here), with only the queue label added: JobSet's driver-then-workers example
    (its StartupPolicy KEP) runs to Completed, KubeRay's sample RayCluster becomes ready. They
    ask for no GPU, so they go wherever cpu is free."""
    bed = article_bed
    api = bed.manager_api
    await start(bed)
    kep = operators.module_dir(operators.JOBSET) / "keps" / "104-StartupPolicy" / "README.md"
    js = as_submitted(yaml_blocks(kep.read_text())[0])
    sample = operators.module_dir(operators.KUBERAY) / "config" / "samples"
    (ray,) = [d for d in yaml.safe_load_all((sample / "ray-cluster.sample.yaml").read_text()) if d]
    ray = as_submitted(ray)
    await api.create(JOBSET.resource, js, NS)
    await api.create(RAYCLUSTER.resource, ray, NS)
    js_name, ray_name = js["metadata"]["name"], ray["metadata"]["name"]
    done = await ended(api, JOBSET, js_name)
    assert done is True

    async def ray_ready() -> bool:
        status = (await api.get(RAYCLUSTER.resource, ray_name, NS)).get("status") or {}
        return status.get("state") == "ready"

    await wait_for(ray_ready, timeout=120, what=f"RayCluster {ray_name} ready")
    assert await placed_on(api, RAYCLUSTER, ray_name) is not None
    await api.delete(RAYCLUSTER.resource, ray_name, NS)


async def test_the_job_examples_run_through_kfed_submit(article_bed: Bed) -> None:
    """``examples/jobs/`` as documented: ``kfed submit`` each (the TrainJob's stock runtime on
    the manager too); the JobSet and the TrainJob end successfully, the RayCluster becomes
    ready; each ran whole on one H100 worker."""
    bed = article_bed
    api = bed.manager_api
    await install_runtime(api)
    await start(bed)
    for file, kind in (
        ("jobset-h100.yaml", JOBSET),
        (TRAINJOB_EXAMPLE, TRAINJOB),
        ("raycluster-h100.yaml", RAYCLUSTER),
    ):
        name = example(file)["metadata"]["name"]
        code, out, err = await kfed(bed, "submit", str(JOBS / file), "--timeout", "90s")
        assert code == 0, (out, err)
        assert f"created {kind.resource.kind} {NS}/{name}" in out, out
        assert await placed_on(api, kind, name) in H100_WORKERS
        if kind is RAYCLUSTER:

            async def ready(n: str = name) -> bool:
                status = (await api.get(RAYCLUSTER.resource, n, NS)).get("status") or {}
                return status.get("state") == "ready"

            await wait_for(ready, timeout=120, what=f"RayCluster {name} ready")
            await api.delete(RAYCLUSTER.resource, name, NS)
            continue
        done = await ended(api, kind, name)
        assert done is True, f"{name} failed"
