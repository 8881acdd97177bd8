"""The two safeguards that keep the admission core's view of a workload from going stale,
each forced on purpose on a real cluster.

- The scheduling loop admits a workload whose object already holds a reservation (the core's
  view is behind): its write is not made, and no watch event will follow. The loop asks the
  Workload controller to reconcile it (``AdmissionLoop.resync``), which accounts for the
  reservation once. Without that, the workload would stay queued in the core forever (or be
  admitted again and again).
- An event arrives while the workload's admission write is in flight: the Workload
  controller leaves it alone then, but looks again shortly after
  (``IN_FLIGHT_RECHECK_SECONDS``). Without that, the event would be lost.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from e2e.waiting import wait_for
from manager import core
from manager.api import constants as C
from manager.api.workload import Workload
from manager.controllers import convert
from manager.controllers import workloadstatus as ws
from manager.controllers.runtime import ClusterController
from manager.controllers.settings import ControllerSettings
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.controllers import builders as b
from tests.integration.controllers.conftest import (
    RunningController,
    StartController,
    create_cluster_scoped,
)
from tests.integration.controllers.helpers import condition, workload_of

pytestmark = pytest.mark.full

RUNNING_MS = 600_000  # the pod runs for the whole test


async def admitted_workload(
    api: KubeApi, ns: str, unique: str, cluster_objects: list[tuple[R.Resource, str]]
) -> None:
    """A ClusterQueue with room for several jobs, its LocalQueue, and one job in it."""
    fl = f"h100-{unique}"
    await create_cluster_scoped(api, R.RESOURCE_FLAVORS, b.flavor(fl, "h100"), cluster_objects)
    await create_cluster_scoped(
        api, R.CLUSTER_QUEUES, b.cluster_queue(f"s-{unique}", fl, gpus=4), cluster_objects
    )
    await api.create(R.LOCAL_QUEUES, b.local_queue(ns, "q", f"s-{unique}"), ns)
    await api.create(R.JOBS, b.job(ns, "j", "q", delay_ms=RUNNING_MS, model="h100"), ns)


async def wait_admitted(api: KubeApi, ns: str) -> dict[str, Any]:
    async def admitted() -> dict[str, Any] | None:
        wl = await workload_of(api, ns, "j")
        return wl if wl is not None and ws.is_admitted(wl) else None

    wl: dict[str, Any] | None = await wait_for(
        admitted, timeout=60, what="the job's Workload admitted"
    )
    assert wl is not None
    return wl


async def admitted_in_the_core(
    api: KubeApi,
    ns: str,
    unique: str,
    cluster_objects: list[tuple[R.Resource, str]],
    start_controller: StartController,
) -> tuple[ClusterController, str]:
    """One job admitted, on the cluster and in a running controller's core: the controller
    and its workload's key."""
    await admitted_workload(api, ns, unique, cluster_objects)
    running = await start_controller()
    key = ws.key_of(await wait_admitted(api, ns))
    core_ = running.controller.state.core
    await wait_for(
        lambda: core_.workload_state(core.WorkloadKey(key)) is core.WorkloadState.ADMITTED,
        timeout=10,
        what="the core's own view: admitted",
    )
    return running.controller, key


def make_core_view_stale(controller: ClusterController, key: str) -> dict[str, Any]:
    """The core forgets the workload's reservation and queues it again, as a missed or
    reordered event would leave it, while its object still holds quota; returns the
    object."""
    obj = controller.state.workloads.get(key)
    assert obj is not None
    stale = copy.deepcopy(obj)
    stale.pop("status", None)
    model = Workload.model_validate(stale)
    core_ = controller.state.core
    core_.delete_workload(core.WorkloadKey(key))
    core_.add_workload(
        convert.workload(
            model,
            priority=controller.workloads.priority_of(model),
            creation_time=ws.creation_time(obj),
        )
    )
    return obj


async def test_a_core_view_behind_the_object_is_resynced_not_admitted_again(
    api: KubeApi,
    ns: str,
    unique: str,
    cluster_objects: list[tuple[R.Resource, str]],
    start_controller: StartController,
) -> None:
    controller, key = await admitted_in_the_core(api, ns, unique, cluster_objects, start_controller)
    wkey = core.WorkloadKey(key)
    core_ = controller.state.core

    obj = make_core_view_stale(controller, key)
    assert core_.workload_state(wkey) is core.WorkloadState.PENDING
    cycles_before = controller.admission.cycles
    controller.state.kick()

    # The loop admits it again in the core; the write does not apply (it already holds a
    # reservation), so the Workload controller is asked to reconcile, and the core ends up
    # with the object's own admission, admitted, not a fresh assumed reservation.
    await wait_for(
        lambda: core_.workload_state(wkey) is core.WorkloadState.ADMITTED,
        timeout=10,
        interval=0.05,
        what="the core's view resynced from the object",
    )
    assert controller.admission.cycles > cycles_before, "the scheduling loop did run"
    admission = core_.admission(wkey)
    assert admission is not None
    assert admission.cluster_queue == f"s-{unique}"

    after = await workload_of(api, ns, "j")
    assert after is not None
    assert ws.status_of(after)["admission"] == ws.status_of(obj)["admission"]
    reserved, before = condition(after, C.QUOTA_RESERVED), condition(obj, C.QUOTA_RESERVED)
    assert reserved is not None and before is not None
    assert reserved["lastTransitionTime"] == before["lastTransitionTime"], (
        "the stale admission was never written"
    )
    assert condition(after, C.EVICTED) is None

    async def counted_once() -> bool:
        cq = await api.get(R.CLUSTER_QUEUES, f"s-{unique}")
        status = cq.get("status") or {}
        return status.get("admittedWorkloads") == 1 and status.get("pendingWorkloads") == 0

    await wait_for(counted_once, timeout=10, what="the ClusterQueue counting it once")


async def test_an_event_during_the_admission_write_is_looked_at_again(
    api: KubeApi,
    ns: str,
    unique: str,
    cluster_objects: list[tuple[R.Resource, str]],
) -> None:
    controller = ClusterController(api, ControllerSettings(status_period=0.3))
    key_of_job: list[str] = []
    seen_in_flight = asyncio.Event()
    reconcile = controller.workloads.reconcile

    async def reconcile_watched(key: str) -> float | None:
        # What the controller saw: an event for the workload while its write was in flight.
        in_flight = key in controller.admission.in_flight
        obj = controller.state.workloads.get(key) or {}
        again = await reconcile(key)
        if key_of_job and key == key_of_job[0] and in_flight and not ws.is_active(obj):
            seen_in_flight.set()
        return again

    controller.workloads.reconcile = reconcile_watched  # type: ignore[method-assign]
    running = RunningController(controller, asyncio.create_task(controller.run()))
    try:
        await asyncio.wait_for(controller.synced.wait(), timeout=30)
        await admitted_workload(api, ns, unique, cluster_objects)
        wl = await wait_admitted(api, ns)
        key = ws.key_of(wl)
        key_of_job.append(key)

        # An admission write of this workload is on its way (as far as the controllers
        # know), and the user deactivates it meanwhile.
        controller.admission.in_flight.add(key)
        await api.patch(R.WORKLOADS, wl["metadata"]["name"], {"spec": {"active": False}}, ns)
        await asyncio.wait_for(seen_in_flight.wait(), timeout=10)
        assert condition(await workload_of(api, ns, "j"), C.EVICTED) is None, (
            "left alone while the write was in flight"
        )
        controller.admission.in_flight.discard(key)

        # The write is done: the deactivation, seen during it, is acted on now, without any
        # new event.
        async def evicted_as_deactivated() -> bool:
            evicted = condition(await workload_of(api, ns, "j"), C.EVICTED)
            return evicted is not None and evicted.get("reason") == C.REASON_DEACTIVATED

        await wait_for(evicted_as_deactivated, timeout=10, what="the deactivation acted on")
    finally:
        await running.stop()


async def test_a_stale_head_of_the_queue_never_spins_the_scheduling_loop(
    api: KubeApi,
    ns: str,
    unique: str,
    cluster_objects: list[tuple[R.Resource, str]],
    start_controller: StartController,
) -> None:
    """Found by the MultiKueue benchmark (1,000 Jobs, 16 reconciles at once): the core's
    view of the oldest workload went stale while others waited behind it. Each cycle admitted
    it again, its write did not apply (it holds a reservation), and it went straight back to
    the head of its queue: the next cycle, with others still waiting, admitted it again at
    once, so its reconcile always found its admission "in flight" and never ran, the manager
    spun at 100 % CPU and admitted nothing more. Now a write that does not apply takes the
    workload out of the core until its reconcile puts it back as its object says."""
    controller, key = await admitted_in_the_core(api, ns, unique, cluster_objects, start_controller)
    wkey = core.WorkloadKey(key)
    core_ = controller.state.core
    obj = make_core_view_stale(controller, key)
    # A younger job waits behind the stale head (the queue has room for it).
    await api.create(R.JOBS, b.job(ns, "k", "q", delay_ms=RUNNING_MS, model="h100"), ns)

    async def younger_admitted() -> bool:
        younger = await workload_of(api, ns, "k")
        return younger is not None and ws.is_admitted(younger)

    await wait_for(younger_admitted, timeout=30, what="the younger job admitted")
    await wait_for(
        lambda: core_.workload_state(wkey) is core.WorkloadState.ADMITTED,
        timeout=10,
        interval=0.05,
        what="the stale head resynced from its object",
    )
    after = await workload_of(api, ns, "j")
    assert after is not None
    reserved, before = condition(after, C.QUOTA_RESERVED), condition(obj, C.QUOTA_RESERVED)
    assert reserved is not None and before is not None
    assert reserved["lastTransitionTime"] == before["lastTransitionTime"]
