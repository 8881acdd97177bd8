"""The federation benchmark's arithmetic: percentiles, summaries, and the quantiles it
estimates from the manager's histogram."""

from __future__ import annotations

import pytest

from e2e.bench.federation import managermetrics
from e2e.bench.federation.stats import Summary, percentile


def test_percentile_interpolates_between_the_closest_ranks() -> None:
    assert percentile([1.0, 2.0], 0.5) == 1.5
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile(range(1, 101), 0.99) == pytest.approx(99.01)
    assert percentile([5.0], 0.99) == 5.0


def test_percentile_ends_are_min_and_max_and_nothing_is_zero() -> None:
    values = [4.0, 1.0, 9.0]
    assert percentile(values, 0.0) == 1.0
    assert percentile(values, 1.0) == 9.0
    assert percentile([], 0.5) == 0.0


def test_percentile_refuses_a_share_outside_0_to_1() -> None:
    with pytest.raises(ValueError, match=r"within 0\.\.1"):
        percentile([1.0], 99)


def test_summary_of_durations() -> None:
    summary = Summary.of([0.1, 0.2, 0.3, 0.4, 10.0])
    assert summary.count == 5
    assert summary.p50 == 0.3
    assert summary.max == 10.0
    assert summary.mean == pytest.approx(2.2)
    assert 0.4 < summary.p99 < 10.0
    assert Summary.of([]) == Summary(0, 0.0, 0.0, 0.0, 0.0)
    assert Summary.of([1 / 3]).rounded(2) == {
        "count": 1,
        "mean": 0.33,
        "p50": 0.33,
        "p99": 0.33,
        "max": 0.33,
    }


METRICS = """\
# HELP multikueue_workloads_dispatched_total Copies of manager workloads created on a worker
# TYPE multikueue_workloads_dispatched_total counter
multikueue_workloads_dispatched_total{cluster="worker-1"} 3.0
multikueue_workloads_dispatched_total{cluster="worker-2"} 5.0
# HELP kfed_remote_objects_created_total Objects the manager created on worker clusters
# TYPE kfed_remote_objects_created_total counter
kfed_remote_objects_created_total{cluster="worker-1",kind="Workload"} 3.0
kfed_remote_objects_created_total{cluster="worker-2",kind="Workload"} 5.0
kfed_remote_objects_created_total{cluster="worker-1",kind="Job"} 2.0
kfed_remote_objects_created_total{cluster="worker-2",kind="Job"} 2.0
# HELP kfed_dispatch_latency_seconds From the manager's reservation to the copy admitted
# TYPE kfed_dispatch_latency_seconds histogram
kfed_dispatch_latency_seconds_bucket{cluster="worker-1",le="0.1"} 0.0
kfed_dispatch_latency_seconds_bucket{cluster="worker-1",le="0.5"} 1.0
kfed_dispatch_latency_seconds_bucket{cluster="worker-1",le="1.0"} 2.0
kfed_dispatch_latency_seconds_bucket{cluster="worker-1",le="+Inf"} 2.0
kfed_dispatch_latency_seconds_count{cluster="worker-1"} 2.0
kfed_dispatch_latency_seconds_sum{cluster="worker-1"} 1.0
kfed_dispatch_latency_seconds_bucket{cluster="worker-2",le="0.1"} 0.0
kfed_dispatch_latency_seconds_bucket{cluster="worker-2",le="0.5"} 1.0
kfed_dispatch_latency_seconds_bucket{cluster="worker-2",le="1.0"} 2.0
kfed_dispatch_latency_seconds_bucket{cluster="worker-2",le="+Inf"} 2.0
kfed_dispatch_latency_seconds_count{cluster="worker-2"} 2.0
kfed_dispatch_latency_seconds_sum{cluster="worker-2"} 1.4
"""


def test_manager_metrics_are_summed_over_clusters() -> None:
    m = managermetrics.parse(METRICS)
    assert m.dispatched == {"worker-1": 3.0, "worker-2": 5.0}
    assert m.remote_objects == {"Workload": 8.0, "Job": 4.0}
    assert m.latency_count == 4.0
    assert m.latency_mean == pytest.approx(0.6)
    assert m.latency_buckets == {0.1: 0.0, 0.5: 2.0, 1.0: 4.0, float("inf"): 4.0}
    data = m.to_json()
    assert data["available"] is True
    assert data["workloads_dispatched_total"] == 8
    assert data["remote_objects_created"] == {"Job": 4, "Workload": 8}


def test_metrics_the_manager_does_not_expose_are_reported_as_unavailable() -> None:
    m = managermetrics.parse(
        "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1\n"
    )
    assert not m.present
    assert m.to_json() == {"available": False}


def test_histogram_quantile_interpolates_inside_the_bucket() -> None:
    buckets = {0.1: 0.0, 0.5: 2.0, 1.0: 4.0, float("inf"): 4.0}
    # rank 2 of 4 is the top of the 0.1..0.5 bucket; rank 3 is half way into 0.5..1.0.
    assert managermetrics.histogram_quantile(0.5, buckets) == pytest.approx(0.5)
    assert managermetrics.histogram_quantile(0.75, buckets) == pytest.approx(0.75)
    # From 0 in the first bucket.
    assert managermetrics.histogram_quantile(0.5, {1.0: 2.0, float("inf"): 2.0}) == 0.5
    # In the +Inf bucket: the highest finite bound.
    assert managermetrics.histogram_quantile(0.99, {1.0: 1.0, float("inf"): 2.0}) == 1.0
    assert managermetrics.histogram_quantile(0.5, {}) == 0.0
    assert managermetrics.histogram_quantile(0.5, {1.0: 0.0, float("inf"): 0.0}) == 0.0
