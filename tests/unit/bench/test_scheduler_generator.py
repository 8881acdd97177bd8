"""The scheduler benchmark's scenarios are upstream's, figure for figure."""

from __future__ import annotations

import pytest

from e2e.bench.scheduler import generator as g
from manager.api.clusterqueue import ClusterQueue
from manager.api.localqueue import LocalQueue
from manager.api.workload import Workload


def test_baseline_is_5_cohorts_of_6_queues_and_15000_workloads() -> None:
    s = g.scenario("baseline")

    assert (s.cohorts, s.queues_per_cohort, s.cluster_queue_count) == (5, 6, 30)
    assert s.workloads_per_queue == 500
    assert s.workload_count == 15_000
    assert {c.name: s.count_of(c.name) for c in s.classes} == {
        "small": 10_500,
        "medium": 3_000,
        "large": 1_500,
    }


def test_baseline_classes_and_thresholds() -> None:
    s = g.BASELINE
    small, medium, large = (s.workload_class(n) for n in ("small", "medium", "large"))

    assert (small.cpu, small.runtime_ms, small.priority, small.interval_ms) == (1, 200, 50, 100)
    assert (medium.cpu, medium.runtime_ms, medium.priority, medium.interval_ms) == (
        5,
        500,
        100,
        500,
    )
    assert (large.cpu, large.runtime_ms, large.priority, large.interval_ms) == (20, 1000, 200, 1200)
    assert (s.nominal_quota_cpu, s.borrowing_limit_cpu) == (20, 100)
    t = s.thresholds
    assert (t.max_wall_seconds, t.min_usage_percent) == (425.0, 50.0)
    assert t.max_avg_time_to_admission_seconds == {"large": 23.0, "medium": 90.0, "small": 260.0}


def test_large_variant_is_10_cohorts_of_100_queues_and_50000_workloads() -> None:
    s = g.scenario("large")

    assert s.cluster_queue_count == 1_000
    assert s.workload_count == 50_000
    small, medium, large = (s.workload_class(n) for n in ("small", "medium", "large"))
    assert (small.count, small.runtime_ms, small.interval_ms) == (35, 150, 60)
    assert (medium.count, medium.runtime_ms, medium.interval_ms) == (11, 350, 300)
    assert (large.count, large.runtime_ms, large.interval_ms) == (4, 700, 700)
    t = s.thresholds
    assert (t.max_wall_seconds, t.min_usage_percent) == (1416.0, 31.6)
    assert t.max_avg_time_to_admission_seconds == {"large": 128.0, "medium": 308.0, "small": 841.0}


def test_pace_and_offered_work() -> None:
    s = g.BASELINE
    small = s.workload_class("small")

    offsets = small.creation_offsets()
    assert len(offsets) == 350
    assert offsets[:3] == pytest.approx([0.1, 0.2, 0.3])
    assert offsets[-1] == pytest.approx(35.0)
    assert s.generation_seconds == pytest.approx(60.0)  # 50 large, one every 1.2 s
    # Per queue: 1 x 0.2 x 350 + 5 x 0.5 x 100 + 20 x 1 x 50 cpu-seconds.
    assert s.offered_cpu_seconds_per_queue == pytest.approx(70 + 250 + 1000)
    # A cohort's work over its 6 x 20 cpus: the shortest possible run.
    assert s.min_drain_seconds == pytest.approx(6 * 1320 / 120)
    # 30 queues x (10 + 2 + 1/1.2) workloads per second while every stream runs.
    assert s.creation_rate == pytest.approx(30 * (10 + 2 + 1 / 1.2))


def test_queues_are_named_after_their_cohort_and_unique() -> None:
    queues = g.BASELINE.queues()

    assert len({q.name for q in queues}) == 30
    assert queues[0] == g.QueueRef("cq-0-0", "cohort-0")
    assert queues[-1] == g.QueueRef("cq-4-5", "cohort-4")


def test_objects_are_valid_kueue_objects() -> None:
    s = g.BASELINE
    queue = s.queues()[7]
    large = s.workload_class("large")

    cq = ClusterQueue.model_validate(g.cluster_queue_object(s, queue))
    assert cq.spec.cohort_name == queue.cohort
    quota = cq.spec.resource_groups[0].flavors[0].resources[0]
    assert (str(quota.nominal_quota), str(quota.borrowing_limit)) == ("20", "100")
    assert str(cq.spec.preemption.reclaim_within_cohort) == "Any"
    assert str(cq.spec.preemption.within_cluster_queue) == "LowerPriority"

    lq = LocalQueue.model_validate(g.local_queue_object(queue))
    assert (lq.metadata.namespace, lq.spec.cluster_queue) == (queue.name, queue.name)

    body = g.workload_object(queue, large, 3)
    wl = Workload.model_validate(body)
    assert wl.metadata.namespace == queue.name
    assert wl.spec.queue_name == queue.name
    assert wl.spec.priority == 200
    resources = wl.spec.pod_sets[0].template.spec.containers[0].resources
    assert resources is not None
    assert str(resources.requests["cpu"]) == "20"
    assert body["metadata"]["labels"] == {g.CLASS_LABEL: "large", g.RUNTIME_LABEL: "1000"}


def test_workload_names_sort_in_creation_order() -> None:
    small = g.BASELINE.workload_class("small")
    names = [g.workload_name(small, i) for i in (2, 10, 100)]

    assert names == sorted(names)


def test_an_unknown_variant_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown variant 'huge'; choose one of"):
        g.scenario("huge")
