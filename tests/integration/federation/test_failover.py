"""Scenario C (partition) and G (a worker without fencing): a job whose worker is cut off
runs again elsewhere only after that worker has surely stopped it, and never in two
clusters at once; the stale copy is removed when the link heals."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

import pytest

from e2e.waiting import wait_for
from manager.controllers import workloadstatus as ws
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.eventlog import wait_for_story
from tests.integration.federation import article
from tests.integration.federation.bed import Bed
from tests.integration.federation.test_dispatch import complete, h100_job, placed

pytestmark = pytest.mark.full
NS = article.NS
MANAGER = "kfed-manager"


async def running_pods(api: KubeApi, job: str) -> int:
    pods = (await api.list(R.PODS, NS, label_selector=f"job-name={job}"))["items"]
    return sum(
        1
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    )


class WorkerSampler:
    """Samples every worker (directly, not through the proxies) every 0.1 s with ``found``
    (how many of the job's things are there: running pods, allocated claims, ...), and keeps
    how many workers had some at once at most, and when each first had some."""

    def __init__(
        self, workers: dict[str, KubeApi], found: Callable[[KubeApi], Awaitable[int]]
    ) -> None:
        self.workers, self.found = workers, found
        self.samples = 0
        self.max_clusters = 0
        self.seen_on: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            counts = await asyncio.gather(*(self.found(api) for api in self.workers.values()))
            now = time.monotonic()
            having = [name for name, n in zip(self.workers, counts, strict=True) if n]
            for name in having:
                self.seen_on.setdefault(name, now)
            self.max_clusters = max(self.max_clusters, len(having))
            self.samples += 1
            await asyncio.sleep(0.1)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def running_pods_sampler(workers: dict[str, KubeApi], job: str) -> WorkerSampler:
    """Running pods of ``job`` on every worker."""
    return WorkerSampler(workers, lambda api: running_pods(api, job))


async def test_c_partition_fences_then_moves_and_never_runs_twice(article_bed: Bed) -> None:
    bed = article_bed
    for worker in ("worker-1", "worker-2", "worker-3"):
        await bed.start_shim(worker)
    await bed.start_manager()
    api = bed.manager_api
    await api.create(R.JOBS, h100_job("probe", delay_ms=8000), NS)
    wl = await wait_for(lambda: placed(api, "probe"), timeout=60, what="probe placed")
    first = ws.status_of(wl)["clusterName"]
    other = "worker-3" if first == "worker-2" else "worker-2"
    await wait_for(
        lambda: running_pods(bed.worker_apis[first], "probe"), timeout=60, what="probe running"
    )

    sampler = running_pods_sampler(bed.worker_apis, "probe")
    sampler.start()
    try:
        cut_at = time.monotonic()
        bed.proxies[first].cut()
        await wait_for(
            lambda: running_pods(bed.worker_apis[other], "probe"),
            timeout=60,
            what=f"probe running on {other} after the cut",
        )
        moved_after = time.monotonic() - cut_at
        fenced = await running_pods(bed.worker_apis[first], "probe")
        assert fenced == 0, f"{first} still runs the job after failover"
        copy_ = (await bed.worker_apis[first].list(R.WORKLOADS, NS))["items"]
        assert copy_ and not ws.is_active(copy_[0]), (
            "the cut-off worker deactivated (fenced) its copy"
        )

        bed.proxies[first].heal()

        async def stale_copy_removed() -> bool:
            return not (await bed.worker_apis[first].list(R.WORKLOADS, NS))["items"]

        await wait_for(stale_copy_removed, timeout=60, what="stale copy removed after healing")
        await wait_for(lambda: complete(api, "probe"), timeout=60, what="probe completes elsewhere")
    finally:
        await sampler.stop()
    assert sampler.samples > 20
    assert sampler.max_clusters <= 1, "pods of the job ran in two clusters at once"
    assert bed.manager is not None
    settings = bed.manager.settings
    # Never before the fenced-failover window of the last renewal that may have landed.
    assert moved_after >= settings.lease_duration
    print(
        f"cut to running elsewhere: {moved_after:.1f}s "
        f"(window {settings.fenced_failover_after:.1f}s + requeue and start)"
    )

    # The Events tell the drill (#20): on the manager, the move and why; on the cut-off
    # worker, the fencing; on its MultiKueueCluster, lost and recovered.
    name = wl["metadata"]["name"]
    story = await wait_for_story(
        api, NS, "Workload", name, ["Dispatched", "Failover", "Dispatched"], component=MANAGER
    )
    failover = next(t for t in story if t.reason == "Failover")
    assert failover.type == "Warning" and failover.message.startswith(f'Leaving "{first}" (lost)')
    sent = [t.message for t in story if t.reason == "Dispatched"]
    assert sent[0].startswith(f'Sent to "{first}"') and sent[-1].startswith(f'Sent to "{other}"')
    assert sent[-1].endswith(f'(previously sent to "{first}")'), sent[-1]
    there = await wait_for_story(
        bed.worker_apis[first],
        NS,
        "Workload",
        name,
        ["Fenced", "EvictedDueToDeactivated"],
        where=f" on {first}",
    )
    told_fenced = next(t for t in there if t.reason == "Fenced")
    assert told_fenced.type == "Warning" and told_fenced.component == "kfed-worker-shim"
    await wait_for_story(
        api, "default", "MultiKueueCluster", first, ["ClusterLost", "ClusterRecovered"]
    )


async def test_g_worker_without_fencing_waits_for_the_conservative_timeout(
    article_bed: Bed,
) -> None:
    bed = article_bed
    await bed.start_shim("worker-1")
    await bed.start_shim("worker-2", fencing=False)  # like a worker running upstream Kueue
    await bed.start_manager()
    api = bed.manager_api
    # It receives and completes jobs like any other.
    await api.create(R.JOBS, h100_job("plain", delay_ms=1000), NS)
    wl = await wait_for(lambda: placed(api, "plain"), timeout=60, what="plain placed")
    assert ws.status_of(wl)["clusterName"] == "worker-2"
    await wait_for(
        lambda: complete(api, "plain"), timeout=60, what="plain completes on the unfenced worker"
    )
    assert bed.manager is not None
    remote = bed.manager.registry.remote("worker-2")
    assert remote is not None and not remote.can_fence

    await api.create(R.JOBS, h100_job("stuck", delay_ms=600_000), NS)
    await wait_for(lambda: placed(api, "stuck"), timeout=60, what="stuck placed")
    await bed.start_shim("worker-3")
    cut_at = time.monotonic()
    bed.proxies["worker-2"].cut()
    wl = await wait_for(
        lambda: _placed_on(api, "stuck", "worker-3"), timeout=60, what="moved to worker-3"
    )
    waited = time.monotonic() - cut_at
    assert waited >= bed.manager.settings.worker_lost_timeout, "an unfenced worker is never raced"


async def _placed_on(api: KubeApi, job: str, cluster: str) -> dict[str, object] | None:
    wl = await placed(api, job)
    return wl if wl is not None and ws.status_of(wl).get("clusterName") == cluster else None
