"""Cohorts: borrowing, borrowing and lending limits, hierarchy, ordering within a cycle."""

from __future__ import annotations

from manager.core import AdmissionCore, ClusterQueueName, FlavorName, PendingKind, ResourceName

from .builders import (
    admitted_keys,
    all_admitted,
    key,
    make_cluster_queue,
    make_cohort,
    make_flavor,
    make_flavor_quotas,
    make_local_queue,
    make_workload,
    run_until_quiet,
)


def cohort_core(
    *queues: tuple[str, int, int | None, int | None], cohort: str = "co"
) -> AdmissionCore:
    """Queues as (name, nominal, borrowing limit, lending limit) GPUs; LocalQueue ``<name>``."""
    core = AdmissionCore()
    core.upsert_flavor(make_flavor("a100"))
    for name, nominal, borrowing, lending in queues:
        core.upsert_cluster_queue(
            make_cluster_queue(name)
            .cohort(cohort)
            .resource_group(
                make_flavor_quotas("a100")
                .resource("nvidia.com/gpu", nominal, borrowing, lending)
                .obj()
            )
            .obj()
        )
        core.upsert_local_queue(make_local_queue(name, "default", name))
    return core


def add(
    core: AdmissionCore,
    name: str,
    queue: str,
    gpus: int,
    *,
    created: float = 0.0,
    priority: int = 0,
) -> None:
    core.add_workload(
        make_workload(name)
        .queue(queue)
        .request("nvidia.com/gpu", gpus)
        .created(created)
        .priority(priority)
        .obj()
    )


def test_borrowing_unused_quota_of_the_cohort() -> None:
    core = cohort_core(("a", 2, None, None), ("b", 2, None, None))
    add(core, "wide", "a", 3)

    (admit,) = core.schedule(now=1).admitted

    assert (admit.workload, admit.borrowing) == ("default/wide", True)
    status = core.cluster_queue_status(ClusterQueueName("a"))
    assert status is not None
    (gpu,) = status.flavors_reservation[0].resources
    assert (gpu.total, gpu.borrowed) == (3, 1)


def test_borrowing_limit_is_respected() -> None:
    core = cohort_core(("a", 2, 1, None), ("b", 4, None, None))
    add(core, "too-wide", "a", 4)
    add(core, "fits", "a", 3, created=1)

    assert all_admitted(run_until_quiet(core, now=1)) == ["default/fits"]
    reason = core.pending_reason(key("too-wide"))
    assert reason is not None and reason.kind is PendingKind.EXCEEDS_MAX_QUOTA
    assert "can get at most 3" in reason.message


def test_lending_limit_keeps_quota_for_its_owner() -> None:
    core = cohort_core(("a", 0, None, None), ("b", 4, None, 1))
    add(core, "borrower", "a", 2)
    add(core, "small-borrower", "a", 1, created=1)

    assert all_admitted(run_until_quiet(core, now=1)) == ["default/small-borrower"]
    add(core, "owner", "b", 3)
    assert all_admitted(run_until_quiet(core, now=2)) == ["default/owner"]


def test_non_borrowing_workloads_go_first_in_a_cycle() -> None:
    core = cohort_core(("a", 1, None, None), ("b", 1, None, None))
    add(core, "a-borrows", "a", 2, created=0, priority=100)
    add(core, "b-own", "b", 1, created=5)

    result = core.schedule(now=1)

    # Both heads were nominated against the same snapshot; b's fits its nominal quota and
    # is admitted first, after which a's no longer fits and is retried next cycle.
    assert admitted_keys(result) == ["default/b-own"]
    reason = core.pending_reason(key("a-borrows"))
    assert reason is not None and reason.kind is PendingKind.RETRY
    assert admitted_keys(core.schedule(now=2)) == []
    reason = core.pending_reason(key("a-borrows"))
    assert reason is not None and reason.kind is PendingKind.WAITING_FOR_QUOTA


def test_hierarchical_cohorts_lend_through_the_tree() -> None:
    core = AdmissionCore()
    core.upsert_flavor(make_flavor("a100"))
    core.upsert_cohort(make_cohort("left", "root"))
    core.upsert_cohort(make_cohort("right", "root"))
    core.upsert_cohort(
        make_cohort("root", None, make_flavor_quotas("a100").resource("nvidia.com/gpu", 2).obj())
    )
    for name, cohort in (("a", "left"), ("b", "right")):
        core.upsert_cluster_queue(
            make_cluster_queue(name)
            .cohort(cohort)
            .resource_group(make_flavor_quotas("a100").resource("nvidia.com/gpu", 1).obj())
            .obj()
        )
        core.upsert_local_queue(make_local_queue(name, "default", name))
    add(core, "big", "a", 4)

    assert admitted_keys(core.schedule(now=1)) == ["default/big"]
    add(core, "next", "b", 1, created=1)
    core.schedule(now=2)
    reason = core.pending_reason(key("next"))
    assert reason is not None and reason.kind is PendingKind.WAITING_FOR_QUOTA


def test_removing_a_lender_shrinks_what_can_be_borrowed() -> None:
    core = cohort_core(("a", 1, None, None), ("b", 2, None, None))
    core.delete_cluster_queue(ClusterQueueName("b"))
    add(core, "wide", "a", 2)
    core.schedule(now=1)
    reason = core.pending_reason(key("wide"))
    assert reason is not None and reason.kind is PendingKind.EXCEEDS_MAX_QUOTA


def test_admitted_usage_survives_queue_deletion_and_recreation() -> None:
    core = cohort_core(("a", 2, None, None))
    add(core, "running", "a", 2)
    core.schedule(now=1)

    core.delete_cluster_queue(ClusterQueueName("a"))
    core.upsert_cluster_queue(
        make_cluster_queue("a")
        .cohort("co")
        .resource_group(make_flavor_quotas("a100").resource("nvidia.com/gpu", 2).obj())
        .obj()
    )
    add(core, "next", "a", 1, created=1)

    assert admitted_keys(core.schedule(now=2)) == []
    status = core.cluster_queue_status(ClusterQueueName("a"))
    assert status is not None and status.reserving == 1
    usage = {(f.name, r.name): r.total for f in status.flavors_reservation for r in f.resources}
    assert usage[(FlavorName("a100"), ResourceName("nvidia.com/gpu"))] == 2


def test_cohort_cycle_makes_member_queues_inactive() -> None:
    core = cohort_core(("a", 1, None, None), cohort="x")
    core.upsert_cohort(make_cohort("x", "y"))
    core.upsert_cohort(make_cohort("y", "x"))
    status = core.cluster_queue_status(ClusterQueueName("a"))
    assert status is not None and not status.active and status.reason == "CohortCycle"

    core.upsert_cohort(make_cohort("y", None))
    status = core.cluster_queue_status(ClusterQueueName("a"))
    assert status is not None and status.active
