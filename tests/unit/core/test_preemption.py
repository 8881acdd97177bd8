"""Preemption: within the ClusterQueue, reclaiming in the cohort, borrowWithinCohort."""

from __future__ import annotations

import pytest

from manager.core import (
    AdmissionCore,
    BorrowWithinCohortPolicy,
    PendingKind,
    PreemptionPolicy,
    PreemptionReason,
)

from .builders import (
    admitted_keys,
    all_victims,
    key,
    make_cluster_queue,
    make_flavor,
    make_flavor_quotas,
    make_local_queue,
    make_workload,
    run_until_quiet,
)


def queue_core(
    gpus: int,
    *,
    within: PreemptionPolicy = PreemptionPolicy.NEVER,
    reclaim: PreemptionPolicy = PreemptionPolicy.NEVER,
    borrow: BorrowWithinCohortPolicy = BorrowWithinCohortPolicy.NEVER,
    threshold: int | None = None,
    cohort_peer_gpus: int | None = None,
) -> AdmissionCore:
    """CQ ``cq`` (LocalQueue ``lq``), and optionally ``peer`` (LocalQueue ``peer``) in ``co``."""
    core = AdmissionCore()
    core.upsert_flavor(make_flavor("a100"))
    builder = (
        make_cluster_queue("cq")
        .resource_group(make_flavor_quotas("a100").resource("nvidia.com/gpu", gpus).obj())
        .preemption(
            within=within,
            reclaim=reclaim,
            borrow_within_cohort=borrow,
            max_priority_threshold=threshold,
        )
    )
    if cohort_peer_gpus is not None:
        builder = builder.cohort("co")
        core.upsert_cluster_queue(
            make_cluster_queue("peer")
            .cohort("co")
            .resource_group(
                make_flavor_quotas("a100").resource("nvidia.com/gpu", cohort_peer_gpus).obj()
            )
            .obj()
        )
        core.upsert_local_queue(make_local_queue("peer", "default", "peer"))
    core.upsert_cluster_queue(builder.obj())
    core.upsert_local_queue(make_local_queue("lq", "default", "cq"))
    return core


def admit(
    core: AdmissionCore,
    name: str,
    gpus: int,
    *,
    queue: str = "lq",
    priority: int = 0,
    at: float = 0.0,
) -> None:
    """Add a workload and run cycles until it is admitted."""
    core.add_workload(
        make_workload(name)
        .queue(queue)
        .request("nvidia.com/gpu", gpus)
        .priority(priority)
        .created(at)
        .obj()
    )
    assert f"default/{name}" in [a for r in run_until_quiet(core, now=at) for a in admitted_keys(r)]


def submit(
    core: AdmissionCore,
    name: str,
    gpus: int,
    *,
    queue: str = "lq",
    priority: int = 0,
    at: float = 0.0,
) -> None:
    core.add_workload(
        make_workload(name)
        .queue(queue)
        .request("nvidia.com/gpu", gpus)
        .priority(priority)
        .created(at)
        .uid(f"uid-{name}")
        .obj()
    )


def test_higher_priority_preempts_lower_in_the_same_queue() -> None:
    core = queue_core(2, within=PreemptionPolicy.LOWER_PRIORITY)
    admit(core, "low", 2, priority=0)
    submit(core, "high", 2, priority=10, at=1)

    result = core.schedule(now=2)

    assert result.admitted == ()
    (preempt,) = result.preempted
    assert preempt.preemptor == "default/high"
    (victim,) = preempt.victims
    assert (victim.workload, victim.reason) == ("default/low", PreemptionReason.IN_CLUSTER_QUEUE)
    assert victim.message == (
        "Preempted to accommodate a workload (UID: uid-high) "
        "due to prioritization in the ClusterQueue"
    )
    reason = core.pending_reason(key("high"))
    assert reason is not None and reason.kind is PendingKind.WAITING_FOR_PREEMPTION

    # The controller evicts the victim; the preemptor gets in, the victim waits.
    core.evict(key("low"), now=3)
    assert admitted_keys(core.schedule(now=3)) == ["default/high"]


def test_never_policy_does_not_preempt() -> None:
    core = queue_core(2)
    admit(core, "low", 2)
    submit(core, "high", 2, priority=10, at=1)
    result = core.schedule(now=2)
    assert (result.admitted, result.preempted) == ((), ())
    reason = core.pending_reason(key("high"))
    assert reason is not None and reason.kind is PendingKind.WAITING_FOR_QUOTA


@pytest.mark.parametrize(
    ("victim_created", "preempted"),
    [(5.0, True), (0.5, False)],
)
def test_lower_or_newer_equal_priority(victim_created: float, preempted: bool) -> None:
    core = queue_core(1, within=PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY)
    admit(core, "running", 1, at=victim_created)
    submit(core, "waiting", 1, at=1.0)
    result = core.schedule(now=10)
    assert bool(result.preempted) is preempted


def test_minimal_set_lowest_priority_then_most_recent() -> None:
    core = queue_core(4, within=PreemptionPolicy.LOWER_PRIORITY)
    admit(core, "p1-old", 1, priority=1, at=1)
    admit(core, "p1-new", 1, priority=1, at=2)
    admit(core, "p0", 1, priority=0, at=3)
    admit(core, "p5", 1, priority=5, at=4)
    submit(core, "urgent", 2, priority=9, at=5)

    victims = all_victims([core.schedule(now=6)])

    assert [v for v, _ in victims] == ["default/p0", "default/p1-new"]


def test_victims_are_put_back_when_not_needed() -> None:
    core = queue_core(3, within=PreemptionPolicy.LOWER_PRIORITY)
    admit(core, "small", 1, priority=0, at=1)
    admit(core, "big", 2, priority=1, at=2)
    submit(core, "urgent", 2, priority=9, at=3)

    # small goes first (lowest priority) but isn't enough; big alone is.
    assert [v for v, _ in all_victims([core.schedule(now=4)])] == ["default/big"]


def test_preemption_is_issued_once_while_victims_are_evicted() -> None:
    core = queue_core(1, within=PreemptionPolicy.LOWER_PRIORITY)
    admit(core, "low", 1)
    submit(core, "high", 1, priority=5, at=1)
    assert all_victims([core.schedule(now=2)]) == [
        ("default/low", PreemptionReason.IN_CLUSTER_QUEUE)
    ]

    # Something unrelated wakes the queue: no second Preempt for the same victim.
    submit(core, "higher", 1, priority=6, at=2)
    result = core.schedule(now=3)
    assert result.preempted == ()
    reason = core.pending_reason(key("higher"))
    assert reason is not None and reason.kind is PendingKind.WAITING_FOR_PREEMPTION


def test_cancelled_eviction_is_retried() -> None:
    core = queue_core(1, within=PreemptionPolicy.LOWER_PRIORITY)
    admit(core, "low", 1)
    submit(core, "high", 1, priority=5, at=1)
    core.schedule(now=2)

    assert core.cancel_eviction(key("low"))

    assert all_victims([core.schedule(now=3)]) == [
        ("default/low", PreemptionReason.IN_CLUSTER_QUEUE)
    ]


def test_reclaim_within_cohort_takes_back_lent_quota() -> None:
    core = queue_core(2, reclaim=PreemptionPolicy.LOWER_PRIORITY, cohort_peer_gpus=0)
    admit(core, "borrower", 2, queue="peer", priority=0)
    submit(core, "owner", 2, priority=1, at=1)

    assert all_victims([core.schedule(now=2)]) == [
        ("default/borrower", PreemptionReason.IN_COHORT_RECLAMATION)
    ]


@pytest.mark.parametrize(
    ("policy", "borrower_priority", "reclaims"),
    [
        (PreemptionPolicy.NEVER, 0, False),
        (PreemptionPolicy.LOWER_PRIORITY, 0, True),
        (PreemptionPolicy.LOWER_PRIORITY, 5, False),
        (PreemptionPolicy.ANY, 5, True),
    ],
)
def test_reclaim_policy(policy: PreemptionPolicy, borrower_priority: int, reclaims: bool) -> None:
    core = queue_core(2, reclaim=policy, cohort_peer_gpus=0)
    admit(core, "borrower", 2, queue="peer", priority=borrower_priority)
    submit(core, "owner", 2, priority=1, at=1)
    assert bool(all_victims([core.schedule(now=2)])) is reclaims


def test_queues_within_nominal_are_never_reclaimed_from() -> None:
    core = queue_core(1, reclaim=PreemptionPolicy.ANY, cohort_peer_gpus=1)
    admit(core, "peer-own", 1, queue="peer")
    admit(core, "mine", 1, at=1)
    submit(core, "more", 1, priority=9, at=2)

    result = core.schedule(now=3)

    assert result.preempted == ()


@pytest.mark.parametrize(
    ("threshold", "reason"),
    [
        (None, PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING),
        (0, PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING),
        (-1, None),  # the borrower's priority 0 is above the threshold
    ],
)
def test_borrow_within_cohort(threshold: int | None, reason: PreemptionReason | None) -> None:
    # cq owns 1 GPU but wants 2 (so it must borrow); peer owns 1 and borrows cq's.
    core = queue_core(
        1,
        reclaim=PreemptionPolicy.LOWER_PRIORITY,
        borrow=BorrowWithinCohortPolicy.LOWER_PRIORITY,
        threshold=threshold,
        cohort_peer_gpus=1,
    )
    admit(core, "peer-wide", 2, queue="peer", priority=0)
    submit(core, "wide", 2, priority=5, at=1)

    victims = all_victims([core.schedule(now=2)])

    assert victims == ([] if reason is None else [("default/peer-wide", reason)])


def test_overlapping_targets_in_one_cycle_go_to_one_preemptor() -> None:
    core = AdmissionCore()
    core.upsert_flavor(make_flavor("a100"))
    for name, gpus in (("a", 1), ("b", 1), ("lender", 0)):
        core.upsert_cluster_queue(
            make_cluster_queue(name)
            .cohort("co")
            .resource_group(make_flavor_quotas("a100").resource("nvidia.com/gpu", gpus).obj())
            .preemption(reclaim=PreemptionPolicy.ANY)
            .obj()
        )
        core.upsert_local_queue(make_local_queue(name, "default", name))
    admit(core, "borrower", 2, queue="lender")
    submit(core, "a-job", 1, queue="a", at=1)
    submit(core, "b-job", 1, queue="b", at=2)

    result = core.schedule(now=3)

    assert [p.preemptor for p in result.preempted] == ["default/a-job"]
    reason = core.pending_reason(key("b-job"))
    assert reason is not None and reason.kind is PendingKind.RETRY
