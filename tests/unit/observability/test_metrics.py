"""The metrics module: exactly the agreed names and labels, state gauges replaced (never
stale), and one registry per process object."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from manager.kube import instrument
from manager.telemetry.metrics import (
    ClusterQueueSample,
    Metrics,
    QuotaSample,
    WorkerClusterSample,
)

AGREED = {
    "kfed_build_info": {"version", "python_version", "python_implementation", "platform"},
    "kfed_dispatch_latency_seconds": {"cluster"},
    "kfed_failovers_total": {"from_cluster", "reason"},
    "kfed_cluster_active": {"cluster"},
    "kfed_cluster_maintenance": {"cluster", "state"},
    "kfed_cluster_free_capacity": {"cluster", "flavor", "resource"},
    "kfed_remote_objects_created_total": {"cluster", "kind"},
    "kfed_leader": {"identity"},
    "kfed_shim_fenced": {"origin"},
    "kfed_shim_fencing_events_total": {"origin"},
}
"""kfed's own names; upstream's (kueue_*, multikueue_*, controller-runtime's) are checked
against upstream's source in tests/unit/telemetry/test_upstream_metric_names.py."""
HISTOGRAMS = {
    "kueue_quota_reserved_wait_time_seconds",
    "kueue_admission_wait_time_seconds",
    "kueue_admission_attempt_duration_seconds",
    "kfed_dispatch_latency_seconds",
}

GPU = ("h100", "nvidia.com/gpu")
ROLE = {"replica_role": "standalone"}


def queue(name: str = "gpu-cq", **kw: object) -> ClusterQueueSample:
    values: dict[str, object] = {
        "name": name,
        "cohort": "all",
        "status": "active",
        "pending_active": 2,
        "pending_inadmissible": 1,
        "reserving": 3,
        "admitted": 2,
        "quotas": (QuotaSample("h100", "nvidia.com/gpu", nominal=4, usage=2),),
        **kw,
    }
    return ClusterQueueSample(**values)  # type: ignore[arg-type]


def exercise(m: Metrics) -> None:
    """Every recording helper once."""
    m.scheduling_cycle(admitted=1, seconds=0.001)
    m.quota_reserved("gpu-cq", waited=1.5)
    m.admitted("gpu-cq", waited=2.0)
    m.evicted("gpu-cq", "Preempted")
    m.finished("gpu-cq")
    m.remote_object_created("worker-1", "Workload", cluster_queue="gpu-cq")
    m.admitted_remotely("gpu-cq", "worker-1")
    m.dispatch_done("worker-1", 0.4)
    m.failover("worker-1", "lost")
    m.set_leader("replica-a", True)
    m.fencing_started("multikueue")
    m.set_cluster_queues(
        [
            queue(
                quotas=(
                    QuotaSample("h100", "nvidia.com/gpu", nominal=4, usage=2, borrowing_limit=1),
                )
            )
        ]
    )
    m.set_clusters([WorkerClusterSample("worker-1", True, "", {GPU: 3.0})])


def labels_by_name(m: Metrics) -> dict[str, set[str]]:
    """Sample name -> label names, as a scraper reads them (histograms by their family)."""
    text = m.exposition()[0].decode()
    found: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            name = family.name if family.name in HISTOGRAMS else sample.name
            found.setdefault(name, set()).update(k for k in sample.labels if k != "le")
    return found


def test_exactly_the_agreed_names_with_their_labels() -> None:
    m = Metrics()
    exercise(m)
    kfed = {k: v for k, v in labels_by_name(m).items() if k.startswith("kfed_")}
    assert kfed == AGREED


def test_recorders_count_what_they_say() -> None:
    m = Metrics()
    exercise(m)
    m.remote_object_created("worker-1", "Job", cluster_queue="gpu-cq")
    m.scheduling_cycle(admitted=0, seconds=0.002)
    value = m.registry.get_sample_value
    placed = {"cluster_queue": "gpu-cq", "cluster": "worker-1", **ROLE}
    assert value("multikueue_workloads_dispatched_total", placed) == 1
    assert value("multikueue_workloads_admitted_total", placed) == 1
    assert value("kfed_remote_objects_created_total", {"cluster": "worker-1", "kind": "Job"}) == 1
    assert value("kueue_admission_attempts_total", {"result": "success", **ROLE}) == 1
    # exercise() ended with set_leader(..., True): what follows is the leader's.
    leader = {"result": "inadmissible", "replica_role": "leader"}
    assert value("kueue_admission_attempts_total", leader) == 1
    waited = {"cluster_queue": "gpu-cq", "priority_class": "", **ROLE}
    assert value("kueue_admission_wait_time_seconds_sum", waited) == 2.0
    assert value("kfed_dispatch_latency_seconds_count", {"cluster": "worker-1"}) == 1
    assert value("kfed_failovers_total", {"from_cluster": "worker-1", "reason": "lost"}) == 1


def test_fencing_counts_each_time_an_origin_becomes_fenced() -> None:
    m = Metrics()
    m.fencing_started("multikueue")
    m.fencing_ended("multikueue")
    m.fencing_started("multikueue")
    value = m.registry.get_sample_value
    assert value("kfed_shim_fencing_events_total", {"origin": "multikueue"}) == 2
    assert value("kfed_shim_fenced", {"origin": "multikueue"}) == 1
    m.fencing_ended("multikueue")
    assert value("kfed_shim_fenced", {"origin": "multikueue"}) == 0


def test_queue_gauges_are_replaced_so_a_deleted_queue_disappears() -> None:
    m = Metrics()
    m.set_cluster_queues([queue("old"), queue("gpu-cq", status="pending")])
    m.set_cluster_queues([queue("gpu-cq", status="pending")])
    value = m.registry.get_sample_value
    old = {"cluster_queue": "old", "status": "active", **ROLE}
    assert value("kueue_pending_workloads", old) is None
    cq = {"cluster_queue": "gpu-cq", **ROLE}
    assert value("kueue_pending_workloads", {**cq, "status": "active"}) == 2
    assert value("kueue_pending_workloads", {**cq, "status": "inadmissible"}) == 1
    statuses = {
        s: value("kueue_cluster_queue_status", {**cq, "status": s})
        for s in ("pending", "active", "terminating")
    }
    assert statuses == {"pending": 1, "active": 0, "terminating": 0}
    quota = {
        "cohort": "all",
        "cluster_queue": "gpu-cq",
        "flavor": "h100",
        "resource": GPU[1],
        **ROLE,
    }
    assert value("kueue_cluster_queue_nominal_quota", quota) == 4
    assert value("kueue_cluster_queue_resource_usage", quota) == 2
    assert value("kueue_cluster_queue_borrowing_limit", quota) is None, "no limit: no series"


def test_cluster_gauges_show_health_maintenance_and_free_capacity() -> None:
    m = Metrics()
    m.set_clusters(
        [
            WorkerClusterSample("worker-1", True, "", {GPU: 3.0, ("h100", "cpu"): 56.5}),
            WorkerClusterSample("worker-2", True, "cordon", {GPU: 4.0}),
            WorkerClusterSample("worker-3", False, "drain"),
        ]
    )
    value = m.registry.get_sample_value
    assert [value("kfed_cluster_active", {"cluster": f"worker-{i}"}) for i in (1, 2, 3)] == [
        1,
        1,
        0,
    ]
    states = [
        next(
            s
            for s in ("none", "cordon", "drain")
            if value("kfed_cluster_maintenance", {"cluster": f"worker-{i}", "state": s}) == 1
        )
        for i in (1, 2, 3)
    ]
    assert states == ["none", "cordon", "drain"], "one series per state, 1 on the current"
    free = {"cluster": "worker-1", "flavor": "h100"}
    assert value("kfed_cluster_free_capacity", {**free, "resource": "cpu"}) == 56.5
    assert value("kfed_cluster_free_capacity", {**free, "resource": GPU[1]}) == 3
    m.set_clusters([])
    assert value("kfed_cluster_active", {"cluster": "worker-1"}) is None


def test_two_processes_in_one_python_count_apart() -> None:
    manager, shim = Metrics(), Metrics()  # same names, no "Duplicated timeseries" error
    manager.admitted("gpu-cq", waited=1)
    assert (
        manager.registry.get_sample_value(
            "kueue_admitted_workloads_total",
            {"cluster_queue": "gpu-cq", "priority_class": "", **ROLE},
        )
        == 1
    )
    assert (
        shim.registry.get_sample_value(
            "kueue_admitted_workloads_total",
            {"cluster_queue": "gpu-cq", "priority_class": "", **ROLE},
        )
        is None
    )


def test_a_real_process_also_serves_process_metrics() -> None:
    previous = instrument.sink()
    try:
        process = Metrics.for_process()
        assert instrument.sink() is process, "the process's kube sink"
        body, content_type = process.exposition()
    finally:
        instrument.install(previous)
    assert content_type.startswith("text/plain")
    assert b"process_cpu_seconds_total" in body
    assert b"process_cpu_seconds_total" not in Metrics().exposition()[0]
