"""Assume/confirm/forget, admission checks, restart, finish and the status views."""

from __future__ import annotations

import pytest

from manager.core import (
    Admission,
    AdmissionCore,
    ClusterQueueName,
    FlavorName,
    PodSetAssignment,
    PodSetName,
    ResourceName,
    WorkloadState,
    format_quantity,
    local_queue_key,
    resolve_priority,
)

from .builders import (
    admitted_keys,
    key,
    make_cluster_queue,
    make_flavor,
    make_flavor_quotas,
    make_local_queue,
    make_workload,
    run_until_quiet,
)

CQ = ClusterQueueName("cq")
GPU = ResourceName("nvidia.com/gpu")


def core_with(gpus: int = 2) -> AdmissionCore:
    core = AdmissionCore()
    core.upsert_flavor(make_flavor("a100"))
    core.upsert_cluster_queue(
        make_cluster_queue("cq")
        .resource_group(make_flavor_quotas("a100").resource("nvidia.com/gpu", gpus).obj())
        .obj()
    )
    core.upsert_local_queue(make_local_queue("lq", "default", "cq"))
    return core


def add(core: AdmissionCore, name: str, gpus: int = 1, created: float = 0.0) -> None:
    core.add_workload(make_workload(name).request("nvidia.com/gpu", gpus).created(created).obj())


def gpu_admission(gpus: int) -> Admission:
    return Admission(
        CQ, (PodSetAssignment(PodSetName("main"), {GPU: FlavorName("a100")}, {GPU: gpus}, 1),)
    )


def test_admission_is_assumed_at_once() -> None:
    core = core_with(gpus=1)
    add(core, "a")
    add(core, "b", created=1)

    assert admitted_keys(core.schedule(now=1)) == ["default/a"]
    # The controller hasn't written anything yet, but b can't take a's quota.
    assert admitted_keys(core.schedule(now=1)) == []
    assert core.workload_state(key("a")) is WorkloadState.QUOTA_RESERVED


def test_forget_rolls_back_a_failed_write() -> None:
    core = core_with(gpus=1)
    add(core, "a")
    add(core, "b", created=1)
    run_until_quiet(core, now=1)

    assert core.forget(key("a"))

    assert core.workload_state(key("a")) is WorkloadState.PENDING
    # a keeps its place in the queue: it is admitted again, not b.
    assert admitted_keys(core.schedule(now=2)) == ["default/a"]


def test_confirmed_admissions_cannot_be_forgotten() -> None:
    core = core_with()
    add(core, "a")
    core.schedule(now=1)
    assert core.confirm(key("a"))
    assert not core.forget(key("a"))
    assert core.workload_state(key("a")) is WorkloadState.QUOTA_RESERVED


def test_reserving_and_admitted_counts_follow_admission_checks() -> None:
    core = core_with()
    add(core, "a")
    add(core, "b", created=1)
    run_until_quiet(core, now=1)

    assert core.set_admitted(key("a"))
    assert not core.set_admitted(key("a"))

    status = core.cluster_queue_status(CQ)
    assert status is not None
    assert (status.pending, status.reserving, status.admitted) == (0, 2, 1)
    assert status.flavors_reservation[0].resources[0].total == 2
    assert status.flavors_usage[0].resources[0].total == 1
    lq = core.local_queue_status(local_queue_key("default", "lq"))
    assert lq is not None
    assert (lq.pending, lq.reserving, lq.admitted, lq.active) == (0, 2, 1, True)
    assert lq.flavors_usage[0].resources[0].total == 1


def test_restart_rebuilds_state_without_double_admission() -> None:
    core = core_with(gpus=2)
    workload = make_workload("running").request("nvidia.com/gpu", 2).obj()
    # On restart the controller may see the workload before knowing it's admitted.
    core.add_workload(workload)
    core.add_admitted(workload, gpu_admission(2), reserved_at=0, admitted=True)
    add(core, "new", created=1)

    assert run_until_quiet(core, now=5)[0].admitted == ()
    assert core.workload_state(key("running")) is WorkloadState.ADMITTED
    # A late "pending" event for an admitted workload doesn't requeue it.
    core.add_workload(workload)
    assert core.workload_state(key("running")) is WorkloadState.ADMITTED
    status = core.cluster_queue_status(CQ)
    assert status is not None and (status.reserving, status.admitted, status.pending) == (1, 1, 1)


def test_admitted_workloads_listed_before_their_queue() -> None:
    core = AdmissionCore()
    workload = make_workload("running").request("nvidia.com/gpu", 2).obj()
    core.add_admitted(workload, gpu_admission(2), reserved_at=0)
    core.upsert_flavor(make_flavor("a100"))
    core.upsert_cluster_queue(
        make_cluster_queue("cq")
        .resource_group(make_flavor_quotas("a100").resource("nvidia.com/gpu", 2).obj())
        .obj()
    )
    core.upsert_local_queue(make_local_queue("lq", "default", "cq"))
    add(core, "new", created=1)

    assert core.schedule(now=1).admitted == ()
    status = core.cluster_queue_status(CQ)
    assert status is not None and status.reserving == 1


def test_finish_frees_quota_and_forgets_the_workload() -> None:
    core = core_with(gpus=1)
    add(core, "a")
    core.schedule(now=1)
    assert core.finish(key("a"))
    assert core.workload_state(key("a")) is None
    assert not core.finish(key("a"))


def test_evict_of_unknown_workload_is_a_no_op() -> None:
    core = core_with()
    assert not core.evict(key("ghost"), now=1)
    assert not core.cancel_eviction(key("ghost"))


def test_updating_an_admitted_workload_keeps_its_admission() -> None:
    core = core_with()
    add(core, "a")
    core.schedule(now=1)
    core.add_workload(make_workload("a").request("nvidia.com/gpu", 1).priority(7).obj())
    assert core.admission(key("a")) is not None
    assert core.workload_state(key("a")) is WorkloadState.QUOTA_RESERVED


def test_unchanged_configuration_updates_do_not_wake_queues() -> None:
    core = core_with(gpus=1)
    add(core, "a")
    add(core, "b", created=1)
    run_until_quiet(core, now=1)
    spec = (
        make_cluster_queue("cq")
        .resource_group(make_flavor_quotas("a100").resource("nvidia.com/gpu", 1).obj())
        .obj()
    )

    core.upsert_cluster_queue(spec)

    assert core.schedule(now=2).evaluated == 0


@pytest.mark.parametrize(
    ("wpc", "pod", "expected"),
    [(None, None, 0), (None, 100, 100), (5, 100, 5), (-3, None, -3)],
)
def test_resolve_priority(wpc: int | None, pod: int | None, expected: int) -> None:
    assert (
        resolve_priority(workload_priority_class_value=wpc, pod_priority_class_value=pod)
        == expected
    )


@pytest.mark.parametrize(
    ("resource", "value", "text"),
    [
        ("cpu", 2000, "2"),
        ("cpu", 500, "500m"),
        ("memory", 4 * 2**30, "4Gi"),
        ("memory", 3 * 2**20, "3Mi"),
        ("memory", 1000, "1000"),
        ("nvidia.com/gpu", 3, "3"),
        ("memory", 0, "0"),
    ],
)
def test_quantities_in_messages_read_like_yaml(resource: str, value: int, text: str) -> None:
    assert format_quantity(ResourceName(resource), value) == text


def test_adding_a_queued_workload_again_unchanged_says_nothing_changed() -> None:
    """Every status write of a pending workload (its pending reason) comes back as an event;
    the controller starts a scheduling cycle only when ``add_workload`` says the queue
    changed, so the same workload again must say False, and a real change True."""
    core = core_with(gpus=1)
    workload = make_workload("a").request("nvidia.com/gpu", 1).obj()

    assert core.add_workload(workload) is True
    assert core.add_workload(workload) is False
    assert core.add_workload(make_workload("a").request("nvidia.com/gpu", 1).obj()) is False

    assert core.add_workload(make_workload("a").request("nvidia.com/gpu", 1).priority(5).obj())
    assert core.add_workload(workload, requeue_at=30.0) is True


def test_adding_a_workload_that_holds_quota_again_unchanged_says_nothing_changed() -> None:
    core = core_with(gpus=1)
    workload = make_workload("a").request("nvidia.com/gpu", 1).obj()
    core.add_workload(workload)
    run_until_quiet(core, 0.0)
    assert core.workload_state(key("a")) is WorkloadState.QUOTA_RESERVED

    assert core.add_workload(workload) is False
    assert core.add_workload(make_workload("a").request("nvidia.com/gpu", 1).priority(9).obj())
