"""Fair sharing by weight inside a cohort: share, ordering and InCohortFairSharing preemption."""

from __future__ import annotations

import math

from manager.core import (
    AdmissionCore,
    ClusterQueueName,
    FairSharingConfig,
    PreemptionPolicy,
    PreemptionReason,
)

from .builders import (
    admitted_keys,
    all_victims,
    make_cluster_queue,
    make_flavor,
    make_flavor_quotas,
    make_local_queue,
    make_workload,
    run_until_quiet,
)


def fair_core(
    weights: dict[str, float],
    *,
    nominal: int = 2,
    reclaim: PreemptionPolicy = PreemptionPolicy.NEVER,
) -> AdmissionCore:
    core = AdmissionCore(fair_sharing=FairSharingConfig())
    core.upsert_flavor(make_flavor("a100"))
    for name, weight in weights.items():
        core.upsert_cluster_queue(
            make_cluster_queue(name)
            .cohort("co")
            .weight(weight)
            .resource_group(make_flavor_quotas("a100").resource("nvidia.com/gpu", nominal).obj())
            .preemption(reclaim=reclaim)
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


def share(core: AdmissionCore, name: str) -> float:
    status = core.cluster_queue_status(ClusterQueueName(name))
    assert status is not None
    return status.weighted_share


def test_share_is_borrowed_over_lendable_divided_by_weight() -> None:
    core = fair_core({"a": 1.0, "b": 2.0, "idle": 1.0})
    add(core, "a1", "a", 3)
    add(core, "b1", "b", 3)
    run_until_quiet(core, now=1)

    # Each borrows 1 of the cohort's 6 lendable GPUs: 1000/6 per unit of weight.
    assert math.isclose(share(core, "a"), 1000 / 6)
    assert math.isclose(share(core, "b"), 1000 / 6 / 2)
    assert share(core, "idle") == 0.0


def test_zero_weight_borrowing_has_infinite_share() -> None:
    core = fair_core({"a": 0.0, "b": 1.0})
    add(core, "a1", "a", 3)
    run_until_quiet(core, now=1)
    assert share(core, "a") == math.inf


def test_lowest_resulting_share_is_admitted_first() -> None:
    core = fair_core({"heavy": 1.0, "light": 1.0, "lender": 1.0})
    add(core, "heavy-1", "heavy", 3)
    run_until_quiet(core, now=1)  # heavy now borrows 1
    add(core, "heavy-2", "heavy", 1, created=2, priority=10)
    add(core, "light-1", "light", 3, created=3)

    # Both want to borrow the last spare GPU; light's share after admission is lower.
    assert admitted_keys(core.schedule(now=4)) == ["default/light-1"]


def test_fair_sharing_preemption_takes_from_the_biggest_borrower() -> None:
    core = fair_core({"greedy": 1.0, "modest": 1.0}, reclaim=PreemptionPolicy.ANY)
    for at, (name, gpus) in enumerate((("g1", 2), ("g2", 1), ("g3", 1))):
        add(core, name, "greedy", gpus, created=at)
        run_until_quiet(core, now=at)  # greedy ends up using 4: its 2 plus modest's 2
    add(core, "m1", "modest", 2, created=4)

    victims = all_victims([core.schedule(now=5)])

    # Most recently admitted first; two 1-GPU workloads are enough.
    assert victims == [
        ("default/g3", PreemptionReason.IN_COHORT_FAIR_SHARING),
        ("default/g2", PreemptionReason.IN_COHORT_FAIR_SHARING),
    ]


def test_fair_sharing_preemption_between_two_borrowers() -> None:
    # 6 GPUs in the cohort. b borrows 2; a would borrow 1 to run a2: a's share after
    # (1/6) is not above b's share after losing one GPU (1/6), so a may take one from b.
    core = fair_core({"a": 1.0, "b": 1.0, "lender": 1.0}, nominal=2, reclaim=PreemptionPolicy.ANY)
    for at, (name, queue, gpus) in enumerate(
        (("b1", "b", 2), ("b2", "b", 1), ("b3", "b", 1), ("a1", "a", 1))
    ):
        add(core, name, queue, gpus, created=at)
        run_until_quiet(core, now=at)
    add(core, "a2", "a", 2, created=6)

    victims = all_victims([core.schedule(now=7)])

    assert victims == [("default/b3", PreemptionReason.IN_COHORT_FAIR_SHARING)]


def test_fair_sharing_does_not_preempt_to_become_the_bigger_borrower() -> None:
    core = fair_core({"a": 1.0, "b": 1.0, "lender": 1.0}, nominal=2, reclaim=PreemptionPolicy.ANY)
    for at, (name, queue, gpus) in enumerate((("b1", "b", 2), ("b2", "b", 1), ("a1", "a", 2))):
        add(core, name, queue, gpus, created=at)
        run_until_quiet(core, now=at)
    # b borrows 1; a wants to borrow 2 more: its share would exceed b's.
    add(core, "a2", "a", 2, created=6)

    assert all_victims([core.schedule(now=7)]) == []
