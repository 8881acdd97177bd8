"""An in-process single-cluster controller (what ``python -m worker_shim`` runs) against the
shared full cluster, started (and restarted) per test, always stopped at the end."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from e2e.local.cluster import LocalCluster
from manager.controllers.runtime import ClusterController
from manager.controllers.settings import ControllerSettings
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.controllers import builders as b


@dataclass
class RunningController:
    controller: ClusterController
    task: asyncio.Task[None]

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


StartController = Callable[[], Awaitable[RunningController]]


@pytest.fixture
async def api(single_cluster: LocalCluster) -> AsyncIterator[KubeApi]:
    async with await KubeApi.from_kubeconfig_file(
        single_cluster.kubeconfig, name="single"
    ) as client:
        yield client


@pytest.fixture
async def start_controller(api: KubeApi) -> AsyncIterator[StartController]:
    running: list[RunningController] = []

    async def start() -> RunningController:
        controller = ClusterController(api, ControllerSettings(status_period=0.3))
        handle = RunningController(controller, asyncio.create_task(controller.run()))
        running.append(handle)
        await asyncio.wait_for(controller.synced.wait(), timeout=30)
        return handle

    yield start
    for handle in running:
        await handle.stop()


@pytest.fixture
async def ns(api: KubeApi, unique: str) -> AsyncIterator[str]:
    """A namespace of the test's own on the shared cluster."""
    name = f"sc-{unique}"
    await api.create(R.NAMESPACES, {"metadata": {"name": name}})
    yield name
    await api.delete(R.NAMESPACES, name)


async def create_cluster_scoped(
    api: KubeApi, res: R.Resource, body: dict[str, Any], cleanup: list[tuple[R.Resource, str]]
) -> None:
    await api.create(res, body)
    cleanup.append((res, body["metadata"]["name"]))


@pytest.fixture
async def cluster_objects(api: KubeApi) -> AsyncIterator[list[tuple[R.Resource, str]]]:
    """Cluster-scoped objects the test created (flavors, ClusterQueues), deleted at the end."""
    created: list[tuple[R.Resource, str]] = []
    yield created
    for res, name in reversed(created):
        await api.delete(res, name)


async def h100_queue(
    api: KubeApi, ns: str, cluster_queue: str, *, gpus: int, cleanup: list[tuple[R.Resource, str]]
) -> str:
    """An H100 flavor of the test's own, ``cluster_queue`` with ``gpus`` of it, and the
    LocalQueue ``q`` in ``ns`` pointing there; returns ``q``."""
    flavor = f"h100-{cluster_queue}"
    await create_cluster_scoped(api, R.RESOURCE_FLAVORS, b.flavor(flavor, "h100"), cleanup)
    await create_cluster_scoped(
        api, R.CLUSTER_QUEUES, b.cluster_queue(cluster_queue, flavor, gpus=gpus), cleanup
    )
    await api.create(R.LOCAL_QUEUES, b.local_queue(ns, "q", cluster_queue), ns)
    return "q"
