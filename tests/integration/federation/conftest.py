"""Fixtures for federation tests: the full local clusters with kfed's CRDs, proxies between
manager and workers, the workers registered once per session, and a per-test ``bed`` whose
controllers are stopped and whose test objects are removed afterwards."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from e2e.local.crds import install_crds
from e2e.local.federation import LocalFederation
from e2e.local.proxy import CuttableProxy
from manager.kube.api import KubeApi
from tests.integration.federation import article
from tests.integration.federation.bed import Bed, register_workers


@pytest.fixture(scope="session")
def federation_clusters(
    full_federation: LocalFederation,
) -> Iterator[tuple[LocalFederation, dict[str, CuttableProxy]]]:
    for cluster in full_federation:
        install_crds(cluster)
    proxies = {w.name: CuttableProxy(w.ports.apiserver).start() for w in full_federation.workers}

    async def register() -> None:
        async with await KubeApi.from_kubeconfig_file(full_federation.kubeconfig("manager")) as api:
            await register_workers(api, full_federation, proxies)

    asyncio.run(register())
    try:
        yield full_federation, proxies
    finally:
        for proxy in proxies.values():
            proxy.stop()


@pytest.fixture
async def bed(
    federation_clusters: tuple[LocalFederation, dict[str, CuttableProxy]],
) -> AsyncIterator[Bed]:
    fed, proxies = federation_clusters
    for proxy in proxies.values():
        proxy.heal()
    manager_api = await KubeApi.from_kubeconfig_file(fed.kubeconfig("manager"), name="manager")
    worker_apis = {
        w.name: await KubeApi.from_kubeconfig_file(w.kubeconfig, name=w.name) for w in fed.workers
    }
    bed = Bed(fed, proxies, manager_api, worker_apis)
    try:
        yield bed
    finally:
        await bed.stop_all()
        for proxy in proxies.values():
            proxy.heal()
        await manager_api.close()
        for api in worker_apis.values():
            await api.close()


@pytest.fixture
async def article_bed(bed: Bed) -> AsyncIterator[Bed]:
    """The bed with the article's queues on the manager and on all three workers."""
    await article.set_up(
        bed.fed, bed.manager_api, bed.worker_apis, only=("worker-1", "worker-2", "worker-3")
    )
    yield bed
    await bed.stop_all()
    await article.tear_down(bed.manager_api, bed.worker_apis)
