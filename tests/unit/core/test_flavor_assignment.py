"""Flavor assignment: flavor order, node selection, taints, fungibility, groups and gangs."""

from __future__ import annotations

import pytest

from manager.core import (
    AdmissionCore,
    ClusterQueueName,
    CycleResult,
    FlavorFungibility,
    FlavorName,
    FungibilityPolicy,
    FungibilityPreference,
    NodeSelectorTerm,
    Operator,
    PendingKind,
    PreemptionPolicy,
    Requirement,
    Toleration,
    TolerationOperator,
    Workload,
)

from .builders import (
    admitted_keys,
    key,
    make_cluster_queue,
    make_flavor,
    make_flavor_quotas,
    make_local_queue,
    make_workload,
    no_schedule,
)


def two_flavor_core(
    *,
    first_gpus: int = 2,
    second_gpus: int = 2,
    fungibility: FlavorFungibility | None = None,
    cohort_spare: int = 0,
    within: PreemptionPolicy = PreemptionPolicy.NEVER,
) -> AdmissionCore:
    """CQ ``cq`` with flavors ``spot`` then ``on-demand`` for gpu; optionally a lender."""
    core = AdmissionCore()
    core.upsert_flavor(make_flavor("spot", labels={"capacity": "spot"}))
    core.upsert_flavor(make_flavor("on-demand", labels={"capacity": "on-demand"}))
    builder = (
        make_cluster_queue("cq")
        .resource_group(
            make_flavor_quotas("spot").resource("nvidia.com/gpu", first_gpus).obj(),
            make_flavor_quotas("on-demand").resource("nvidia.com/gpu", second_gpus).obj(),
        )
        .preemption(within=within)
    )
    if fungibility is not None:
        builder = builder.fungibility(fungibility)
    if cohort_spare:
        builder = builder.cohort("co")
        core.upsert_cluster_queue(
            make_cluster_queue("lender")
            .cohort("co")
            .resource_group(
                make_flavor_quotas("spot").resource("nvidia.com/gpu", cohort_spare).obj(),
                make_flavor_quotas("on-demand").resource("nvidia.com/gpu", 0).obj(),
            )
            .obj()
        )
    core.upsert_cluster_queue(builder.obj())
    core.upsert_local_queue(make_local_queue("lq", "default", "cq"))
    return core


def gpus(name: str, count: int, *, created: float = 0.0, priority: int = 0) -> Workload:
    return (
        make_workload(name)
        .request("nvidia.com/gpu", count)
        .created(created)
        .priority(priority)
        .obj()
    )


def flavors_of(result: CycleResult) -> set[str]:
    (admit,) = result.admitted
    return {f for psa in admit.admission.pod_set_assignments for f in psa.flavors.values()}


def test_first_flavor_in_order_is_preferred() -> None:
    core = two_flavor_core()
    core.add_workload(gpus("a", 1))
    assert flavors_of(core.schedule(now=1)) == {"spot"}


def test_next_flavor_when_the_first_is_full() -> None:
    core = two_flavor_core(first_gpus=1)
    core.add_workload(gpus("a", 2))
    assert flavors_of(core.schedule(now=1)) == {"on-demand"}


def test_node_selector_rules_out_flavors() -> None:
    core = two_flavor_core()
    core.add_workload(
        make_workload("a").request("nvidia.com/gpu", 1).node_selector("capacity", "on-demand").obj()
    )
    assert flavors_of(core.schedule(now=1)) == {"on-demand"}


def test_required_node_affinity_rules_out_flavors() -> None:
    core = two_flavor_core()
    term = NodeSelectorTerm((Requirement("capacity", Operator.NOT_IN, ("spot",)),))
    core.add_workload(make_workload("a").request("nvidia.com/gpu", 1).affinity(term).obj())
    assert flavors_of(core.schedule(now=1)) == {"on-demand"}


def test_no_compatible_flavor_is_explained() -> None:
    core = two_flavor_core()
    core.add_workload(
        make_workload("a").request("nvidia.com/gpu", 1).node_selector("capacity", "reserved").obj()
    )

    result = core.schedule(now=1)

    assert not result.admitted
    reason = core.pending_reason(key("a"))
    assert reason is not None
    assert reason.kind is PendingKind.NO_MATCHING_FLAVOR
    assert reason.message == (
        "couldn't assign flavors: flavor spot doesn't match node selector capacity=reserved; "
        "flavor on-demand doesn't match node selector capacity=reserved"
    )


@pytest.mark.parametrize(
    ("tolerations", "flavor"),
    [
        ((), "on-demand"),
        ((Toleration("spot", TolerationOperator.EXISTS),), "spot"),
    ],
)
def test_flavor_taints_need_tolerations(tolerations: tuple[Toleration, ...], flavor: str) -> None:
    core = two_flavor_core()
    core.upsert_flavor(
        make_flavor("spot", labels={"capacity": "spot"}, taints=(no_schedule("spot"),))
    )
    builder = make_workload("a").request("nvidia.com/gpu", 1)
    for toleration in tolerations:
        builder = builder.toleration(toleration)
    core.add_workload(builder.obj())
    assert flavors_of(core.schedule(now=1)) == {flavor}


def test_when_can_borrow_may_stop_search_borrows_in_the_first_flavor() -> None:
    core = two_flavor_core(first_gpus=1, cohort_spare=2)
    core.add_workload(gpus("a", 2))
    result = core.schedule(now=1)
    assert flavors_of(result) == {"spot"}
    assert result.admitted[0].borrowing is True


def test_when_can_borrow_try_next_flavor_prefers_no_borrowing() -> None:
    fungibility = FlavorFungibility(when_can_borrow=FungibilityPolicy.TRY_NEXT_FLAVOR)
    core = two_flavor_core(first_gpus=1, cohort_spare=2, fungibility=fungibility)
    core.add_workload(gpus("a", 2))
    result = core.schedule(now=1)
    assert flavors_of(result) == {"on-demand"}
    assert result.admitted[0].borrowing is False


def test_when_can_preempt_try_next_flavor_avoids_preemption() -> None:
    core = two_flavor_core(first_gpus=1, second_gpus=1, within=PreemptionPolicy.LOWER_PRIORITY)
    core.add_workload(gpus("low", 1, priority=0))
    core.schedule(now=1)  # low takes spot
    core.add_workload(gpus("high", 1, priority=10, created=1))

    result = core.schedule(now=2)

    assert flavors_of(result) == {"on-demand"}
    assert not result.preempted


def test_when_can_preempt_may_stop_search_preempts_in_the_first_flavor() -> None:
    fungibility = FlavorFungibility(when_can_preempt=FungibilityPolicy.MAY_STOP_SEARCH)
    core = two_flavor_core(
        first_gpus=1, second_gpus=1, fungibility=fungibility, within=PreemptionPolicy.LOWER_PRIORITY
    )
    core.add_workload(gpus("low", 1, priority=0))
    core.schedule(now=1)
    core.add_workload(gpus("high", 1, priority=10, created=1))

    result = core.schedule(now=2)

    assert not result.admitted
    assert [v.workload for p in result.preempted for v in p.victims] == ["default/low"]


@pytest.mark.parametrize(
    ("preference", "admitted", "victims"),
    [
        (FungibilityPreference.BORROWING_OVER_PREEMPTION, ["default/high"], []),
        (FungibilityPreference.PREEMPTION_OVER_BORROWING, [], ["default/low"]),
    ],
)
def test_preference_between_borrowing_and_preemption(
    preference: FungibilityPreference, admitted: list[str], victims: list[str]
) -> None:
    fungibility = FlavorFungibility(
        when_can_borrow=FungibilityPolicy.TRY_NEXT_FLAVOR,
        when_can_preempt=FungibilityPolicy.TRY_NEXT_FLAVOR,
        preference=preference,
    )
    # spot: nothing of its own, 2 to borrow; on-demand: 1 of its own, taken by ``low``.
    core = two_flavor_core(
        first_gpus=0,
        second_gpus=1,
        cohort_spare=2,
        fungibility=fungibility,
        within=PreemptionPolicy.LOWER_PRIORITY,
    )
    core.add_workload(
        make_workload("low")
        .request("nvidia.com/gpu", 1)
        .node_selector("capacity", "on-demand")
        .obj()
    )
    core.schedule(now=1)
    core.add_workload(gpus("high", 1, priority=10, created=1))

    result = core.schedule(now=2)

    assert admitted_keys(result) == admitted
    assert [v.workload for p in result.preempted for v in p.victims] == victims


def test_resource_groups_get_flavors_independently() -> None:
    core = AdmissionCore()
    for name in ("cpu-pool", "a100", "h100"):
        core.upsert_flavor(make_flavor(name))
    core.upsert_cluster_queue(
        make_cluster_queue("cq")
        .resource_group(
            make_flavor_quotas("cpu-pool").resource("cpu", "16").resource("memory", "64Gi").obj()
        )
        .resource_group(
            make_flavor_quotas("a100").resource("nvidia.com/gpu", 1).obj(),
            make_flavor_quotas("h100").resource("nvidia.com/gpu", 4).obj(),
        )
        .obj()
    )
    core.upsert_local_queue(make_local_queue("lq", "default", "cq"))
    core.add_workload(
        make_workload("a")
        .request("cpu", "4")
        .request("memory", "8Gi")
        .request("nvidia.com/gpu", 2)
        .obj()
    )

    (admit,) = core.schedule(now=1).admitted

    assert dict(admit.admission.pod_set_assignments[0].flavors) == {
        "cpu": "cpu-pool",
        "memory": "cpu-pool",
        "nvidia.com/gpu": "h100",
    }


def test_pods_resource_counts_pods_when_covered() -> None:
    core = AdmissionCore()
    core.upsert_flavor(make_flavor("default"))
    core.upsert_cluster_queue(
        make_cluster_queue("cq")
        .resource_group(
            make_flavor_quotas("default").resource("cpu", "100").resource("pods", 5).obj()
        )
        .obj()
    )
    core.upsert_local_queue(make_local_queue("lq", "default", "cq"))
    core.add_workload(make_workload("a").count(4).request("cpu", "1").obj())
    core.add_workload(make_workload("b").count(2).request("cpu", "1").created(1).obj())

    assert admitted_keys(core.schedule(now=1)) == ["default/a"]
    assert admitted_keys(core.schedule(now=1)) == []
    reason = core.pending_reason(key("b"))
    assert reason is not None
    assert (
        reason.message
        == "insufficient unused quota for pods in flavor default: 2 requested, 1 available"
    )


def test_gang_all_pod_sets_or_nothing() -> None:
    core = two_flavor_core(first_gpus=4, second_gpus=0)
    core.add_workload(gpus("other", 1))
    core.schedule(now=1)
    job = (
        make_workload("gang")
        .created(1)
        .pod_set("driver")
        .request("nvidia.com/gpu", 2)
        .pod_set("workers", 1)
        .request("nvidia.com/gpu", 2)
        .obj()
    )
    core.add_workload(job)

    result = core.schedule(now=2)

    # Each pod set alone would fit in the 3 free GPUs; together they don't.
    assert not result.admitted
    reason = core.pending_reason(key("gang"))
    assert reason is not None
    assert reason.kind is PendingKind.WAITING_FOR_QUOTA
    assert reason.message.startswith(
        "pod set workers: insufficient unused quota for nvidia.com/gpu in flavor spot: "
        "4 requested, 3 available"
    )
    status = core.cluster_queue_status(ClusterQueueName("cq"))
    assert status is not None and status.reserving == 1


def test_pod_sets_may_land_on_different_flavors() -> None:
    core = two_flavor_core()
    job = (
        make_workload("mixed")
        .pod_set("launcher")
        .request("nvidia.com/gpu", 1)
        .node_selector("capacity", "on-demand")
        .pod_set("workers", 2)
        .request("nvidia.com/gpu", 1)
        .obj()
    )
    core.add_workload(job)

    (admit,) = core.schedule(now=1).admitted

    assert {p.name: set(p.flavors.values()) for p in admit.admission.pod_set_assignments} == {
        "launcher": {"on-demand"},
        "workers": {"spot"},
    }
    assert admit.usage == {
        (FlavorName("on-demand"), "nvidia.com/gpu"): 1,
        (FlavorName("spot"), "nvidia.com/gpu"): 2,
    }


def test_resource_not_covered_by_the_cluster_queue() -> None:
    core = two_flavor_core()
    core.add_workload(make_workload("a").request("example.com/fpga", 1).obj())
    core.schedule(now=1)
    reason = core.pending_reason(key("a"))
    assert reason is not None
    assert reason.kind is PendingKind.NO_MATCHING_FLAVOR
    assert "resource example.com/fpga unavailable in ClusterQueue cq" in reason.message


def test_request_beyond_what_the_queue_can_ever_get() -> None:
    core = two_flavor_core(first_gpus=2, second_gpus=1)
    core.add_workload(gpus("huge", 3))
    core.schedule(now=1)
    reason = core.pending_reason(key("huge"))
    assert reason is not None
    assert reason.kind is PendingKind.EXCEEDS_MAX_QUOTA
    assert (
        "insufficient quota for nvidia.com/gpu in flavor spot: 3 requested, "
        "but ClusterQueue cq can get at most 2" in reason.message
    )


def test_missing_flavor_makes_the_cluster_queue_inactive() -> None:
    core = two_flavor_core()
    core.delete_flavor(FlavorName("on-demand"))
    core.add_workload(gpus("a", 1))

    result = core.schedule(now=1)

    assert not result.admitted
    status = core.cluster_queue_status(ClusterQueueName("cq"))
    assert status is not None and not status.active
    assert (status.reason, status.message) == ("FlavorNotFound", "flavor on-demand not found")
    reason = core.pending_reason(key("a"))
    assert reason is not None
    assert reason.message == "ClusterQueue cq is inactive: flavor on-demand not found"

    core.upsert_flavor(make_flavor("on-demand", labels={"capacity": "on-demand"}))
    assert admitted_keys(core.schedule(now=2)) == ["default/a"]
