"""What the federation benchmark makes of the events it receives: dispatch latencies and
copies per workload, and double runs in a drill."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.bench.federation.doublerun import RunningPods
from e2e.bench.federation.recorder import DispatchRecorder
from manager.api import constants as C

KEY = "ml-jobs/job-bench-00001-abcde"


def workload(*true: str, check: str | None = None, cluster: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [{"type": t, "status": "True"} for t in true],
    }
    if C.QUOTA_RESERVED in true:
        status["admission"] = {"clusterQueue": "gpu-cq"}
    if check is not None:
        status["admissionChecks"] = [{"name": "multikueue", "state": check}]
    if cluster is not None:
        status["clusterName"] = cluster
    return {
        "metadata": {
            "name": KEY.split("/")[1],
            "namespace": "ml-jobs",
            "uid": "manager-uid",
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "bench-00001", "controller": True}
            ],
        },
        "status": status,
    }


def copy_(uid: str, *true: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": KEY.split("/")[1],
            "namespace": "ml-jobs",
            "uid": uid,
            "labels": {C.MULTIKUEUE_ORIGIN_LABEL: "multikueue"},
        },
        "status": {"conditions": [{"type": t, "status": "True"} for t in true]},
    }


def test_dispatch_latency_runs_from_reservation_to_the_first_remote_admission() -> None:
    r = DispatchRecorder("multikueue")
    r.submitted("bench-00001", 9.5)
    r.manager_event("ADDED", workload(), 10.0)
    r.manager_event("MODIFIED", workload(C.QUOTA_RESERVED, check="Pending"), 10.2)
    r.manager_event("MODIFIED", workload(C.QUOTA_RESERVED, check="Pending"), 10.3)
    r.worker_event("worker-2", "ADDED", copy_("a"), 10.4)
    r.worker_event("worker-2", "MODIFIED", copy_("a", C.QUOTA_RESERVED, C.ADMITTED), 10.7)
    r.worker_event("worker-2", "MODIFIED", copy_("a", C.QUOTA_RESERVED, C.ADMITTED), 10.9)
    r.manager_event("MODIFIED", workload(C.QUOTA_RESERVED, check="Ready", cluster="worker-2"), 10.8)
    r.manager_event("MODIFIED", workload(C.QUOTA_RESERVED, C.ADMITTED, C.FINISHED), 13.0)

    assert r.dispatch_latencies() == [pytest.approx(0.5)]
    assert r.copy_latencies() == [pytest.approx(0.2)]
    assert r.remote_admission_latencies() == [pytest.approx(0.3)]
    assert r.placement_latencies() == [pytest.approx(0.6)]
    assert r.queueing_latencies() == [pytest.approx(0.7)]
    assert r.placements() == {"worker-2": 1}
    assert r.finished() == 1
    assert r.last_finished_at() == 13.0
    assert r.copies_per_workload() == {1: 1}


def test_all_at_once_copies_are_counted_per_worker_by_uid() -> None:
    r = DispatchRecorder("multikueue")
    r.manager_event("ADDED", workload(C.QUOTA_RESERVED, check="Pending"), 1.0)
    for worker in ("worker-1", "worker-2", "worker-3"):
        r.worker_event(worker, "ADDED", copy_(worker), 1.1)
        r.worker_event(worker, "MODIFIED", copy_(worker), 1.2)  # the same copy again
    r.worker_event("worker-2", "MODIFIED", copy_("worker-2", C.ADMITTED), 1.3)
    r.worker_event("worker-3", "MODIFIED", copy_("worker-3", C.ADMITTED), 1.4)
    r.worker_event("worker-3", "DELETED", copy_("worker-3", C.ADMITTED), 1.5)
    assert r.copies_per_workload() == {3: 1}
    assert r.admitted_copies_per_workload() == {2: 1}
    assert r.dispatch_latencies() == [pytest.approx(0.3)]


def test_a_copy_seen_admitted_before_the_reservation_counts_zero_and_is_noted() -> None:
    r = DispatchRecorder("multikueue")
    r.worker_event("worker-1", "ADDED", copy_("a", C.ADMITTED), 5.0)
    r.manager_event("ADDED", workload(C.QUOTA_RESERVED), 5.1)
    # Out of order across the two watches: reservation seen after the admission.
    assert r.dispatch_latencies() == [0.0]
    r2 = DispatchRecorder("multikueue")
    r2.manager_event("ADDED", workload(C.QUOTA_RESERVED), 5.1)
    r2.worker_event("worker-1", "ADDED", copy_("a", C.ADMITTED), 5.0)
    assert r2.negative_latencies == 1
    assert r2.dispatch_latencies() == [0.0]


def test_a_stuck_workload_is_described_with_where_its_copies_are() -> None:
    r = DispatchRecorder("multikueue")
    r.manager_event("ADDED", workload(C.QUOTA_RESERVED, check="Pending"), 1.0)
    r.worker_event("worker-1", "ADDED", copy_("a"), 1.1)
    r.worker_event("worker-3", "ADDED", copy_("b", C.ADMITTED), 1.2)
    assert r.unfinished() == [
        {
            "workload": KEY,
            "job": "bench-00001",
            "reserved": True,
            "copies": {"worker-1": 1, "worker-3": 1},
            "admitted_on": ["worker-3"],
            "placed_on": None,
            "evictions": 0,
        }
    ]
    r.manager_event("MODIFIED", workload(C.QUOTA_RESERVED, C.FINISHED), 3.0)
    assert r.unfinished() == []


def test_evictions_are_counted_on_each_transition() -> None:
    r = DispatchRecorder("multikueue")
    r.manager_event("ADDED", workload(C.QUOTA_RESERVED), 1.0)
    r.manager_event("MODIFIED", workload(C.EVICTED), 2.0)
    r.manager_event("MODIFIED", workload(C.EVICTED), 2.1)
    r.manager_event("MODIFIED", workload(C.QUOTA_RESERVED), 3.0)
    r.manager_event("MODIFIED", workload(C.EVICTED), 4.0)
    assert r.evictions() == 2


# -- double runs -------------------------------------------------------------------------------


def pod(uid: str, phase: str, *, job: str = "probe-00", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"uid": uid, "labels": {"job-name": job}}
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"phase": phase}}


def test_a_clean_failover_never_runs_on_two_workers() -> None:
    t = RunningPods("probe-00")
    t.pod_event("worker-2", "ADDED", pod("a", "Pending"), 1.0)
    t.pod_event("worker-2", "MODIFIED", pod("a", "Running"), 1.5)
    # cut at 2.0; the shim fences: the pod is deleted, then the copy runs on worker-3.
    t.pod_event("worker-2", "MODIFIED", pod("a", "Running", deleting=True), 6.0)
    t.pod_event("worker-3", "ADDED", pod("b", "Pending"), 8.0)
    t.pod_event("worker-3", "MODIFIED", pod("b", "Running"), 8.4)
    t.pod_event("worker-2", "DELETED", pod("a", "Running", deleting=True), 8.5)
    assert not t.double_run
    assert t.max_clusters == 1
    assert t.first_running_at == {"worker-2": 1.5, "worker-3": 8.4}
    assert t.stopped_at == {"worker-2": 6.0}
    assert t.running_elsewhere_since("worker-2", 2.0) == 8.4
    assert t.running_elsewhere_since("worker-3", 2.0) is None
    assert t.clusters() == ["worker-3"]


def test_running_on_two_workers_at_once_is_a_double_run() -> None:
    t = RunningPods("probe-00")
    t.pod_event("worker-2", "MODIFIED", pod("a", "Running"), 1.0)
    t.pod_event("worker-3", "MODIFIED", pod("b", "Running"), 2.0)
    t.pod_event("worker-2", "DELETED", pod("a", "Running"), 2.5)
    assert t.double_run
    assert t.double_run_at == 2.0
    assert t.max_clusters == 2


def test_pods_of_other_jobs_are_ignored() -> None:
    t = RunningPods("probe-00")
    t.pod_event("worker-1", "ADDED", pod("x", "Running", job="probe-01"), 1.0)
    assert t.clusters() == []
    assert t.samples == 0
