"""A preemptor's claim on the quota it is freeing: kept across cycles while its victims go
(Kueue's sticky head), and counted within a cycle (Kueue's ``fits`` in ``schedule``), so
that no other queue's workload takes that quota and forces a second round of evictions.

Named after upstream's cases where one exists (pkg/scheduler/scheduler_test.go,
TestSchedule, Kueue v0.17.0)."""

from __future__ import annotations

from manager.core import (
    AdmissionCore,
    BorrowWithinCohortPolicy,
    CycleResult,
    PendingKind,
    PreemptionPolicy,
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


def cohort_core(
    quotas: dict[str, int],
    *,
    within: PreemptionPolicy = PreemptionPolicy.LOWER_PRIORITY,
    reclaim: PreemptionPolicy = PreemptionPolicy.NEVER,
    borrow: BorrowWithinCohortPolicy = BorrowWithinCohortPolicy.NEVER,
    plain: tuple[str, ...] = (),
) -> AdmissionCore:
    """One ClusterQueue per entry of ``quotas`` (cpu), all in cohort ``co``, each with a
    LocalQueue ``lq`` in the namespace of its own name; those in ``plain`` never preempt."""
    core = AdmissionCore()
    core.upsert_flavor(make_flavor("default"))
    for name, cpus in quotas.items():
        builder = (
            make_cluster_queue(name)
            .cohort("co")
            .resource_group(make_flavor_quotas("default").resource("cpu", cpus).obj())
        )
        if name not in plain:
            builder = builder.preemption(
                within=within, reclaim=reclaim, borrow_within_cohort=borrow
            )
        core.upsert_cluster_queue(builder.obj())
        core.upsert_local_queue(make_local_queue("lq", name, name))
        core.set_namespace_labels(name, {})  # type: ignore[arg-type]
    return core


def add(core: AdmissionCore, queue: str, name: str, cpus: int, priority: int, at: float) -> None:
    core.add_workload(
        make_workload(name, queue)
        .queue("lq")
        .request("cpu", cpus)
        .priority(priority)
        .created(at)
        .uid(f"uid-{name}")
        .obj()
    )


def admit(core: AdmissionCore, queue: str, name: str, cpus: int, priority: int, at: float) -> None:
    add(core, queue, name, cpus, priority, at)
    admitted = [a for r in run_until_quiet(core, now=at) for a in admitted_keys(r)]
    assert f"{queue}/{name}" in admitted


def victims(result: CycleResult) -> list[str]:
    return [v.workload for p in result.preempted for v in p.victims]


def test_preempting_head_keeps_its_claim_across_cycles() -> None:
    """b borrows 4 of a's cpus with eight 1-cpu workloads; a's 4-cpu workload reclaims
    them. While the four victims go, a workload of b (one of the victims, requeued, or a
    new one) must not borrow the quota a is waiting for: it would be preempted again."""
    core = cohort_core({"a": 4, "b": 4}, reclaim=PreemptionPolicy.ANY)
    for i in range(8):
        admit(core, "b", f"medium-{i}", 1, 100, at=i)
    add(core, "a", "large", 4, 200, at=10)

    first = victims(core.schedule(now=11))
    assert len(first) == 4

    # One victim has gone (released, requeued in b); the others are still going.
    assert core.evict(key(first[0].split("/")[1], "b"), now=12)
    second = core.schedule(now=12)
    # A new workload arrives in b: a cycle starts without a's queue among the ready ones.
    add(core, "b", "medium-new", 1, 100, at=13)
    third = core.schedule(now=13)

    for result in (second, third):
        assert admitted_keys(result) == []
        assert victims(result) == []
    # b's head, the requeued victim, was evaluated and held back.
    reason = core.pending_reason(key(first[0].split("/")[1], "b"))
    assert reason is not None and reason.kind is PendingKind.RETRY

    for victim in first[1:]:
        assert core.evict(key(victim.split("/")[1], "b"), now=14)
    results = run_until_quiet(core, now=14)
    assert admitted_keys(results[0]) == ["a/large"]
    assert [v for r in results for v in victims(r)] == []


def test_a_preempting_head_alone_starts_no_cycle() -> None:
    """The held head is evaluated alongside other heads of its cohort, never on its own:
    nothing can change for it until a victim is released, which wakes its queue."""
    core = cohort_core({"a": 2, "b": 2}, reclaim=PreemptionPolicy.ANY)
    for i in range(4):
        admit(core, "b", f"w-{i}", 1, 0, at=i)
    add(core, "a", "big", 2, 10, at=5)

    result = core.schedule(now=6)

    assert len(victims(result)) == 2
    assert not result.more
    assert core.schedule(now=7).evaluated == 0


def test_multiple_preemptions_skip_preemption_when_shared_limited_resource() -> None:
    """Upstream's case: both preemptors could free their own queue, but the cohort has room
    for one of them only; the second is skipped ("no longer fits after processing another
    workload") instead of evicting a workload for nothing."""
    core = cohort_core(
        {"other-alpha": 2, "other-beta": 2, "resource-bank": 1},
        borrow=BorrowWithinCohortPolicy.LOWER_PRIORITY,
        plain=("resource-bank",),
    )
    admit(core, "other-alpha", "a1", 2, 0, at=0)
    admit(core, "other-beta", "b1", 2, 0, at=0)
    add(core, "other-alpha", "preemptor", 3, 100, at=1)
    add(core, "other-beta", "pretending-preemptor", 3, 99, at=1)

    result = core.schedule(now=10)

    assert [(p.preemptor, [v.workload for v in p.victims]) for p in result.preempted] == [
        ("other-alpha/preemptor", ["other-alpha/a1"])
    ]
    reason = core.pending_reason(key("pretending-preemptor", "other-beta"))
    assert reason is not None and reason.kind is PendingKind.RETRY
    assert "no longer fits after processing another workload" in reason.message


def test_multiple_preemptions_preemption_possible_after_earlier_workload_fits() -> None:
    """Upstream's case: a workload that fits is admitted first; the preemptor after it
    still fits once its victim is gone, and preempts."""
    core = cohort_core({"other-alpha": 1, "other-beta": 2})
    admit(core, "other-beta", "b1", 2, 0, at=0)
    add(core, "other-alpha", "fit", 1, 100, at=1)
    add(core, "other-beta", "preemptor", 2, 99, at=1)

    result = core.schedule(now=10)

    assert admitted_keys(result) == ["other-alpha/fit"]
    assert victims(result) == ["other-beta/b1"]


def test_a_preemptors_claim_ends_with_its_cycle() -> None:
    """The usage a preemptor claims for the rest of its cycle is taken out of the quota tree
    when the cycle ends: once everything has finished, the whole cohort is free again."""
    core = cohort_core({"a": 2, "b": 2}, reclaim=PreemptionPolicy.ANY)
    for i in range(4):
        admit(core, "b", f"w-{i}", 1, 0, at=i)
    add(core, "a", "big", 2, 10, at=5)
    chosen = victims(core.schedule(now=6))
    core.schedule(now=6.5)  # the held head is evaluated again alongside b's queue
    for victim in chosen:
        core.delete_workload(key(victim.split("/")[1], "b"))
        assert not core.evict(key(victim.split("/")[1], "b"), now=7)
    assert admitted_keys(run_until_quiet(core, now=8)[0]) == ["a/big"]
    for name, queue in (("big", "a"), ("w-0", "b"), ("w-1", "b")):
        assert core.finish(key(name, queue))

    admit(core, "b", "whole-cohort", 4, 0, at=9)
