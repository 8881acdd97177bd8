"""A fleet of two Kubernetes minors (issue #45 item 2): the manager and worker-2 on the
newest set of versions.env (Kubernetes 1.37), worker-1 and worker-3 on the pinned one (1.34);
the pinned JobSet 0.10 and Trainer 2.1 on every worker; worker-1 has RTX A1000
nodes, worker-2 and worker-3 H100s. Each kind runs to Complete on the manager from a worker of
either version, its status copied back without a validation error on either side, and a Job
fails over from one version to the other, never running twice.

The newest set is built on demand (``make binaries-newest``): where it is not built these
tests skip and say so."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from e2e import binaries
from e2e.local.crds import install_crds
from e2e.local.federation import LocalFederation
from e2e.local.proxy import CuttableProxy
from e2e.waiting import wait_for
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.jobkinds.jobset import JOBSET
from manager.controllers.jobkinds.trainjob import TRAINJOB
from manager.federation.decisions import checkstatus
from manager.federation.settings import ALLOWED_CLUSTERS_ANNOTATION
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.conftest import _start, _state_root
from tests.integration.controllers.builders import jobset
from tests.integration.federation import article
from tests.integration.federation.bed import CHECK, Bed, register_workers
from tests.integration.federation.runs import RunWatch
from tests.integration.federation.test_job_kinds import example, install_runtime

pytestmark = [
    pytest.mark.full,
    pytest.mark.skipif(
        not binaries.built("newest"),
        reason="the newest set of versions.env is not built (make binaries-newest)",
    ),
]
NS = article.NS
Obj = dict[str, Any]
PINNED = binaries.read_versions().kubernetes
NEWEST = binaries.read_versions(versions="newest").kubernetes
VERSION_OF = {"manager": NEWEST, "worker-1": PINNED, "worker-2": NEWEST, "worker-3": PINNED}
MODEL_OF = {"worker-1": "rtx-a1000", "worker-2": "h100"}
"""The worker each kind's two jobs are sent to (an RTX job can only go to worker-1; an H100
job is allowed only on worker-2 by its allowed-clusters annotation): one of each version."""
H100_WORKERS = ("worker-2", "worker-3")


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
        operators=("jobset", "trainer"),
        # Trainer 2.3 (the newest set's) replaced podTemplateOverrides by runtimePatches, which
        # kfed's TrainJob adapter does not write yet (#45 item 4): the pinned operators
        # everywhere, which run on 1.37 as they do on 1.34.
        operator_versions="pinned",
        dra=False,
        versions="newest",
        cluster_versions={"worker-1": "pinned", "worker-3": "pinned"},
    )
    _start(fed)
    try:
        for cluster in fed:
            install_crds(cluster)
        proxies = {w.name: CuttableProxy(w.ports.apiserver).start() for w in fed.workers}

        async def register() -> None:
            async with await KubeApi.from_kubeconfig_file(fed.kubeconfig("manager")) as api:
                await register_workers(api, fed, proxies)

        asyncio.run(register())
        yield fed, proxies
    finally:
        for proxy in locals().get("proxies", {}).values():
            proxy.stop()
        fed.down()


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
    override = body["spec"]["podTemplateOverrides"][0]
    override["spec"]["nodeSelector"] = {"gpu.model": model}
    override["metadata"] = {
        "annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": str(delay_ms)}
    }
    return body


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
        assert {"jobset", "trainer"} <= set(running), worker


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
        await install_runtime(api)
    await bed.start_federation()
    names = {worker: f"{kind.workload_prefix}-on-{worker}" for worker in MODEL_OF}
    for worker, name in names.items():
        body = job_of(kind, name, MODEL_OF[worker], 3000)
        body["metadata"].setdefault("annotations", {})[ALLOWED_CLUSTERS_ANNOTATION] = worker
        await api.create(kind.resource, body, NS)
    for worker, name in names.items():
        where = await wait_for(
            lambda n=name: placed_on(api, kind, n),  # type: ignore[misc]
            timeout=90,
            what=f"{name} placed",
        )
        assert where == worker, f"{name} is allowed only on {worker}"
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
