"""Observability on a live federation: /readyz before and after the informers synced, the
metrics a dispatched workload moves, and the dashboard as a person sees it, in headless
Chromium (Debian's ``chromium``; `make browser` installs it)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from e2e.waiting import wait_for
from manager.api import constants as C
from manager.federation.runtime import FederationController
from manager.kube import resources as R
from manager.observability.history import History
from manager.observability.server import ObservabilityServer
from manager.observability.sources import ManagerSource, ShimSource
from tests.integration.federation import article
from tests.integration.federation.bed import FAST_CONTROLLERS, Bed
from tests.integration.federation.test_dispatch import h100_job, placed

pytestmark = pytest.mark.full
NS = article.NS
IDENTITY = "test-manager"
CHROMIUM_HELP = (
    "Debian's chromium is needed for the dashboard test: "
    "`apt-get install -y --no-install-recommends chromium` (or `make browser`)"
)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def manager_controller(bed: Bed) -> FederationController:
    settings = dataclasses.replace(bed.settings, manager_identity=IDENTITY)
    return FederationController(bed.manager_api, settings, FAST_CONTROLLERS)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def get(http: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with http.get(url) as response:
        return response.status, await response.text()


async def scrape(http: aiohttp.ClientSession, server: ObservabilityServer) -> Samples:
    _, text = await get(http, f"{server.url}/metrics")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    """The sum of the series of ``name`` whose labels include ``labels`` (as PromQL's
    ``sum(name{labels})``: labels a query does not name, such as ``replica_role``, do not
    matter); None when there is none."""
    wanted = set(labels.items())
    found = [v for (n, have), v in samples.items() if n == name and wanted <= have]
    return sum(found) if found else None


async def submit(bed: Bed, manifest: str, *, name: str | None = None, **kw: Any) -> None:
    job = article.seed_job(manifest, **kw)
    if name is not None:
        job["metadata"]["name"] = name
    await bed.manager_api.create(R.JOBS, job, NS)


async def set_maintenance(bed: Bed, worker: str, mode: str | None) -> None:
    await bed.manager_api.patch(
        R.MULTIKUEUE_CLUSTERS,
        worker,
        {"metadata": {"annotations": {C.MAINTENANCE_ANNOTATION: mode}}},
    )


async def test_readiness_and_metrics_of_a_dispatched_workload(
    article_bed: Bed, http: aiohttp.ClientSession
) -> None:
    bed = article_bed
    for worker in ("worker-1", "worker-2", "worker-3"):
        await bed.start_shim(worker)
    controller = manager_controller(bed)
    source = ManagerSource(controller.metrics, identity=IDENTITY, federation=controller)
    shim_source = ShimSource(bed.shims["worker-1"], identity="worker-1")
    async with (
        ObservabilityServer(source, "127.0.0.1", 0) as server,
        ObservabilityServer(shim_source, "127.0.0.1", 0) as shim_server,
    ):
        status, text = await get(http, f"{server.url}/readyz")
        assert (status, text) == (503, "not ready: informers are syncing\n")
        await bed.start_manager(controller=controller)
        assert await get(http, f"{server.url}/readyz") == (200, "ok: leading: informers synced\n")
        assert (await get(http, f"{shim_server.url}/readyz"))[0] == 200
        assert (await get(http, f"{server.url}/healthz"))[0] == 200

        await submit(bed, "02-light-job.yaml", delay_ms=600_000)
        await wait_for(lambda: placed(bed.manager_api, "light-job"), timeout=60, what="placed")

        async def counted() -> Samples | None:
            samples = await scrape(http, server)
            done = value(samples, "kueue_admitted_workloads_total", cluster_queue="gpu-cq")
            return samples if done else None

        samples = await wait_for(counted, timeout=60, what="the manager counts the admission")
        assert samples is not None
        on = {"cluster_queue": "gpu-cq"}
        assert (
            value(samples, "multikueue_workloads_dispatched_total", cluster="worker-1", **on) == 1
        )
        assert (
            value(samples, "multikueue_workloads_dispatched_total", cluster="worker-2", **on)
            is None
        )
        assert value(samples, "multikueue_workloads_admitted_total", cluster="worker-1", **on) == 1
        assert value(samples, "kueue_quota_reserved_workloads_total", cluster_queue="gpu-cq") == 1
        assert value(samples, "kfed_dispatch_latency_seconds_count", cluster="worker-1") == 1
        assert value(samples, "kfed_remote_objects_created_total", cluster="worker-1", kind="Job")
        assert value(samples, "kfed_leader", identity=IDENTITY) == 1
        for worker in ("worker-1", "worker-2", "worker-3"):
            assert value(samples, "kfed_cluster_active", cluster=worker) == 1
            assert value(samples, "kfed_cluster_maintenance", cluster=worker, state="none") == 1
            # Upstream Kueue v0.20's name and labels: one series per status, 1 for the current.
            for active, expected in (("True", 1), ("False", 0), ("Unknown", 0)):
                assert (
                    value(samples, "multikueue_cluster_status", cluster=worker, active=active, **on)
                    == expected
                )
        gpu = {"resource": "nvidia.com/gpu"}
        assert value(
            samples, "kfed_cluster_free_capacity", cluster="worker-2", flavor="h100", **gpu
        )
        quota = {"cohort": "", "cluster_queue": "gpu-cq", "flavor": "rtx-a1000", **gpu}
        assert value(samples, "kueue_cluster_queue_nominal_quota", **quota) == 2
        assert value(samples, "kueue_cluster_queue_status", cluster_queue="gpu-cq", status="active")

        async def worker_1_free_gpus() -> float | None:
            free = value(
                await scrape(http, server),
                "kfed_cluster_free_capacity",
                cluster="worker-1",
                flavor="rtx-a1000",
                **gpu,
            )
            return free if free == 1 else None

        await wait_for(worker_1_free_gpus, timeout=60, what="worker-1 shows 1 of 2 GPUs free")

        shim = await scrape(http, shim_server)
        assert value(shim, "kueue_admitted_workloads_total", cluster_queue="gpu-cq") == 1
        assert value(shim, "kueue_reserving_active_workloads", cluster_queue="gpu-cq") == 1
        async with http.get(f"{shim_server.url}/dashboard/state.json") as response:
            state = await response.json()
        assert [(w["state"], w["reason"]) for w in state["workloads"]] == [
            ("Admitted", "admitted here; placed by the manager of origin multikueue")
        ]

        # Draining worker-1 moves the workload off it: a failover, reason drain.
        await set_maintenance(bed, "worker-1", "drain")
        try:

            async def drained() -> Samples | None:
                samples = await scrape(http, server)
                moved = value(
                    samples, "kfed_failovers_total", from_cluster="worker-1", reason="drain"
                )
                return samples if moved == 1 else None

            samples = await wait_for(drained, timeout=60, what="the drain counted as a failover")
            assert samples is not None
            on_1 = {"cluster": "worker-1"}
            assert value(samples, "kfed_cluster_maintenance", state="drain", **on_1) == 1
            assert value(samples, "kfed_cluster_maintenance", state="none", **on_1) == 0
        finally:
            await set_maintenance(bed, "worker-1", None)


def chromium() -> str:
    path = shutil.which("chromium") or (
        "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
    )
    if path is None:
        pytest.fail(CHROMIUM_HELP, pytrace=False)
    return path


async def browse(url: str, profile: Path, *args: str) -> str:
    """Headless Chromium on ``url`` for a few seconds of page time (its scripts run and fetch
    state.json from our server, on this event loop meanwhile); returns what it prints."""
    proc = await asyncio.create_subprocess_exec(
        chromium(),
        "--headless",
        "--no-sandbox",  # we run as root in CI
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=8000",
        *args,
        url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
    return out.decode()


def table_text(dom: str, table_id: str) -> str:
    match = re.search(rf'<table id="{table_id}">(.*?)</table>', dom, re.S)
    assert match, f"no table {table_id} in the page"
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", match.group(1)))


DOCS_IMG = Path(__file__).resolve().parents[3] / "docs" / "img"
WRITE_DOCS_IMG = "KFED_WRITE_DOCS_IMG"
"""Set to 1 to copy the screenshots into docs/img/ (how the docs' pictures are made)."""


async def screenshot(url: str, profile: Path, path: Path, size: str = "1400,1000") -> None:
    await browse(url, profile, f"--screenshot={path}", f"--window-size={size}", "--hide-scrollbars")
    keep(path)


def keep(png: Path) -> None:
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get(WRITE_DOCS_IMG) == "1":
        shutil.copy(png, DOCS_IMG / png.name)
    print(f"screenshot: {png}")


async def test_the_dashboard_in_headless_chromium(
    article_bed: Bed, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    chromium()  # fail before building anything when it is missing
    bed = article_bed
    for worker in ("worker-1", "worker-2", "worker-3"):
        await bed.start_shim(worker)
    await set_maintenance(bed, "worker-3", "cordon")
    try:
        controller = await bed.start_manager()
        source = ManagerSource(
            controller.metrics,
            identity=IDENTITY,
            federation=controller,
            trace_url="http://jaeger.example:16686/trace/{trace_id}",
        )
        # A short window sampled every second, so the charts fill in the test's minute.
        source.history = History(window=45, interval=1)
        async with ObservabilityServer(source, "127.0.0.1", 0) as server:
            await submit(bed, "02-light-job.yaml", delay_ms=600_000)
            await submit(bed, "03-heavy-job.yaml", delay_ms=600_000)
            too_big = h100_job("too-big-job", gpus=8)  # more than the global quota of 4
            await bed.manager_api.create(R.JOBS, too_big, NS)
            for job in ("light-job", "heavy-job"):
                await wait_for(lambda j=job: placed(bed.manager_api, j), timeout=60, what=job)

            async def too_big_waits_with_a_reason() -> bool:
                async with http.get(f"{server.url}/dashboard/state.json") as response:
                    state = await response.json()
                return any(
                    w["name"].startswith("job-too-big-job") and "quota" in w["reason"]
                    for w in state["workloads"]
                )

            await wait_for(too_big_waits_with_a_reason, timeout=60, what="too-big-job waits")

            url = f"{server.url}/dashboard"
            dom = await browse(url, tmp_path / "profile", "--dump-dom")
            clusters = table_text(dom, "clusters")
            for worker in ("worker-1", "worker-2", "worker-3"):
                assert worker in clusters
            assert "cordoned" in clusters and "Active" in clusters
            # worker-1 offers 32 cpu, 128Gi, 2 GPUs; light-job holds 2 cpu, 4Gi, 1 GPU.
            assert "rtx-a1000 : cpu 30, memory 124Gi, nvidia.com/gpu 1" in clusters, clusters
            assert "gpu-cq" in table_text(dom, "queues")
            workloads = table_text(dom, "workloads")
            assert "job-light-job" in workloads and "runs on worker-1: fits in gpu-cq" in workloads
            assert "job-heavy-job" in workloads and "runs on worker-2" in workloads
            assert "job-too-big-job" in workloads and "Pending" in workloads
            heavy = re.search(r'href="\.\./workloads/ml-jobs/(job-heavy-job-[a-z0-9-]+)"', dom)
            assert heavy, "each workload links to its page"

            # A failover for the charts and the workload page: worker-2 drained, worker-3 open.
            await set_maintenance(bed, "worker-3", None)
            await set_maintenance(bed, "worker-2", "drain")

            async def charted() -> dict[str, Any] | None:
                async with http.get(f"{server.url}/dashboard/history.json") as response:
                    charts = (await response.json())["charts"]
                series = {name: chart["series"] for name, chart in charts.items()}
                moved = any(v > 0 for _, v in series["failovers"].get("worker-2", []))
                on_3 = any(v > 0 for _, v in series["gpus"].get("worker-3 / h100", []))
                return series if moved and on_3 else None

            series = await wait_for(charted, timeout=90, what="the failover charted")
            assert series is not None
            assert max(v for _, v in series["pending"]["gpu-cq"]) >= 1  # too-big-job waits
            assert max(v for _, v in series["admitted"]["gpu-cq"]) >= 2
            assert max(v for _, v in series["gpus"]["worker-1 / rtx-a1000"]) == 1
            assert {"worker-1", "worker-2"} <= set(series["dispatch-latency"])
            async with http.get(f"{server.url}/dashboard/charts/gpus.svg") as response:
                svg = await response.text()
            assert "worker-3 / h100" in svg and "<polyline" in svg

            await screenshot(url, tmp_path / "profile", tmp_path / "dashboard.png", "1400,1500")

            page_url = f"{server.url}/workloads/ml-jobs/{heavy.group(1)}"
            page = await browse(page_url, tmp_path / "profile", "--dump-dom")
            story = table_text(page, "timeline")
            assert (
                story.index("Quota reserved") < story.index("Failover") < story.rindex("Dispatched")
            ), story
            assert 'Leaving "worker-2" (drain)' in story and 'Sent to "worker-3"' in story
            assert "worker-3" in re.sub(r"<[^>]+>", " ", page.split('id="candidates"')[1])
            assert "http://jaeger.example:16686/trace/" in page
            await screenshot(
                page_url, tmp_path / "profile", tmp_path / "workload-page.png", "1200,1100"
            )
    finally:
        for worker in ("worker-2", "worker-3"):
            await set_maintenance(bed, worker, None)
