"""Per-job and per-queue policies, and what a manager leaves alone: the allow-list,
garbage collection of orphaned copies, another manager's copies (distinct origins), and the
ClusterQueue failover policy ``wait``."""

from __future__ import annotations

import functools
import time
from typing import Any

import pytest

from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.federation.settings import ALLOWED_CLUSTERS_ANNOTATION, FAILOVER_POLICY_ANNOTATION
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.federation import article
from tests.integration.federation.bed import Bed
from tests.integration.federation.test_dispatch import h100_job, placed

pytestmark = pytest.mark.full
NS = article.NS


def orphan(name: str, origin: str) -> dict[str, Any]:
    """A Workload copy on a worker, as a manager of ``origin`` would have created it."""
    return {
        "apiVersion": C.API_VERSION,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": NS, "labels": {C.MULTIKUEUE_ORIGIN_LABEL: origin}},
        "spec": {
            "queueName": "nowhere",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "c", "image": "x"}],
                        }
                    },
                }
            ],
        },
    }


async def exists(api: KubeApi, name: str) -> bool:
    try:
        await api.get(R.WORKLOADS, name, NS)
    except errors.NotFound:
        return False
    return True


async def test_allow_list_restricts_where_a_job_may_go(article_bed: Bed) -> None:
    bed = article_bed
    await bed.start_federation()
    api = bed.manager_api
    for target in ("worker-3", "worker-2"):
        job = h100_job(f"only-{target}", delay_ms=500)
        job["metadata"].setdefault("annotations", {})[ALLOWED_CLUSTERS_ANNOTATION] = target
        await api.create(R.JOBS, job, NS)
        wl = await wait_for(
            functools.partial(placed, api, f"only-{target}"), timeout=60, what="placed"
        )
        assert wl is not None and ws.status_of(wl)["clusterName"] == target


async def test_gc_removes_orphans_of_our_origin_and_leaves_other_managers_alone(
    article_bed: Bed,
) -> None:
    bed = article_bed
    await bed.start_shim("worker-2")
    worker = bed.worker_apis["worker-2"]
    await worker.create(R.WORKLOADS, orphan("ours-orphan", "multikueue"), NS)
    await worker.create(R.WORKLOADS, orphan("theirs", "another-manager"), NS)
    await bed.start_manager()
    assert bed.manager is not None
    await wait_for(
        lambda: _not(exists(worker, "ours-orphan")),
        timeout=60,
        what="our orphaned copy garbage-collected",
    )
    # Several GC periods later, the other manager's copy is still there, untouched.
    deadline = time.monotonic() + 3 * bed.manager.settings.gc_interval
    await wait_for(lambda: time.monotonic() >= deadline, timeout=60, what="three GC periods")
    assert await exists(worker, "theirs")
    remote = bed.manager.registry.remote("worker-2")
    assert remote is not None and remote.workloads().get(f"{NS}/theirs") is None, "not even watched"


async def _not(value: Any) -> bool:
    return not await value


async def test_failover_policy_wait_never_moves_before_the_long_timeout(article_bed: Bed) -> None:
    bed = article_bed
    api = bed.manager_api
    await api.patch(
        R.CLUSTER_QUEUES,
        "gpu-cq",
        {"metadata": {"annotations": {FAILOVER_POLICY_ANNOTATION: "wait"}}},
    )
    for worker in ("worker-2", "worker-3"):
        await bed.start_shim(worker)
    await bed.start_manager()
    await api.create(R.JOBS, h100_job("patient", delay_ms=600_000), NS)
    wl = await wait_for(lambda: placed(api, "patient"), timeout=60, what="placed")
    first = ws.status_of(wl)["clusterName"]
    other = "worker-3" if first == "worker-2" else "worker-2"
    cut = time.monotonic()
    bed.proxies[first].cut()

    async def moved() -> bool:
        now = await placed(api, "patient")
        return now is not None and ws.status_of(now).get("clusterName") == other

    await wait_for(moved, timeout=60, what="moved after the long timeout")
    assert bed.manager is not None
    assert time.monotonic() - cut >= bed.manager.settings.worker_lost_timeout
