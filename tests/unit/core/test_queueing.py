"""Queueing: order, StrictFIFO vs BestEffortFIFO, parking, routing, namespaces, stop policies."""

from __future__ import annotations

from manager.core import (
    AdmissionCore,
    ClusterQueueName,
    EvictionReason,
    LabelSelector,
    Namespace,
    PendingKind,
    StopPolicy,
    local_queue_key,
)

from .builders import (
    admitted_keys,
    all_admitted,
    key,
    make_cluster_queue,
    make_flavor,
    make_flavor_quotas,
    make_local_queue,
    make_workload,
    run_until_quiet,
)

CQ = ClusterQueueName("cq")


def single_queue_core(
    gpus: int = 2, *, strict: bool = False, cohort: str | None = None
) -> AdmissionCore:
    core = AdmissionCore()
    core.upsert_flavor(make_flavor("a100"))
    builder = make_cluster_queue("cq").resource_group(
        make_flavor_quotas("a100").resource("nvidia.com/gpu", gpus).obj()
    )
    if strict:
        builder = builder.strict_fifo()
    if cohort is not None:
        builder = builder.cohort(cohort)
    core.upsert_cluster_queue(builder.obj())
    core.upsert_local_queue(make_local_queue("lq", "default", "cq"))
    return core


def add(
    core: AdmissionCore,
    name: str,
    gpus: int,
    *,
    created: float = 0.0,
    priority: int = 0,
    ns: str = "default",
) -> None:
    core.add_workload(
        make_workload(name, ns)
        .request("nvidia.com/gpu", gpus)
        .created(created)
        .priority(priority)
        .obj()
    )


def test_higher_priority_first_then_older_first() -> None:
    core = single_queue_core(gpus=0)
    add(core, "old-low", 1, created=1, priority=0)
    add(core, "new-low", 1, created=2, priority=0)
    add(core, "new-high", 1, created=3, priority=5)
    core.upsert_cluster_queue(
        make_cluster_queue("cq")
        .resource_group(make_flavor_quotas("a100").resource("nvidia.com/gpu", 3).obj())
        .obj()
    )

    assert all_admitted(run_until_quiet(core, now=10)) == [
        "default/new-high",
        "default/old-low",
        "default/new-low",
    ]


def test_best_effort_fifo_lets_smaller_workloads_past_a_big_head() -> None:
    core = single_queue_core(gpus=2)
    add(core, "big", 3, created=1)
    add(core, "small", 1, created=2)

    assert all_admitted(run_until_quiet(core, now=10)) == ["default/small"]
    reason = core.pending_reason(key("big"))
    assert reason is not None and reason.kind is PendingKind.EXCEEDS_MAX_QUOTA


def test_strict_fifo_never_admits_behind_a_blocked_head() -> None:
    core = single_queue_core(gpus=2, strict=True)
    add(core, "first", 2, created=0)
    run_until_quiet(core, now=1)
    add(core, "head", 2, created=1)
    add(core, "small", 1, created=2)

    assert all_admitted(run_until_quiet(core, now=10)) == []
    reason = core.pending_reason(key("small"))
    assert reason is not None
    assert reason.kind is PendingKind.BLOCKED_BY_HEAD
    assert (
        reason.message
        == "ClusterQueue cq is StrictFIFO and its head default/head can't be admitted yet"
    )

    core.finish(key("first"))
    assert all_admitted(run_until_quiet(core, now=11)) == ["default/head"]


def test_strict_fifo_higher_priority_arrival_goes_first() -> None:
    core = single_queue_core(gpus=2, strict=True)
    add(core, "running", 1)
    run_until_quiet(core, now=1)
    add(core, "blocked", 2, created=1)
    run_until_quiet(core, now=2)
    add(core, "urgent", 1, created=3, priority=10)

    assert all_admitted(run_until_quiet(core, now=3)) == ["default/urgent"]


def test_parked_workloads_are_not_retried_until_something_changes() -> None:
    core = single_queue_core(gpus=1)
    add(core, "running", 1)
    add(core, "waiting", 1, created=1)
    run_until_quiet(core, now=1)

    idle = core.schedule(now=2)
    assert (idle.evaluated, idle.more) == (0, False)

    core.finish(key("running"))
    result = core.schedule(now=3)
    assert (result.evaluated, admitted_keys(result)) == (1, ["default/waiting"])


def test_quota_freed_elsewhere_in_the_cohort_wakes_parked_workloads() -> None:
    core = single_queue_core(gpus=0, cohort="co")
    core.upsert_cluster_queue(
        make_cluster_queue("other")
        .cohort("co")
        .resource_group(make_flavor_quotas("a100").resource("nvidia.com/gpu", 1).obj())
        .obj()
    )
    core.upsert_local_queue(make_local_queue("other-lq", "default", "other"))
    core.add_workload(
        make_workload("lender-job").queue("other-lq").request("nvidia.com/gpu", 1).obj()
    )
    run_until_quiet(core, now=1)
    add(core, "borrower", 1, created=1)
    run_until_quiet(core, now=2)
    assert core.pending_reason(key("borrower")) is not None

    core.finish(key("lender-job"))
    (admit,) = core.schedule(now=3).admitted
    assert (admit.workload, admit.borrowing) == ("default/borrower", True)


def test_local_queue_created_later() -> None:
    core = single_queue_core()
    core.add_workload(make_workload("a", "team").queue("jobs").request("nvidia.com/gpu", 1).obj())
    core.schedule(now=1)
    reason = core.pending_reason(key("a", "team"))
    assert reason is not None and reason.message == "LocalQueue team/jobs doesn't exist"

    core.upsert_local_queue(make_local_queue("jobs", "team", "cq"))
    assert admitted_keys(core.schedule(now=2)) == ["team/a"]


def test_cluster_queue_created_later() -> None:
    core = single_queue_core()
    core.upsert_local_queue(make_local_queue("jobs", "team", "later"))
    core.add_workload(make_workload("a", "team").queue("jobs").request("nvidia.com/gpu", 1).obj())
    result = core.schedule(now=1)
    assert [p.reason.message for p in result.pending] == ["ClusterQueue later doesn't exist"]

    core.upsert_cluster_queue(
        make_cluster_queue("later")
        .resource_group(make_flavor_quotas("a100").resource("nvidia.com/gpu", 1).obj())
        .obj()
    )
    result = core.schedule(now=2)
    assert admitted_keys(result) == ["team/a"]


def test_namespace_selector() -> None:
    core = single_queue_core()
    core.upsert_cluster_queue(
        make_cluster_queue("cq")
        .resource_group(make_flavor_quotas("a100").resource("nvidia.com/gpu", 2).obj())
        .namespace_selector(LabelSelector({"team": "ml"}))
        .obj()
    )
    add(core, "a", 1)

    result = core.schedule(now=1)
    assert not result.admitted
    reason = core.pending_reason(key("a"))
    assert reason is not None
    assert (
        reason.message == "namespace default is not selected by ClusterQueue cq's namespaceSelector"
    )
    assert reason.condition_reason == "Inadmissible"

    core.set_namespace_labels(Namespace("default"), {"team": "ml"})
    assert admitted_keys(core.schedule(now=2)) == ["default/a"]


def test_null_namespace_selector_selects_nothing() -> None:
    core = single_queue_core()
    core.upsert_cluster_queue(
        make_cluster_queue("cq")
        .resource_group(make_flavor_quotas("a100").resource("nvidia.com/gpu", 2).obj())
        .namespace_selector(None)
        .obj()
    )
    add(core, "a", 1)
    core.set_namespace_labels(Namespace("default"), {"anything": "at-all"})
    assert admitted_keys(core.schedule(now=1)) == []


def test_evicted_workload_waits_for_its_requeue_time() -> None:
    core = single_queue_core(gpus=1)
    add(core, "a", 1)
    core.schedule(now=1)

    assert core.evict(key("a"), now=5, requeue_at=65)

    result = core.schedule(now=10)
    assert not result.admitted
    assert result.next_requeue_at == 65
    reason = core.pending_reason(key("a"))
    assert reason is not None and reason.kind is PendingKind.BACKOFF
    assert admitted_keys(core.schedule(now=65)) == ["default/a"]


def test_evicted_workloads_queue_by_eviction_time() -> None:
    core = single_queue_core(gpus=1)
    add(core, "early", 1, created=1)
    core.schedule(now=1)
    add(core, "later", 1, created=2)
    core.schedule(now=2)

    core.evict(key("early"), now=3)

    assert all_admitted(run_until_quiet(core, now=4)) == ["default/later"]


def test_stop_policy_hold_stops_admission_but_keeps_running_workloads() -> None:
    core = single_queue_core(gpus=2)
    add(core, "running", 1)
    core.schedule(now=1)
    core.upsert_cluster_queue(
        make_cluster_queue("cq")
        .resource_group(make_flavor_quotas("a100").resource("nvidia.com/gpu", 2).obj())
        .stop_policy(StopPolicy.HOLD)
        .obj()
    )
    add(core, "new", 1, created=1)

    result = core.schedule(now=2)
    assert (result.admitted, result.evicted) == ((), ())
    status = core.cluster_queue_status(CQ)
    assert status is not None and (status.active, status.reason, status.reserving) == (
        False,
        "Stopped",
        1,
    )
    reason = core.pending_reason(key("new"))
    assert reason is not None and reason.message == "ClusterQueue cq is stopped"

    core.upsert_cluster_queue(
        make_cluster_queue("cq")
        .resource_group(make_flavor_quotas("a100").resource("nvidia.com/gpu", 2).obj())
        .obj()
    )
    assert admitted_keys(core.schedule(now=3)) == ["default/new"]


def test_stop_policy_hold_and_drain_evicts_once() -> None:
    core = single_queue_core(gpus=2)
    add(core, "a", 1)
    add(core, "b", 1, created=1)
    run_until_quiet(core, now=1)
    core.upsert_cluster_queue(
        make_cluster_queue("cq")
        .resource_group(make_flavor_quotas("a100").resource("nvidia.com/gpu", 2).obj())
        .stop_policy(StopPolicy.HOLD_AND_DRAIN)
        .obj()
    )

    result = core.schedule(now=2)
    assert [(e.workload, e.reason) for e in result.evicted] == [
        ("default/a", EvictionReason.CLUSTER_QUEUE_STOPPED),
        ("default/b", EvictionReason.CLUSTER_QUEUE_STOPPED),
    ]
    assert core.schedule(now=3).evicted == ()

    core.evict(key("a"), now=4)
    assert core.pending_reason(key("a")) is not None
    assert admitted_keys(core.schedule(now=5)) == []


def test_local_queue_hold_and_drain() -> None:
    core = single_queue_core(gpus=2)
    core.upsert_local_queue(make_local_queue("other", "default", "cq"))
    add(core, "a", 1)
    core.add_workload(make_workload("b").queue("other").request("nvidia.com/gpu", 1).obj())
    run_until_quiet(core, now=1)

    core.upsert_local_queue(make_local_queue("lq", "default", "cq", StopPolicy.HOLD_AND_DRAIN))
    result = core.schedule(now=2)
    assert [(e.workload, e.reason) for e in result.evicted] == [
        ("default/a", EvictionReason.LOCAL_QUEUE_STOPPED)
    ]

    core.evict(key("a"), now=3)
    core.schedule(now=4)
    reason = core.pending_reason(key("a"))
    assert reason is not None and reason.message == "LocalQueue default/lq is stopped"
    lq_status = core.local_queue_status(local_queue_key("default", "lq"))
    assert lq_status is not None and (lq_status.active, lq_status.pending) == (False, 1)

    core.upsert_local_queue(make_local_queue("lq", "default", "cq"))
    assert admitted_keys(core.schedule(now=5)) == ["default/a"]


def test_updating_priority_reorders_the_queue() -> None:
    core = single_queue_core(gpus=0)
    add(core, "a", 1, created=1)
    add(core, "b", 1, created=2)
    add(core, "b", 1, created=2, priority=3)
    core.upsert_cluster_queue(
        make_cluster_queue("cq")
        .resource_group(make_flavor_quotas("a100").resource("nvidia.com/gpu", 1).obj())
        .obj()
    )

    assert admitted_keys(core.schedule(now=1)) == ["default/b"]


def test_deleted_pending_workload_is_gone() -> None:
    core = single_queue_core()
    add(core, "a", 1)
    core.delete_workload(key("a"))
    assert core.schedule(now=1).admitted == ()
    assert core.pending_reason(key("a")) is None
    status = core.cluster_queue_status(CQ)
    assert status is not None and status.pending == 0


def test_pending_workloads_by_queue_position() -> None:
    core = single_queue_core(gpus=0)
    add(core, "old", 1, created=1)
    add(core, "new", 1, created=2)
    add(core, "urgent", 1, created=3, priority=9)
    core.schedule(now=4)

    assert core.pending_workloads(CQ) == ["default/urgent", "default/old", "default/new"]
    assert core.pending_workloads(CQ, limit=1) == ["default/urgent"]
    assert core.pending_workloads(ClusterQueueName("nope")) == []


def test_a_requeued_workload_takes_its_new_place_not_its_old_one() -> None:
    # Regression: a stale heap entry from the workload's first stay in the queue must
    # not bring it back to its old position.
    core = single_queue_core(gpus=0)
    add(core, "x", 1, created=0)
    add(core, "y", 1, created=1)
    core.delete_workload(key("x"))
    add(core, "x", 1, created=5)
    core.upsert_cluster_queue(
        make_cluster_queue("cq")
        .resource_group(make_flavor_quotas("a100").resource("nvidia.com/gpu", 1).obj())
        .obj()
    )

    assert admitted_keys(core.schedule(now=6)) == ["default/y"]
