"""Workloads listed by the ClusterQueue that holds their quota, on a real kube-apiserver with
kfed's CRDs and kfed's controller admitting (the shared single cluster): upstream's one
selectable field, ``status.admission.clusterQueue`` (v0.18 on). With upstream v0.19's finer
pending reasons asked for (--unadmitted-workloads-observability), the workload left out says
``WaitingForQuota``, and the v0.18/v0.19 metrics count it, its Workload's creation and, once
a workload is deactivated, the release of its quota."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.controllers.runtime import ClusterController
from manager.controllers.settings import ControllerSettings
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.tasks import stop_tasks
from manager.observability.sources import set_queue_metrics
from manager.telemetry.metrics import Metrics
from tests.integration.controllers import builders as b
from tests.integration.controllers.conftest import create_cluster_scoped
from tests.integration.controllers.helpers import condition, workload_of

pytestmark = pytest.mark.full


def gauge(metrics: Metrics, name: str, **labels: str) -> float | None:
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return None


async def names(api: KubeApi, namespace: str | None, selector: str) -> set[str]:
    listed = await api.list(R.WORKLOADS, namespace, field_selector=selector)
    return {str(item["metadata"]["name"]) for item in listed["items"]}


async def test_a_field_selector_lists_only_that_cluster_queues_admitted_workloads(
    api: KubeApi, ns: str, unique: str, cluster_objects: list[Any]
) -> None:
    fl, cq_a, cq_b = f"h100-{unique}", f"fa-{unique}", f"fb-{unique}"
    await create_cluster_scoped(api, R.RESOURCE_FLAVORS, b.flavor(fl, "h100"), cluster_objects)
    for cq, gpus in ((cq_a, 2), (cq_b, 1)):
        await create_cluster_scoped(
            api, R.CLUSTER_QUEUES, b.cluster_queue(cq, fl, gpus=gpus), cluster_objects
        )
    await api.create(R.LOCAL_QUEUES, b.local_queue(ns, "qa", cq_a), ns)
    await api.create(R.LOCAL_QUEUES, b.local_queue(ns, "qb", cq_b), ns)
    settings = ControllerSettings(status_period=0.3, unadmitted_workloads_observability=True)
    controller = ClusterController(api, settings)
    task = asyncio.create_task(controller.run())
    try:
        await asyncio.wait_for(controller.synced.wait(), timeout=30)
        for job, queue in (("a1", "qa"), ("a2", "qa"), ("b1", "qb"), ("b2", "qb")):
            await api.create(R.JOBS, b.job(ns, job, queue, delay_ms=120_000), ns)

        async def admitted(job: str) -> dict[str, Any] | None:
            wl = await workload_of(api, ns, job)
            return wl if wl is not None and ws.is_admitted(wl) else None

        workloads = {}
        for job in ("a1", "a2"):
            wl = await wait_for(lambda j=job: admitted(j), timeout=30, what=f"{job} admitted")  # type: ignore[misc]
            assert wl is not None
            workloads[job] = str(wl["metadata"]["name"])

        # b1 and b2 share a creation second when the apiserver is busy, and then the tie goes
        # by Workload name (its hash): either may hold qb's one GPU, the other waits for it
        async def one_of_b_admitted() -> tuple[str, str] | None:
            found = [job for job in ("b1", "b2") if await admitted(job) is not None]
            if len(found) != 1:
                return None
            return (found[0], "b2" if found[0] == "b1" else "b1")

        pair = await wait_for(one_of_b_admitted, timeout=30, what="one of b1, b2 admitted")
        assert pair is not None
        first, second = pair
        first_wl = await admitted(first)
        assert first_wl is not None
        workloads["b_admitted"] = str(first_wl["metadata"]["name"])

        async def waiting() -> dict[str, Any] | None:
            wl = await workload_of(api, ns, second)
            found = condition(wl, C.QUOTA_RESERVED)
            return wl if found and found["reason"] == C.REASON_WAITING_FOR_QUOTA else None

        b_waiting = await wait_for(waiting, timeout=30, what=f"{second} pending, WaitingForQuota")
        assert b_waiting is not None
        workloads["b_waiting"] = str(b_waiting["metadata"]["name"])

        field = "status.admission.clusterQueue"
        assert await names(api, ns, f"{field}={cq_a}") == {workloads["a1"], workloads["a2"]}
        assert await names(api, ns, f"{field}={cq_b}") == {workloads["b_admitted"]}
        # across namespaces too (the ClusterQueues are this test's own)
        assert await names(api, None, f"{field}={cq_a}") == {workloads["a1"], workloads["a2"]}
        # a pending workload has no status.admission: only != finds it
        both_b = {workloads["b_admitted"], workloads["b_waiting"]}
        assert await names(api, ns, f"{field}!={cq_a}") == both_b

        metrics = controller.state.metrics
        set_queue_metrics(metrics, controller.state)  # what a scrape does first
        assert (
            gauge(
                metrics,
                "kueue_unadmitted_workloads",
                cluster_queue=cq_b,
                reason=C.REASON_NO_RESERVATION,
                underlying_cause=C.REASON_WAITING_FOR_QUOTA,
            )
            == 1
        )
        assert (
            gauge(
                metrics,
                "kueue_cluster_queue_resource_pending",
                cluster_queue=cq_b,
                resource="nvidia.com/gpu",
            )
            == 1
        )
        assert gauge(metrics, "kueue_cluster_queue_info", cluster_queue=cq_a) == 1
        # each Job's Workload, created by kfed, observed once (the Jobs were never edited)
        count = "kueue_workload_creation_latency_seconds_count"
        assert gauge(metrics, count, job_kind="Job") == 4

        # the admitted one deactivated: evicted, its quota given back (observed), the other
        # admitted in its place
        await api.patch(R.WORKLOADS, workloads["b_admitted"], {"spec": {"active": False}}, ns)
        assert await wait_for(
            lambda: admitted(second), timeout=30, what=f"{second} admitted after {first}"
        )
        assert await names(api, ns, f"{field}={cq_b}") == {workloads["b_waiting"]}
        released = "kueue_workload_eviction_latency_seconds_count"
        assert gauge(metrics, released, cluster_queue=cq_b, reason=C.REASON_DEACTIVATED) == 1
    finally:
        await stop_tasks([task])
