"""The Events' reasons and messages, as upstream Kueue v0.17.0 formats them (its source and
unit tests: scheduler_test.go, preemption_test.go, the MultiKueue integration tests)."""

from __future__ import annotations

from typing import Any

from manager.api import constants as C
from manager.controllers import eventreasons as told
from manager.kube.api import Obj
from manager.kube.events import EventRecorder, EventType
from tests import builders as b


class Capture(EventRecorder):
    def __init__(self) -> None:
        super().__init__(None, component="test")
        self.told: list[tuple[str, EventType, str, str]] = []

    def record(self, obj: Obj, type_: EventType, reason: str, message: str) -> None:
        self.told.append((obj["metadata"]["name"], type_, reason, message))


def workload(name: str, priority: int = 0, **status: Any) -> Obj:
    return b.workload(
        name, namespace="ns", uid=f"uid-{name}", pod_sets=[], priority=priority, status=status
    )


def test_quota_reserved_and_admitted_read_as_upstream_s() -> None:
    rec = Capture()
    told.quota_reserved(rec, workload("w"), "eng-beta", 9.4)
    told.admitted(rec, workload("w"), "eng-beta", 0.0)
    assert rec.told == [
        (
            "w",
            "Normal",
            "QuotaReserved",
            "Quota reserved in ClusterQueue eng-beta, wait time since queued was 9s",
        ),
        (
            "w",
            "Normal",
            "Admitted",
            "Admitted by ClusterQueue eng-beta, wait time since reservation was 0s",
        ),
    ]


def test_the_job_s_events_read_as_upstream_s() -> None:
    rec = Capture()
    job = {"kind": "Job", "metadata": {"name": "j", "namespace": "ns"}}
    told.created_workload(rec, job, workload("job-j-abcde"))
    told.started(rec, job, "gpu-cq")
    told.finished_workload(rec, job, workload("job-j-abcde"))
    assert [m for *_, m in rec.told] == [
        "Created Workload: ns/job-j-abcde",
        "Admitted by clusterQueue gpu-cq",
        "Workload 'ns/job-j-abcde' is declared finished",
    ]


def test_a_stopped_job_says_why_its_workload_was_evicted() -> None:
    rec = Capture()
    job = {"kind": "Job", "metadata": {"name": "j", "namespace": "ns"}}
    evicted = workload(
        "w",
        conditions=[{"type": C.EVICTED, "status": "True", "reason": "Preempted", "message": "why"}],
    )
    told.stopped(rec, job, evicted)
    told.stopped(rec, job, workload("w"))
    told.stopped(rec, job, None)
    assert [m for *_, m in rec.told] == [
        "why",
        "Not admitted by cluster queue",
        "Workload is deleted",
    ]


def test_a_preemption_tells_three_events_with_upstream_s_message() -> None:
    message = told.preemption_message(
        preemptor_uid="wl-preemptor",
        preemptor_job_uid="job-preemptor",
        reason="reclamation within the cohort",
        preemptor_path="/eng/eng-beta",
        preemptee_path="/eng/eng-alpha",
    )
    # upstream's preemption_test.go, word for word
    assert message == (
        "Preempted to accommodate a workload (UID: wl-preemptor, JobUID: job-preemptor) due to "
        "reclamation within the cohort; preemptor path: /eng/eng-beta; preemptee path: "
        "/eng/eng-alpha"
    )
    rec = Capture()
    told.preempted(
        rec, workload("victim", 10), workload("high", 100), message, cluster_queue="eng-alpha"
    )
    suffix = (
        "preemptor effective priority: 100 (base: 100, boost: 0); "
        "preemptee effective priority: 10 (base: 10, boost: 0)"
    )
    assert rec.told == [
        ("victim", "Normal", "EvictedDueToPreempted", message),
        ("victim", "Normal", "Preempted", f"{message}; {suffix}"),
        (
            "high",
            "Normal",
            "PreemptedWorkload",
            f"Preempted workload ns/victim (UID: uid-victim) in ClusterQueue eng-alpha; {suffix}",
        ),
    ]


def test_unknown_parts_of_a_preemption_message_say_unknown_as_upstream() -> None:
    message = told.preemption_message(
        preemptor_uid="", preemptor_job_uid="", reason="", preemptor_path="", preemptee_path=""
    )
    assert message == (
        "Preempted to accommodate a workload (UID: UNKNOWN, JobUID: UNKNOWN) due to UNKNOWN; "
        "preemptor path: UNKNOWN; preemptee path: UNKNOWN"
    )


def test_multikueue_reservation_reads_as_upstream_s_integration_tests_expect() -> None:
    rec = Capture()
    told.admitted_on(rec, workload("w"), "worker1")
    assert rec.told == [("w", "Normal", "MultiKueue", 'The workload was admitted on "worker1"')]


def test_a_dispatch_names_the_worker_why_and_where_it_was_before() -> None:
    rec = Capture()
    told.dispatched(rec, workload("w"), "worker-2", "fits in gpu-cq")
    told.dispatched(rec, workload("w"), "worker-3", "fits in gpu-cq", previously="worker-2")
    told.dispatched(rec, workload("w"), "worker-3", "fits", previously="worker-3")
    assert [m for *_, m in rec.told] == [
        'Sent to "worker-2": fits in gpu-cq',
        'Sent to "worker-3": fits in gpu-cq (previously sent to "worker-2")',
        'Sent to "worker-3": fits',
    ]


def test_a_failover_is_a_warning_unless_the_worker_was_drained() -> None:
    rec = Capture()
    told.failover(rec, workload("w"), "worker-1", "lost", "worker lost")
    told.failover(rec, workload("w"), "worker-1", "drain", "draining")
    assert [(t, m) for _, t, _, m in rec.told] == [
        ("Warning", 'Leaving "worker-1" (lost): worker lost'),
        ("Normal", 'Leaving "worker-1" (drain): draining'),
    ]


def test_a_worker_s_condition_changes_tell_lost_recovered_and_refused() -> None:
    rec = Capture()
    cluster = {"kind": "MultiKueueCluster", "metadata": {"name": "worker-1"}}
    told.cluster_condition_changed(
        rec, cluster, was_active=None, active=True, reason="Active", message="Connected"
    )
    told.cluster_condition_changed(
        rec,
        cluster,
        was_active=True,
        active=False,
        reason=C.REASON_CLIENT_CONNECTION_FAILED,
        message="Connection to worker lost: timeout",
    )
    told.cluster_condition_changed(
        rec, cluster, was_active=False, active=True, reason="Active", message="Connected"
    )
    told.cluster_condition_changed(
        rec,
        cluster,
        was_active=True,
        active=False,
        reason=C.REASON_BAD_KUBECONFIG,
        message="exec plugins are not allowed",
    )
    told.cluster_condition_changed(
        rec,
        cluster,
        was_active=None,
        active=False,
        reason=C.REASON_CLIENT_CONNECTION_FAILED,
        message="Connection to worker lost: refused",
    )
    assert [(t, r) for _, t, r, _ in rec.told] == [
        ("Normal", "ClusterConnected"),
        ("Warning", "ClusterLost"),
        ("Normal", "ClusterRecovered"),
        ("Warning", "ClusterRefused"),
        ("Warning", "ClusterUnreachable"),
    ]
    assert rec.told[3][3] == f"{C.REASON_BAD_KUBECONFIG}: exec plugins are not allowed"
