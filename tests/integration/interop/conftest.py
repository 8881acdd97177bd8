"""The interop bed: kfed and upstream Kueue (``cmd/kueue`` at each version of versions.env
that is built: KUEUE_VERSION by ``make binaries``, NEWEST_KUEUE_VERSION by ``make
binaries-newest``; from its Go module by ``e2e/binaries/build-kueue.sh``) federating with each
other on real control planes. Four full clusters, for this package only:

    manager    kfed's CRDs; kfed's manager (in-process, started per test)
    worker-1   upstream's CRDs and upstream Kueue: a worker of kfed's manager
    worker-2   upstream's CRDs and upstream Kueue as a MultiKueue manager
    worker-3   kfed's CRDs and kfed's shim (in-process, per test): a worker of both managers

Every cluster has the article's queues (``examples/article/01-queues.yaml``, unchanged); both
managers' gpu-cq goes through their MultiKueue check (``examples/registration``). The two
managers use distinct origins, as managers that share a worker must.

Skipped, with the reason, when upstream Kueue is not built (``make test`` builds it) or
cannot run here (it needs root for its metrics certificate path).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from e2e import binaries
from e2e.examples import CLUSTERQUEUE_PATCH, QUEUES
from e2e.local import upstream_kueue
from e2e.local.crds import install_crds
from e2e.local.federation import LocalFederation
from e2e.local.proxy import CuttableProxy
from manager.api import constants as C
from manager.cli.workerobjects import multikueue_cluster
from manager.kube.api import KubeApi
from tests.integration.federation.bed import CHECK, Bed, register_workers

KFED_MANAGER = "manager"
KUEUE_WORKER = "worker-1"
KUEUE_MANAGER = "worker-2"
KFED_WORKER = "worker-3"
KUEUE_ORIGIN = "upstream-kueue"
"""Upstream manager's origin label value; kfed's manager keeps its default, ``multikueue``."""
KUEUE_MANAGER_CONFIG = "kfed-workers"
KFED_WORKER_ON_KUEUE = "kfed-worker"
"""The kfed worker's MultiKueueCluster (and Secret) name on upstream's manager."""
NODES = Path(__file__).resolve().parents[2] / "data" / "interop-nodes.yaml"

pytestmark = pytest.mark.full


@dataclass
class InteropClusters:
    fed: LocalFederation
    proxies: dict[str, CuttableProxy]
    """Between kfed's manager and each of its workers (worker-1, worker-3)."""
    kueue: dict[str, upstream_kueue.UpstreamKueue]
    version: str
    """Upstream Kueue's version on this bed."""


def _require_upstream_kueue() -> None:
    try:
        upstream_kueue.binary()
    except binaries.BinariesMissing as err:
        pytest.skip(f"interop with upstream Kueue: {err} (`make test` builds it)")


def _register_kfed_worker_on_kueue(fed: LocalFederation) -> None:
    """What a platform team writes on an upstream MultiKueue manager: the worker's kubeconfig
    Secret, its MultiKueueCluster, a MultiKueueConfig and the check, in upstream's API."""
    kubeconfig = base64.b64encode(fed.kubeconfig(KFED_WORKER).read_bytes()).decode()
    objects = [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": KFED_WORKER_ON_KUEUE, "namespace": upstream_kueue.NAMESPACE},
            "data": {"kubeconfig": kubeconfig},
        },
        multikueue_cluster(KFED_WORKER_ON_KUEUE, secret=KFED_WORKER_ON_KUEUE),
        {
            "apiVersion": C.API_VERSION,
            "kind": "MultiKueueConfig",
            "metadata": {"name": KUEUE_MANAGER_CONFIG},
            "spec": {"clusters": [KFED_WORKER_ON_KUEUE]},
        },
        {
            "apiVersion": C.API_VERSION,
            "kind": "AdmissionCheck",
            "metadata": {"name": CHECK},
            "spec": {
                "controllerName": C.MULTIKUEUE_CONTROLLER_NAME,
                "parameters": {
                    "apiGroup": C.GROUP,
                    "kind": "MultiKueueConfig",
                    "name": KUEUE_MANAGER_CONFIG,
                },
            },
        },
    ]
    fed.kubectl(
        KUEUE_MANAGER,
        "apply",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}),
    )


def _federate_gpu_cq(fed: LocalFederation, cluster: str) -> None:
    fed.kubectl(
        cluster, "patch", "clusterqueue", "gpu-cq", "--type=merge", "--patch-file",
        str(CLUSTERQUEUE_PATCH),
    )  # fmt: skip


@pytest.fixture(scope="package", params=binaries.kueue_versions(), ids=lambda v: f"kueue-v{v}")
def kueue_version(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each upstream Kueue of versions.env in turn (the pinned one, then the newest): the
    interop bed runs against one at a time. Upstream's binary, CRDs and manifests are looked
    up by ``$KUEUE_VERSION`` (as build-kueue.sh reads it), set here for the bed's lifetime."""
    version = str(request.param)
    before = os.environ.get("KUEUE_VERSION")
    os.environ["KUEUE_VERSION"] = version
    try:
        yield version
    finally:
        if before is None:
            os.environ.pop("KUEUE_VERSION", None)
        else:
            os.environ["KUEUE_VERSION"] = before


@pytest.fixture(scope="package")
def interop(
    kueue_version: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InteropClusters]:
    _require_upstream_kueue()
    fed = LocalFederation(
        "interop",
        workers=3,
        full=True,
        nodes_file=NODES,
        root=tmp_path_factory.mktemp(f"kfed-interop-{kueue_version}"),
        tie_to_parent=True,
    )
    fed.up()
    proxies: dict[str, CuttableProxy] = {}
    running: dict[str, upstream_kueue.UpstreamKueue] = {}
    try:
        for name in (KFED_MANAGER, KFED_WORKER):
            install_crds(fed.cluster(name))
        for name in (KUEUE_WORKER, KUEUE_MANAGER):
            upstream_kueue.install_crds(fed.cluster(name))
        try:
            running[KUEUE_WORKER] = upstream_kueue.start(fed.cluster(KUEUE_WORKER))
            running[KUEUE_MANAGER] = upstream_kueue.start(
                fed.cluster(KUEUE_MANAGER), origin=KUEUE_ORIGIN, gc_interval="5s"
            )
        except upstream_kueue.UpstreamKueueUnavailable as err:
            pytest.skip(f"interop with upstream Kueue: {err}")
        for kueue in running.values():
            kueue.wait_ready()
        for cluster in fed:
            fed.kubectl(cluster.name, "apply", "-f", str(QUEUES))
        proxies = {
            name: CuttableProxy(fed.cluster(name).ports.apiserver).start()
            for name in (KUEUE_WORKER, KFED_WORKER)
        }

        async def register() -> None:
            async with await KubeApi.from_kubeconfig_file(fed.kubeconfig(KFED_MANAGER)) as api:
                await register_workers(api, fed, proxies)

        asyncio.run(register())
        _register_kfed_worker_on_kueue(fed)
        for name in (KFED_MANAGER, KUEUE_MANAGER):
            _federate_gpu_cq(fed, name)
        yield InteropClusters(fed, proxies, running, kueue_version)
    finally:
        for proxy in proxies.values():
            proxy.stop()
        for kueue in running.values():
            kueue.stop()
        fed.down()


@pytest.fixture
async def bed(interop: InteropClusters) -> AsyncIterator[Bed]:
    """kfed's side of the interop bed: its manager's API and its two workers' (upstream
    Kueue's worker-1, kfed's worker-3), to start kfed's manager and shim in this test."""
    fed = interop.fed
    for proxy in interop.proxies.values():
        proxy.heal()
    manager_api = await KubeApi.from_kubeconfig_file(fed.kubeconfig(KFED_MANAGER), name="manager")
    worker_apis = {
        name: await KubeApi.from_kubeconfig_file(fed.kubeconfig(name), name=name)
        for name in interop.proxies
    }
    bed = Bed(fed, interop.proxies, manager_api, worker_apis)
    try:
        yield bed
    finally:
        await bed.stop_all()
        for proxy in interop.proxies.values():
            proxy.heal()
        await manager_api.close()
        for api in worker_apis.values():
            await api.close()


@pytest.fixture
async def kueue_manager(interop: InteropClusters) -> AsyncIterator[KubeApi]:
    """The API of the cluster where upstream Kueue is the MultiKueue manager."""
    fed = interop.fed
    api = await KubeApi.from_kubeconfig_file(fed.kubeconfig(KUEUE_MANAGER), name=KUEUE_MANAGER)
    try:
        yield api
    finally:
        await api.close()
