"""Cohort borrowing, preemption by a higher-priority job, and a controller restart in the
middle of admissions, on one real cluster with kwok GPU nodes."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.controllers import builders as b
from tests.integration.controllers.conftest import StartController, create_cluster_scoped
from tests.integration.controllers.helpers import condition, job_complete, workload_of
from tests.integration.eventlog import wait_for_story

pytestmark = pytest.mark.full


async def admitted_count(api: KubeApi, ns: str, names: list[str]) -> int:
    """Workloads of the named Jobs holding quota, read in ONE list so that the count is a
    snapshot: reading them one by one can see a finished job's successor admitted next to a
    stale read of the job before it finished, and count one quota slot twice."""
    wanted = set(names)
    count = 0
    for wl in (await api.list(R.WORKLOADS, ns))["items"]:
        owners = {o.get("name") for o in wl["metadata"].get("ownerReferences") or []}
        if owners & wanted and ws.is_admitted(wl) and not ws.is_finished(wl):
            count += 1
    return count


async def test_cohort_borrowing(
    api: KubeApi,
    ns: str,
    unique: str,
    cluster_objects: list[Any],
    start_controller: StartController,
) -> None:
    fl = f"h100-{unique}"
    await create_cluster_scoped(api, R.RESOURCE_FLAVORS, b.flavor(fl, "h100"), cluster_objects)
    for cq in ("a", "b"):
        await create_cluster_scoped(
            api,
            R.CLUSTER_QUEUES,
            b.cluster_queue(f"{cq}-{unique}", fl, gpus=1, cohort=f"co-{unique}"),
            cluster_objects,
        )
        await api.create(R.LOCAL_QUEUES, b.local_queue(ns, cq, f"{cq}-{unique}"), ns)
    await start_controller()
    for name in ("first", "second"):
        await api.create(R.JOBS, b.job(ns, name, "a", delay_ms=5000, model="h100"), ns)
    await wait_for(
        lambda: admitted_count(api, ns, ["first", "second"]),
        timeout=30,
        what="both admitted",
    )
    await wait_for(
        lambda: _eq(admitted_count(api, ns, ["first", "second"]), 2),
        timeout=30,
        what="second admitted by borrowing from b",
    )

    async def borrowed() -> bool:
        cq = await api.get(R.CLUSTER_QUEUES, f"a-{unique}")
        usage = (cq.get("status") or {}).get("flavorsReservation") or []
        gpu = [r for f in usage for r in f["resources"] if r["name"] == "nvidia.com/gpu"]
        return bool(gpu) and gpu[0].get("total") == "2" and gpu[0].get("borrowed") == "1"

    await wait_for(borrowed, timeout=10, what="ClusterQueue a reports 1 GPU borrowed")
    for name in ("first", "second"):
        await wait_for(lambda n=name: job_complete(api, ns, n), timeout=60, what=f"{name} complete")  # type: ignore[misc]


async def _eq(value: Any, expected: int) -> bool:
    return bool(await value == expected)


async def test_higher_priority_job_preempts_and_victim_runs_again(
    api: KubeApi,
    ns: str,
    unique: str,
    cluster_objects: list[Any],
    start_controller: StartController,
) -> None:
    fl = f"h100-{unique}"
    await create_cluster_scoped(api, R.RESOURCE_FLAVORS, b.flavor(fl, "h100"), cluster_objects)
    await create_cluster_scoped(
        api,
        R.CLUSTER_QUEUES,
        b.cluster_queue(
            f"p-{unique}", fl, gpus=1, preemption={"withinClusterQueue": "LowerPriority"}
        ),
        cluster_objects,
    )
    for name, value in (("low", 100), ("high", 1000)):
        await create_cluster_scoped(
            api,
            R.WORKLOAD_PRIORITY_CLASSES,
            b.priority_class(f"{name}-{unique}", value),
            cluster_objects,
        )
    await api.create(R.LOCAL_QUEUES, b.local_queue(ns, "q", f"p-{unique}"), ns)
    await start_controller()

    await api.create(
        R.JOBS, b.job(ns, "victim", "q", delay_ms=6000, priority_class=f"low-{unique}"), ns
    )
    await wait_for(lambda: _running(api, ns, "victim"), timeout=30, what="victim running")
    await api.create(
        R.JOBS, b.job(ns, "urgent", "q", delay_ms=1000, priority_class=f"high-{unique}"), ns
    )

    async def preempted() -> dict[str, Any] | None:
        wl = await workload_of(api, ns, "victim")
        c = condition(wl, C.PREEMPTED)
        return wl if c is not None and c.get("status") == "True" else None

    victim = await wait_for(preempted, timeout=30, what="victim preempted")
    assert condition(victim, C.PREEMPTED)["reason"] == C.REASON_IN_CLUSTER_QUEUE  # type: ignore[index]
    assert condition(victim, C.EVICTED)["reason"] == C.REASON_EVICTED_BY_PREEMPTION  # type: ignore[index]

    async def victim_suspended() -> bool:
        job = await api.get(R.JOBS, "victim", ns)
        return bool(job["spec"].get("suspend")) and not (job.get("status") or {}).get("active")

    await wait_for(victim_suspended, timeout=30, what="victim's Job suspended, pods gone")
    await wait_for(lambda: job_complete(api, ns, "urgent"), timeout=60, what="urgent complete")
    await wait_for(
        lambda: job_complete(api, ns, "victim"), timeout=60, what="victim re-admitted and complete"
    )
    done = await workload_of(api, ns, "victim")
    assert (ws.status_of(done or {}).get("requeueState") or {}).get("count") == 1

    # Upstream Kueue's Events of a preemption (#20): EvictedDueToPreempted and Preempted on
    # the victim, PreemptedWorkload on the preemptor, the victim's Job Stopped with why.
    urgent = await workload_of(api, ns, "urgent")
    assert done is not None and urgent is not None
    expected = (
        f"Preempted to accommodate a workload (UID: {urgent['metadata']['uid']}, JobUID: "
        f"{urgent['metadata']['labels'][C.JOB_UID_LABEL]}) due to prioritization in the "
        f"ClusterQueue; preemptor path: /p-{unique}; preemptee path: /p-{unique}"
    )
    assert condition(victim, C.EVICTED)["message"] == expected  # type: ignore[index]
    story = await wait_for_story(
        api,
        ns,
        "Workload",
        done["metadata"]["name"],
        ["QuotaReserved", "EvictedDueToPreempted", "QuotaReserved"],
        component="kfed-manager",
    )
    told = {t.reason: t.message for t in story}
    assert told["EvictedDueToPreempted"] == expected
    assert told["Preempted"] == (
        f"{expected}; preemptor effective priority: 1000 (base: 1000, boost: 0); "
        "preemptee effective priority: 100 (base: 100, boost: 0)"
    )
    preemptor = await wait_for_story(
        api, ns, "Workload", urgent["metadata"]["name"], ["PreemptedWorkload", "QuotaReserved"]
    )
    assert next(t for t in preemptor if t.reason == "PreemptedWorkload").message.startswith(
        f"Preempted workload {ns}/{done['metadata']['name']} (UID: {done['metadata']['uid']}) "
        f"in ClusterQueue p-{unique}; preemptor effective priority: 1000"
    )
    job_story = await wait_for_story(
        api,
        ns,
        "Job",
        "victim",
        ["Started", "Stopped", "FinishedWorkload"],
        component="kfed-manager",
    )
    assert next(t for t in job_story if t.reason == "Stopped").message == expected
    # Started again with the same message: client-go's correlator raises the first one's
    # count instead of writing a second Event.
    assert next(t for t in job_story if t.reason == "Started").count == 2


async def _running(api: KubeApi, ns: str, job: str) -> bool:
    obj = await api.get(R.JOBS, job, ns)
    return bool((obj.get("status") or {}).get("active"))


async def test_restart_in_the_middle_of_admissions_never_admits_twice(
    api: KubeApi,
    ns: str,
    unique: str,
    cluster_objects: list[Any],
    start_controller: StartController,
) -> None:
    fl = f"h100-{unique}"
    await create_cluster_scoped(api, R.RESOURCE_FLAVORS, b.flavor(fl, "h100"), cluster_objects)
    await create_cluster_scoped(
        api, R.CLUSTER_QUEUES, b.cluster_queue(f"r-{unique}", fl, gpus=3), cluster_objects
    )
    await api.create(R.LOCAL_QUEUES, b.local_queue(ns, "q", f"r-{unique}"), ns)
    names = [f"j{i}" for i in range(9)]
    for name in names:
        await api.create(R.JOBS, b.job(ns, name, "q", delay_ms=1500, model="h100"), ns)
    first = await start_controller()
    await wait_for(
        lambda: _at_least(admitted_count(api, ns, names), 2),
        timeout=30,
        what="admissions under way",
    )
    await first.stop()
    await start_controller()

    async def all_done_never_over_quota() -> bool:
        assert await admitted_count(api, ns, names) <= 3, "more admitted than the quota allows"
        for name in names:
            if not await job_complete(api, ns, name):
                return False
        return True

    await wait_for(all_done_never_over_quota, timeout=120, interval=0.3, what="every job complete")
    for name in names:
        wl = await workload_of(api, ns, name)
        assert condition(wl, C.EVICTED) is None, f"{name} was evicted: admitted twice?"


async def _at_least(value: Any, minimum: int) -> bool:
    return bool(await value >= minimum)
