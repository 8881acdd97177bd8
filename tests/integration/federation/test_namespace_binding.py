"""Namespace trust: a worker whose MultiKueueCluster binds namespaces
(``kfed.io/namespaces``) takes workloads of those manager namespaces only. The article's light
job (RTX A1000: only worker-1 has it) waits, with the reason, while worker-1 is bound to other
namespaces, and is placed there as soon as its namespace is bound (docs/security.md)."""

from __future__ import annotations

import pytest

from e2e.waiting import wait_for
from manager.api import constants as C
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.federation import article
from tests.integration.federation.bed import Bed
from tests.integration.federation.test_dispatch import check_message, placed

pytestmark = pytest.mark.full
NS = article.NS


async def bind(api: KubeApi, worker: str, namespaces: str | None) -> None:
    patch = {"metadata": {"annotations": {C.NAMESPACES_ANNOTATION: namespaces}}}
    await api.patch(R.MULTIKUEUE_CLUSTERS, worker, patch)


async def test_a_worker_bound_to_other_namespaces_is_refused_with_the_reason(
    article_bed: Bed,
) -> None:
    bed = article_bed
    api = bed.manager_api
    for worker in ("worker-1", "worker-2"):
        await bed.start_shim(worker)
    await bind(api, "worker-1", "team-*, research")
    try:
        await bed.start_manager()
        await api.create(R.JOBS, article.seed_job("02-light-job.yaml", delay_ms=1000), NS)

        async def refused() -> str | None:
            message = await check_message(api, "light-job")
            return message if "not bound" in message else None

        message = await wait_for(refused, timeout=60, what="light-job refused by worker-1")
        assert f"worker-1: namespace {NS} is not bound to it ({C.NAMESPACES_ANNOTATION})" in (
            message or ""
        )
        assert "no worker can ever admit it as configured" in (message or "")
        assert not (await bed.worker_apis["worker-1"].list(R.WORKLOADS, NS))["items"]

        await bind(api, "worker-1", f"team-*, {NS}")
        wl = await wait_for(lambda: placed(api, "light-job"), timeout=60, what="placed once bound")
        assert wl is not None and wl["status"]["clusterName"] == "worker-1"
    finally:
        await bind(api, "worker-1", None)
