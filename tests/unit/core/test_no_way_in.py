"""A queue's next head of the same shape and priority, in a cohort tree where nothing
changed, gets the last head's answer ("no way in") without a nomination: BestEffortFIFO
walks a queue's whole backlog after every release, one head per cycle, and most of a
backlog is a few shapes (in upstream's scheduler benchmark, three). Anything a nomination
reads that changes must make the next head be nominated afresh; these are the changes the
random property test (``test_properties``) meets too rarely to be sure of."""

from __future__ import annotations

from dataclasses import replace

from manager.core import AdmissionCore, PreemptionPolicy

from .builders import admitted_keys, key, make_flavor, make_workload, run_until_quiet
from .test_preemption_claims import add, cohort_core, victims


def nominations(core: AdmissionCore) -> int:
    """How many heads were nominated afresh so far (the rest were remembered)."""
    return core.heads_nominated


def full_queue_with_a_backlog() -> AdmissionCore:
    """``a`` (2 cpus, LowerPriority) full with two priority-5 workloads, and a backlog of
    six 1-cpu priority-3 workloads that can neither fit nor preempt."""
    core = cohort_core({"a": 2})
    for i in range(2):
        add(core, "a", f"held-{i}", 1, 5, at=i)
    assert len([k for r in run_until_quiet(core, now=2) for k in admitted_keys(r)]) == 2
    for i in range(6):
        add(core, "a", f"waiting-{i}", 1, 3, at=10 + i)
    return core


def test_a_backlog_of_one_shape_is_nominated_once_while_nothing_changes() -> None:
    core = full_queue_with_a_backlog()
    before = nominations(core)

    results = run_until_quiet(core, now=20)

    assert [k for r in results for k in admitted_keys(r)] == []
    assert sum(r.evaluated for r in results) == 6, "every head is still evaluated"
    assert nominations(core) - before == 1, "but only the first one afresh"
    for i in range(6):
        reason = core.pending_reason(key(f"waiting-{i}", "a"))
        assert reason is not None and "insufficient unused quota" in reason.message


def test_a_release_in_the_tree_makes_the_next_head_ask_again() -> None:
    core = full_queue_with_a_backlog()
    run_until_quiet(core, now=20)

    assert core.finish(key("held-0", "a"))
    results = run_until_quiet(core, now=21)

    assert [k for r in results for k in admitted_keys(r)] == ["a/waiting-0"]


def test_a_lowered_priority_of_a_held_workload_makes_it_a_victim_at_once() -> None:
    """A held workload's WorkloadPriorityClass drops below the backlog's: the next head
    preempts it, though the remembered answer (no victims) was given in the same tree."""
    core = full_queue_with_a_backlog()
    run_until_quiet(core, now=20)  # every waiting head set aside, answer remembered
    held = make_workload("held-1", "a").queue("lq").request("cpu", 1).priority(5)
    core.add_workload(replace(held.created(1).uid("uid-held-1").obj(), priority=1))
    add(core, "a", "waiting-late", 1, 3, at=30)  # a new head: evaluated in this tree

    result = core.schedule(now=31)

    assert victims(result) == ["a/held-1"]


def test_a_raised_quota_makes_the_next_head_ask_again() -> None:
    core = full_queue_with_a_backlog()
    run_until_quiet(core, now=20)
    cq = core._cache.cluster_queues["a"].spec  # type: ignore[index]
    group = cq.resource_groups[0]
    flavor = replace(
        group.flavors[0],
        resources=tuple(replace(r, nominal=r.nominal + 1000) for r in group.flavors[0].resources),
    )
    core.upsert_cluster_queue(replace(cq, resource_groups=(replace(group, flavors=(flavor,)),)))

    results = run_until_quiet(core, now=21)

    assert [k for r in results for k in admitted_keys(r)] == ["a/waiting-0"]


def test_a_new_flavor_is_configuration_too() -> None:
    core = full_queue_with_a_backlog()
    version = core._cache.config_version
    core.upsert_flavor(make_flavor("spare"))
    assert core._cache.config_version > version


def test_lower_or_newer_equal_priority_compares_queue_times_so_nothing_is_remembered() -> None:
    """Under LowerOrNewerEqualPriority the answer depends on when each head was queued:
    the same shape and priority is not the same question."""
    core = cohort_core({"a": 2}, within=PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY)
    for i in range(2):
        add(core, "a", f"held-{i}", 1, 5, at=i)
    run_until_quiet(core, now=2)
    for i in range(3):
        add(core, "a", f"waiting-{i}", 1, 3, at=10 + i)
    before = nominations(core)

    run_until_quiet(core, now=20)

    assert nominations(core) - before == 3
