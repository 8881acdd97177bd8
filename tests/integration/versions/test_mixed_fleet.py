"""A fleet of two Kubernetes minors (issue #45 items 2 and 4): the manager and worker-2 on the
newest set of versions.env (Kubernetes 1.37, JobSet 0.12, Trainer 2.3, KubeRay 1.6.2: the
manager has their CRDs, worker-2 runs them), worker-1 and worker-3 on the pinned one (1.34,
JobSet 0.10, Trainer 2.1, KubeRay 1.5.1); worker-1 has RTX A1000 nodes, worker-2 and
worker-3 H100s. Each kind runs to Complete (a RayCluster: ready) on the manager from a worker
of either version, its status copied back without a validation error on either side; a
TrainJob's flavors go into kfed's own podTemplateOverrides on a worker of Trainer 2.1 and into
a runtime patch of its own on one of Trainer 2.3, which eviction removes (the user's kept). A
Job fails over from one version to the other, never running twice.

The newest set is built on demand (``make binaries-newest``): where it is not built these
tests skip and say so."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import yaml

from e2e import binaries
from e2e.local.federation import LocalFederation
from e2e.local.proxy import CuttableProxy
from e2e.waiting import wait_for
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.jobkinds.jobset import JOBSET
from manager.controllers.jobkinds.raycluster import RAYCLUSTER
from manager.controllers.jobkinds.trainjob import (
    CLUSTER_TRAINING_RUNTIMES,
    TRAINJOB,
    served_shape,
)
from manager.controllers.jobkinds.trainjob_overrides import (
    ADMISSION_MANAGER,
    OVERRIDES,
    PATCHES,
    Shape,
)
from manager.federation.decisions import checkstatus
from manager.federation.settings import ALLOWED_CLUSTERS_ANNOTATION
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.conftest import _state_root
from tests.integration.controllers.builders import jobset, raycluster
from tests.integration.federation import article
from tests.integration.federation.bed import CHECK, Bed, federation_of_its_own
from tests.integration.federation.runs import RunWatch
from tests.integration.federation.test_job_kinds import example

pytestmark = [
    pytest.mark.full,
    pytest.mark.skipif(
        not (binaries.built("newest") and binaries.built("pinned")),
        reason=f"the {binaries.other_set()} set of versions.env is not built "
        f"(make binaries-{binaries.other_set()})",
    ),
]
NS = article.NS
Obj = dict[str, Any]
PINNED = binaries.read_versions(versions="pinned").kubernetes
NEWEST = binaries.read_versions(versions="newest").kubernetes
VERSION_OF = {"manager": NEWEST, "worker-1": PINNED, "worker-2": NEWEST, "worker-3": PINNED}
MODEL_OF = {"worker-1": "rtx-a1000", "worker-2": "h100"}
"""The worker each kind's two jobs are sent to (an RTX job can only go to worker-1; an H100
job is allowed only on worker-2 by its allowed-clusters annotation): one of each version."""
H100_WORKERS = ("worker-2", "worker-3")
SHAPE_OF: dict[str, Shape] = {
    "manager": PATCHES,
    "worker-1": OVERRIDES,
    "worker-2": PATCHES,
    "worker-3": OVERRIDES,
}
"""Where each cluster's TrainJobs take placements: its set's Trainer (2.3: runtimePatches,
2.1: podTemplateOverrides)."""
USERS_PATCH = "example.com/ml-team"
"""The ``manager`` of the user's own runtime patch."""
RUNTIME_FILE = "torch_distributed.yaml"


@pytest.fixture(scope="module")
def mixed(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[LocalFederation, dict[str, CuttableProxy]]]:
    fed = LocalFederation(
        "mixed",
        workers=3,
        full=True,
        root=_state_root(tmp_path_factory),
        tie_to_parent=True,
        # Each cluster's operators (the manager's CRDs) come from its own set.
        operators=("jobset", "trainer", "kuberay"),
        dra=False,
        versions="newest",
        cluster_versions={"worker-1": "pinned", "worker-3": "pinned"},
    )
    with federation_of_its_own(fed) as running:
        yield running


@pytest.fixture
async def bed(mixed: tuple[LocalFederation, dict[str, CuttableProxy]]) -> AsyncIterator[Bed]:
    fed, proxies = mixed
    manager_api = await KubeApi.from_kubeconfig_file(fed.kubeconfig("manager"), name="manager")
    worker_apis = {
        w.name: await KubeApi.from_kubeconfig_file(w.kubeconfig, name=w.name) for w in fed.workers
    }
    bed = Bed(fed, proxies, manager_api, worker_apis)
    await article.set_up(fed, manager_api, worker_apis, only=tuple(worker_apis))
    try:
        yield bed
    finally:
        await bed.stop_all()
        for proxy in proxies.values():
            proxy.heal()
        await article.tear_down(manager_api, worker_apis)
        await manager_api.close()
        for api in worker_apis.values():
            await api.close()


def job_of(kind: JobKind, name: str, model: str, delay_ms: int) -> Obj:
    """A job of ``kind`` that runs only on nodes of GPU ``model``, its pods ``delay_ms`` long."""
    if kind is BATCH_JOB:
        seed = "03-heavy-job.yaml" if model == "h100" else "02-light-job.yaml"
        body = article.seed_job(seed, delay_ms=delay_ms)
        body["metadata"]["name"] = name
        for part in ("requests", "limits"):
            body["spec"]["template"]["spec"]["containers"][0]["resources"][part].update(
                {"cpu": "1", "memory": "1Gi"}
            )
        return body
    if kind is JOBSET:
        return jobset(NS, name, "gpu-lq", workers=2, model=model, delay_ms=delay_ms)
    body = copy.deepcopy(example("trainjob-h100.yaml"))
    body["metadata"]["name"] = name
    body["spec"]["trainer"]["numNodes"] = 1
    body["spec"]["trainer"]["resourcesPerNode"]["requests"].update({"cpu": "1", "memory": "1Gi"})
    # The manager's TrainJob CRD is Trainer 2.3's: the example's runtime patch, its model this
    # job's (a worker of Trainer 2.1 drops it; kfed's flavors place the pods).
    template = {
        "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": str(delay_ms)}},
        "spec": {"nodeSelector": {"gpu.model": model}},
    }
    replicated = {"name": "node", "template": {"spec": {"template": template}}}
    body["spec"]["runtimePatches"] = [
        {
            "manager": USERS_PATCH,
            "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [replicated]}}},
        }
    ]
    return body


async def install_manager_runtime(api: KubeApi) -> None:
    """The trainer's stock torch-distributed ClusterTrainingRuntime on the manager, of the
    manager's Trainer (the bed installs each worker's own)."""
    path = binaries.operator_dir("trainer", versions="newest") / "runtimes" / RUNTIME_FILE
    (runtime,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert (
        runtime["metadata"]["name"] == example("trainjob-h100.yaml")["spec"]["runtimeRef"]["name"]
    )
    with contextlib.suppress(errors.AlreadyExists):
        await api.create(CLUSTER_TRAINING_RUNTIMES, runtime)


async def kfeds_placement(api: KubeApi, name: str, shape: Shape) -> Obj | None:
    """The TrainJob ``name`` of this cluster once it is resumed with kfed's own entry in
    ``shape`` (None before)."""
    try:
        job = await api.get(TRAINJOB.resource, name, NS)
    except errors.NotFound:
        return None
    spec = job["spec"]
    if shape == PATCHES:
        written = any(p.get("manager") == ADMISSION_MANAGER for p in spec.get(PATCHES) or [])
    else:
        written = bool(spec.get(OVERRIDES))
    return job if written and spec.get("suspend") is False else None


async def check_trainjob_shapes(bed: Bed, names: dict[str, str]) -> None:
    """While they run: the manager's TrainJob and each worker's copy carry kfed's placement
    in the shape of that cluster's Trainer, and nothing in the other; the user's patch is
    kept where the CRD has runtimePatches, kfed's last."""
    for worker, name in names.items():
        for cluster in ("manager", worker):
            api = bed.manager_api if cluster == "manager" else bed.worker_apis[worker]
            shape = SHAPE_OF[cluster]
            job = await wait_for(
                lambda a=api, n=name, s=shape: kfeds_placement(a, n, s),  # type: ignore[misc]
                timeout=60,
                what=f"{name} resumed on {cluster} with kfed's {shape}",
            )
            assert job is not None
            spec = job["spec"]
            other = OVERRIDES if shape == PATCHES else PATCHES
            assert other not in spec, (cluster, spec)
            placed = TRAINJOB.placements_of(job)["node"]
            assert placed.node_selector.get("gpu.model") == MODEL_OF[worker], (cluster, spec)
            if shape == PATCHES:
                managers = [p["manager"] for p in spec[PATCHES]]
                assert managers == [USERS_PATCH, ADMISSION_MANAGER], (cluster, managers)


async def placed_on(api: KubeApi, kind: JobKind, name: str) -> str | None:
    try:
        job = await api.get(kind.resource, name, NS)
        wl = await api.get(R.WORKLOADS, kind.workload_name(name, job["metadata"]["uid"]), NS)
    except errors.NotFound:
        return None
    if checkstatus.check_state(wl, CHECK)[0] != "Ready":
        return None
    return str(ws.status_of(wl).get("clusterName") or "") or None


async def outcome(api: KubeApi, kind: JobKind, name: str) -> bool | None:
    found = kind.outcome(await api.get(kind.resource, name, NS))
    return found.succeeded if found is not None else None


async def test_the_fleet_runs_two_kubernetes_minors(bed: Bed) -> None:
    """Each cluster's /version is its set's Kubernetes; every worker runs the operators."""
    for cluster, wanted in VERSION_OF.items():
        api = bed.manager_api if cluster == "manager" else bed.worker_apis[cluster]
        got = await api.request("GET", "/version")
        assert got["gitVersion"] == f"v{wanted}", (cluster, got)
    for worker in bed.worker_apis:
        running = bed.fed.cluster(worker).processes
        assert {"jobset", "trainer", "kuberay"} <= set(running), worker
    for cluster, shape in SHAPE_OF.items():
        api = bed.manager_api if cluster == "manager" else bed.worker_apis[cluster]
        assert await served_shape(api) == shape, cluster


@pytest.mark.parametrize("kind", [BATCH_JOB, JOBSET, TRAINJOB], ids=lambda k: k.resource.kind)
async def test_each_kind_completes_on_the_manager_from_a_worker_of_either_version(
    bed: Bed, kind: JobKind
) -> None:
    """One job per worker (its GPU model decides which), both at once: each is placed on its
    worker, runs there, and the manager's object (on 1.37) ends Complete with the worker's
    status, whichever Kubernetes ran it; no status write was refused on either side (a
    refused write would leave the manager's object without its outcome)."""
    api = bed.manager_api
    if kind is TRAINJOB:
        await install_manager_runtime(api)
    await bed.start_federation()
    names = {worker: f"{kind.workload_prefix}-on-{worker}" for worker in MODEL_OF}
    # A TrainJob's pods run longer: its copies are looked at while they run.
    delay_ms = 15_000 if kind is TRAINJOB else 3000
    for worker, name in names.items():
        body = job_of(kind, name, MODEL_OF[worker], delay_ms)
        body["metadata"].setdefault("annotations", {})[ALLOWED_CLUSTERS_ANNOTATION] = worker
        await api.create(kind.resource, body, NS)
    for worker, name in names.items():
        where = await wait_for(
            lambda n=name: placed_on(api, kind, n),  # type: ignore[misc]
            timeout=90,
            what=f"{name} placed",
        )
        assert where == worker, f"{name} is allowed only on {worker}"
    if kind is TRAINJOB:
        await check_trainjob_shapes(bed, names)
    for name in names.values():
        done = await wait_for(
            lambda n=name: outcome(api, kind, n),  # type: ignore[misc]
            timeout=180,
            what=f"{name} ended on the manager",
        )
        assert done is True, name
        status = (await api.get(kind.resource, name, NS))["status"]
        if kind is BATCH_JOB:
            assert status.get("succeeded") == 1 and status.get("completionTime"), status
        elif kind is JOBSET:
            assert status.get("terminalState") == "Completed", status
        else:
            assert {s["name"] for s in status.get("jobsStatus") or []} == {"node"}, status


async def test_a_job_fails_over_from_one_kubernetes_version_to_the_other_once(bed: Bed) -> None:
    """An H100 job runs on one H100 worker; that worker is cut off: the job runs to Complete
    on the other, of the other Kubernetes version, never on both at once."""
    api = bed.manager_api
    await bed.start_federation()
    async with RunWatch(bed.worker_apis, NS) as runs:
        await api.create(R.JOBS, job_of(BATCH_JOB, "probe", "h100", 20_000), NS)
        first = await wait_for(
            lambda: placed_on(api, BATCH_JOB, "probe"), timeout=90, what="probe placed"
        )
        assert first in H100_WORKERS

        async def running_on_first() -> bool:
            return first in runs.clusters_of("probe")

        await wait_for(running_on_first, timeout=90, what=f"probe running on {first}")
        other = next(w for w in H100_WORKERS if w != first)
        bed.proxies[first].cut()
        try:

            async def moved() -> bool:
                return other in runs.clusters_of("probe")

            await wait_for(moved, timeout=120, what=f"probe running on {other}")
        finally:
            bed.proxies[first].heal()
        done = await wait_for(
            lambda: outcome(api, BATCH_JOB, "probe"), timeout=180, what="probe ended"
        )
        assert done is True
    assert not runs.double_runs(), "probe ran on two workers at once"
    assert runs.clusters_of("probe") == {first, other}
    assert {VERSION_OF[first], VERSION_OF[other]} == {PINNED, NEWEST}


async def test_a_trainjob_evicted_under_trainer_2_3_loses_kfeds_runtime_patch_only(
    bed: Bed,
) -> None:
    """On worker-2 (Trainer 2.3) alone: a TrainJob queued there runs with kfed's runtime
    patch; its Workload deactivated while its pods run, it is suspended and, once its pods
    are gone, kfed's patch is removed (the trainer's webhook allows that only then) and the
    user's kept; activated again, it runs to Complete."""
    worker = "worker-2"
    wapi = bed.worker_apis[worker]
    await bed.start_shim(worker)
    name = "evicted-trainjob"
    await wapi.create(TRAINJOB.resource, job_of(TRAINJOB, name, "h100", 20_000), NS)
    await wait_for(lambda: kfeds_placement(wapi, name, PATCHES), timeout=60, what=f"{name} resumed")

    async def pods_running() -> Obj | None:
        job = await wapi.get(TRAINJOB.resource, name, NS)
        return job if TRAINJOB.is_active(job) else None

    job = await wait_for(pods_running, timeout=60, what=f"{name}'s pods running")
    assert job is not None
    wl_name = TRAINJOB.workload_name(name, job["metadata"]["uid"])
    await wapi.patch(R.WORKLOADS, wl_name, {"spec": {"active": False}}, NS)

    async def restored() -> list[str] | None:
        spec = (await wapi.get(TRAINJOB.resource, name, NS))["spec"]
        managers = [p["manager"] for p in spec.get(PATCHES) or []]
        return managers if spec.get("suspend") is True and managers == [USERS_PATCH] else None

    await wait_for(restored, timeout=90, what=f"{name} suspended, kfed's patch removed")
    await wapi.patch(R.WORKLOADS, wl_name, {"spec": {"active": True}}, NS)
    await wait_for(
        lambda: kfeds_placement(wapi, name, PATCHES), timeout=60, what=f"{name} resumed again"
    )
    done = await wait_for(lambda: outcome(wapi, TRAINJOB, name), timeout=180, what=f"{name} ended")
    assert done is True


async def test_a_raycluster_is_ready_on_the_manager_from_a_worker_of_either_kuberay(
    bed: Bed,
) -> None:
    """Item 4's KubeRay: one RayCluster per worker (KubeRay 1.5.1 on worker-1, 1.6.2 on
    worker-2), each ready there under its operator and ready on the manager (whose CRD is
    1.6.2's); deleted on the manager, each is deleted on its worker."""
    api = bed.manager_api
    await bed.start_federation()
    names = {worker: f"ray-on-{worker}" for worker in MODEL_OF}
    for worker, name in names.items():
        body = raycluster(NS, name, "gpu-lq", gpu_workers=1, model=MODEL_OF[worker])
        body["metadata"]["annotations"] = {ALLOWED_CLUSTERS_ANNOTATION: worker}
        await api.create(RAYCLUSTER.resource, body, NS)

    async def ready(cluster_api: KubeApi, name: str) -> bool:
        try:
            found = await cluster_api.get(RAYCLUSTER.resource, name, NS)
        except errors.NotFound:
            return False
        return (found.get("status") or {}).get("state") == "ready"

    for worker, name in names.items():
        where = await wait_for(
            lambda n=name: placed_on(api, RAYCLUSTER, n),  # type: ignore[misc]
            timeout=90,
            what=f"{name} placed",
        )
        assert where == worker, f"{name} is allowed only on {worker}"
        await wait_for(
            lambda n=name: ready(api, n),  # type: ignore[misc]
            timeout=120,
            what=f"{name} ready on the manager",
        )
        assert await ready(bed.worker_apis[worker], name)
    for worker, name in names.items():
        await api.delete(RAYCLUSTER.resource, name, NS)

        async def gone(w: str = worker, n: str = name) -> bool:
            try:
                await bed.worker_apis[w].get(RAYCLUSTER.resource, n, NS)
            except errors.NotFound:
                return True
            return False

        await wait_for(gone, timeout=60, what=f"{name} gone from {worker}")
