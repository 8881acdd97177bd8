"""Upstream's v0.18 and v0.19 histograms, recorded when their event happens (read here from
the registry, never scraped): an evicted workload's quota given back, a job's Workload
created, a pod's scheduling gate removed. And the unadmitted-workload gauges' counting."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from manager.api import constants as C
from manager.controllers import taspods
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.jobs import JobController
from manager.controllers.topologyungater import TopologyUngater
from manager.telemetry.metrics import Metrics, UnadmittedSample


def samples(m: Metrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """``name``'s samples in the registry, by their labels (replica_role left out)."""
    found = {}
    for family in m.registry.collect():
        for s in family.samples:
            if s.name == name:
                labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "replica_role"))
                found[labels] = s.value
    return found


def test_an_eviction_release_is_observed_by_queue_and_reason_and_never_negative() -> None:
    m = Metrics()
    m.eviction_released("cq", "Preempted", seconds=12.0)
    m.eviction_released("cq", "Preempted", seconds=-0.5)  # the API server's clock is ahead
    count = samples(m, "kueue_workload_eviction_latency_seconds_count")
    assert count == {(("cluster_queue", "cq"), ("reason", "Preempted")): 2.0}
    total = samples(m, "kueue_workload_eviction_latency_seconds_sum")
    assert total == {(("cluster_queue", "cq"), ("reason", "Preempted")): 12.0}


def test_a_gate_removal_is_labelled_as_upstreams_with_is_group_false() -> None:
    m = Metrics()
    m.scheduling_gate_removed(taspods.TOPOLOGY_GATE, "cq", seconds=0.3)
    count = samples(m, "kueue_pod_scheduling_gate_removal_seconds_count")
    assert count == {
        (("cluster_queue", "cq"), ("is_group", "false"), ("name", "kueue.x-k8s.io/topology")): 1.0
    }


def job(generation: int, created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    return {"metadata": {"name": "j", "generation": generation, "creationTimestamp": created}}


def workload_created_at(when: str) -> dict[str, Any]:
    return {"metadata": {"name": "job-j-1", "creationTimestamp": when}}


def test_a_workload_creation_counts_from_its_jobs_creation_for_an_unedited_job() -> None:
    """Upstream skips a job whose generation is past 1: its wait is not the Workload's."""
    m = Metrics()
    controller: Any = SimpleNamespace(kind=BATCH_JOB, state=SimpleNamespace(metrics=m))
    JobController._record_creation_latency(
        controller, job(1), workload_created_at("2026-01-01T00:00:02Z")
    )
    JobController._record_creation_latency(
        controller, job(2), workload_created_at("2026-01-01T00:00:09Z")
    )
    assert samples(m, "kueue_workload_creation_latency_seconds_count") == {
        (("job_kind", "Job"),): 1.0
    }
    assert samples(m, "kueue_workload_creation_latency_seconds_sum") == {
        (("job_kind", "Job"),): 2.0
    }


def test_ungating_a_pod_counts_from_its_workloads_admission() -> None:
    m = Metrics()
    ungater: Any = SimpleNamespace(state=SimpleNamespace(metrics=m))
    admitted = {
        "status": {
            "admission": {"clusterQueue": "cq"},
            "conditions": [
                {"type": C.ADMITTED, "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ],
        }
    }
    TopologyUngater._record_gate_removal(ungater, admitted)
    TopologyUngater._record_gate_removal(ungater, {"status": {}})  # not admitted: nothing
    count = samples(m, "kueue_pod_scheduling_gate_removal_seconds_count")
    assert list(count.values()) == [1.0]
    assert dict(next(iter(count)))["cluster_queue"] == "cq"


def test_unadmitted_workloads_are_counted_per_label_set_and_replaced_each_time() -> None:
    m = Metrics()
    lq = ("lq", "ns")
    waiting = UnadmittedSample("cq", lq, "NoReservation", "WaitingForQuota")
    m.set_unadmitted([waiting, waiting, UnadmittedSample("", None, "NoReservation", "")])
    assert samples(m, "kueue_unadmitted_workloads") == {
        (
            ("cluster_queue", "cq"),
            ("reason", "NoReservation"),
            ("underlying_cause", "WaitingForQuota"),
        ): 2.0
    }
    assert list(samples(m, "kueue_local_queue_unadmitted_workloads").values()) == [2.0]
    m.set_unadmitted([UnadmittedSample("cq", None, "NoReservation", "PendingEvaluation")])
    assert samples(m, "kueue_unadmitted_workloads") == {
        (
            ("cluster_queue", "cq"),
            ("reason", "NoReservation"),
            ("underlying_cause", "PendingEvaluation"),
        ): 1.0
    }
    assert samples(m, "kueue_local_queue_unadmitted_workloads") == {}
