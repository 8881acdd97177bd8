"""The observability server's routes (aiohttp's test client, no cluster), and readiness of a
manager replica: leader, standby, starting."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import AsyncIterator
from typing import cast

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from e2e.waiting import wait_for
from manager.controllers.state import ClusterState
from manager.federation.runtime import FederationController
from manager.kube.api import KubeApi
from manager.kube.leader import LeaderElectionConfig, LeaderElector
from manager.kube.lease import LeaseRecord
from manager.observability.history import History, Sample
from manager.observability.server import ListenError, ObservabilityServer, create_app
from manager.observability.sources import ManagerSource
from manager.observability.state import Snapshot
from manager.observability.workloadpage import WorkloadDetails
from manager.observability.workloadrows import WorkloadList, workload_row
from manager.telemetry.metrics import Metrics

Client = TestClient[web.Request, web.Application]


class Source:
    """A process as the server sees it, set by hand."""

    def __init__(self) -> None:
        self.metrics = Metrics()
        self.ready = False
        self.refreshed = 0
        self.history = History(window=60, interval=0.05)
        self.sampled = 0

    def record_history(self, now: float | None = None) -> None:
        self.sampled += 1
        self.history.add(Sample(at=now or time.time(), pending={"gpu-cq": self.sampled}))

    async def workload_details(self, namespace: str, name: str) -> WorkloadDetails | None:
        return None

    def readiness(self) -> tuple[bool, str]:
        return self.ready, "informers synced" if self.ready else "informers are syncing"

    def cluster_state(self) -> tuple[ClusterState | None, str]:
        return None, "a unit test has no queues"

    def refresh_metrics(self) -> None:
        self.refreshed += 1
        self.metrics.set_leader("replica-a", True)

    def snapshot(self) -> Snapshot:
        wl = {
            "metadata": {"name": "light", "namespace": "ml-jobs", "creationTimestamp": ""},
            "spec": {"queueName": "gpu-lq"},
        }
        return Snapshot(
            role="manager",
            identity="replica-a",
            ready=self.ready,
            ready_reason="",
            is_leader=True,
            leader="replica-a",
            workloads=WorkloadList([workload_row(wl)], 1, {"Pending": 1}),
        )


@pytest.fixture
async def source_and_client() -> AsyncIterator[tuple[Source, Client]]:
    source = Source()
    async with TestClient(TestServer(create_app(source))) as client:
        yield source, client


async def test_health_and_readiness(source_and_client: tuple[Source, Client]) -> None:
    source, client = source_and_client
    assert (await client.get("/healthz")).status == 200
    response = await client.get("/readyz")
    assert (response.status, await response.text()) == (503, "not ready: informers are syncing\n")
    source.ready = True
    response = await client.get("/readyz")
    assert (response.status, await response.text()) == (200, "ok: informers synced\n")


async def test_metrics_are_refreshed_then_served(
    source_and_client: tuple[Source, Client],
) -> None:
    source, client = source_and_client
    response = await client.get("/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=")
    assert 'kfed_leader{identity="replica-a"} 1.0' in await response.text()
    assert source.refreshed == 1


async def test_the_dashboard_is_one_self_contained_page(
    source_and_client: tuple[Source, Client],
) -> None:
    _, client = source_and_client
    response = await client.get("/dashboard", allow_redirects=False)
    assert (response.status, response.headers["Location"]) == (302, "/dashboard/")
    page = await (await client.get("/dashboard/")).text()
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"(src|href)=\"(https?:)?//", page), "nothing loaded from elsewhere"
    assert "<script src" not in page and "<link" not in page
    assert "innerHTML" not in page, "server text goes in as text, never as markup"
    state = await (await client.get("/dashboard/state.json")).json()
    assert state["workloads"][0]["name"] == "light"
    assert state["identity"] == "replica-a"


async def test_port_zero_binds_a_free_port_and_a_taken_port_is_a_clear_error() -> None:
    async with ObservabilityServer(Source(), "127.0.0.1", 0) as server:
        assert server.port > 0
        with pytest.raises(ListenError, match=rf"cannot listen on 127.0.0.1:{server.port}"):
            await ObservabilityServer(Source(), "127.0.0.1", server.port).start()
        with socket.create_connection(("127.0.0.1", server.port)):
            pass


def elector() -> LeaderElector:
    config = LeaderElectionConfig(namespace="kueue-system", name="leader", identity="replica-a")
    return LeaderElector(cast(KubeApi, None), config)


def test_a_standby_is_ready_once_it_knows_who_leads() -> None:
    e = elector()
    source = ManagerSource(Metrics(), identity="replica-a", elector=e)
    assert source.readiness() == (False, "leader election has not read its Lease yet")
    e.known.set()
    assert source.readiness() == (False, "no replica leads yet")
    e.observer.observe(LeaseRecord("replica-b", 8, "", "", 0))
    assert source.readiness() == (True, "standby: replica-b leads")
    snapshot = source.snapshot()
    assert (snapshot.is_leader, snapshot.leader, snapshot.clusters) == (False, "replica-b", [])
    source.refresh_metrics()
    assert source.metrics.registry.get_sample_value("kfed_leader", {"identity": "replica-a"}) == 0


def test_the_leader_is_ready_once_its_informers_synced() -> None:
    e = elector()
    e.known.set()
    e.is_leader = True
    source = ManagerSource(Metrics(), identity="replica-a", elector=e)
    assert source.readiness() == (False, "the federation is starting")
    source.federation = FederationController(cast(KubeApi, None), metrics=source.metrics)
    assert source.readiness() == (False, "informers are syncing")
    source.federation.ready.set()
    assert source.readiness() == (True, "leading: informers synced")
    assert source.snapshot().queues == []


async def test_charts_are_svg_drawn_from_samples_taken_while_serving() -> None:
    source = Source()
    async with (
        ObservabilityServer(source, "127.0.0.1", 0) as server,
        aiohttp.ClientSession() as http,
    ):

        async def sampled() -> bool:
            return source.sampled >= 3

        await wait_for(sampled, timeout=10, what="three samples")
        async with http.get(f"{server.url}/dashboard/charts/pending.svg") as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("image/svg+xml")
            svg = await response.text()
        assert "<polyline" in svg and "gpu-cq" in svg
        async with http.get(f"{server.url}/dashboard/charts/nope.svg") as response:
            assert response.status == 404
            assert "charts: pending, admitted" in await response.text()
        async with http.get(f"{server.url}/dashboard/history.json") as response:
            history = await response.json()
        assert len(history["charts"]["pending"]["series"]["gpu-cq"]) >= 3
    assert server._sampler is None  # stopped with the server


async def test_a_workload_page_needs_the_queues(source_and_client: tuple[Source, Client]) -> None:
    _, client = source_and_client
    response = await client.get("/workloads/ml-jobs/job-light")
    assert response.status == 503
    assert "a unit test has no queues" in await response.text()
