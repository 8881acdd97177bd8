"""Upstream's admission counters as they are recorded, read from the controller's registry
without ever scraping ``/metrics`` (issue #44 items 2 and 3): the ``priority_class`` label is
the Workload's ``spec.priorityClassRef.name``, and an admission into a cohort counts for the
cohort and each ancestor when it happens, not only after a scrape taught the metrics the
ClusterQueue's cohort."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.telemetry.metrics import Metrics
from tests.integration.controllers import builders as b
from tests.integration.controllers.conftest import StartController, create_cluster_scoped
from tests.integration.controllers.helpers import condition, workload_of

pytestmark = pytest.mark.full


def counted(metrics: Metrics, name: str, **labels: str) -> float:
    """The sum of a counter's samples whose labels include ``labels`` (any replica_role)."""
    total = 0.0
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


async def _admitted(api: KubeApi, ns: str, job: str) -> bool:
    wl = await workload_of(api, ns, job)
    return wl is not None and ws.is_admitted(wl)


async def test_admissions_count_under_their_priority_class_and_every_cohort_before_a_scrape(
    api: KubeApi,
    ns: str,
    unique: str,
    cluster_objects: list[Any],
    start_controller: StartController,
) -> None:
    fl, cq, co, root = f"h100-{unique}", f"m-{unique}", f"co-{unique}", f"root-{unique}"
    await create_cluster_scoped(api, R.RESOURCE_FLAVORS, b.flavor(fl, "h100"), cluster_objects)
    await create_cluster_scoped(
        api,
        R.COHORTS,
        {
            "apiVersion": C.API_VERSION,
            "kind": "Cohort",
            "metadata": {"name": co},
            "spec": {"parentName": root},
        },
        cluster_objects,
    )
    await create_cluster_scoped(
        api, R.CLUSTER_QUEUES, b.cluster_queue(cq, fl, gpus=4, cohort=co), cluster_objects
    )
    await create_cluster_scoped(
        api, R.WORKLOAD_PRIORITY_CLASSES, b.priority_class(f"hi-{unique}", 1000), cluster_objects
    )
    await api.create(R.LOCAL_QUEUES, b.local_queue(ns, "q", cq), ns)
    running = await start_controller()
    await api.create(
        R.JOBS, b.job(ns, "urgent", "q", delay_ms=60_000, priority_class=f"hi-{unique}"), ns
    )
    await api.create(R.JOBS, b.job(ns, "plain", "q", delay_ms=60_000), ns)
    for job in ("urgent", "plain"):
        await wait_for(lambda j=job: _admitted(api, ns, j), timeout=30, what=f"{job} admitted")  # type: ignore[misc]
    wl = await workload_of(api, ns, "urgent")
    assert wl is not None and wl["spec"]["priorityClassRef"]["name"] == f"hi-{unique}"

    metrics = running.controller.state.metrics
    name = "kueue_admitted_workloads_total"
    assert counted(metrics, name, cluster_queue=cq, priority_class=f"hi-{unique}") == 1
    assert counted(metrics, name, cluster_queue=cq, priority_class="") == 1
    subtree = "kueue_cohort_subtree_admitted_workloads_total"
    for cohort in (co, root):
        assert counted(metrics, subtree, cohort=cohort, priority_class=f"hi-{unique}") == 1, cohort
        assert counted(metrics, subtree, cohort=cohort, priority_class="") == 1, cohort


async def test_a_preempted_eviction_counts_under_the_victims_priority_class(
    api: KubeApi,
    ns: str,
    unique: str,
    cluster_objects: list[Any],
    start_controller: StartController,
) -> None:
    fl, cq = f"h100-{unique}", f"p-{unique}"
    await create_cluster_scoped(api, R.RESOURCE_FLAVORS, b.flavor(fl, "h100"), cluster_objects)
    await create_cluster_scoped(
        api,
        R.CLUSTER_QUEUES,
        b.cluster_queue(cq, fl, gpus=1, preemption={"withinClusterQueue": "LowerPriority"}),
        cluster_objects,
    )
    for name, value in (("low", 100), ("high", 1000)):
        await create_cluster_scoped(
            api,
            R.WORKLOAD_PRIORITY_CLASSES,
            b.priority_class(f"{name}-{unique}", value),
            cluster_objects,
        )
    await api.create(R.LOCAL_QUEUES, b.local_queue(ns, "q", cq), ns)
    running = await start_controller()
    await api.create(
        R.JOBS, b.job(ns, "victim", "q", delay_ms=60_000, priority_class=f"low-{unique}"), ns
    )
    await wait_for(lambda: _admitted(api, ns, "victim"), timeout=30, what="victim admitted")
    await api.create(
        R.JOBS, b.job(ns, "urgent", "q", delay_ms=60_000, priority_class=f"high-{unique}"), ns
    )

    async def preempted() -> bool:
        c = condition(await workload_of(api, ns, "victim"), C.PREEMPTED)
        return c is not None and c.get("status") == "True"

    await wait_for(preempted, timeout=30, what="victim preempted")
    metrics = running.controller.state.metrics

    async def counted_evicted() -> bool:
        return (
            counted(
                metrics,
                "kueue_evicted_workloads_total",
                cluster_queue=cq,
                reason="Preempted",
                priority_class=f"low-{unique}",
            )
            == 1
        )

    await wait_for(counted_evicted, timeout=10, what="the eviction counted under low-*")
    assert (
        counted(metrics, "kueue_evicted_workloads_total", cluster_queue=cq, priority_class="") == 0
    )
