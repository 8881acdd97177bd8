"""The in-process replay of upstream's scheduler-performance trace counts what it says."""

from __future__ import annotations

from typing import Any

from e2e.bench.scheduler import generator as g
from e2e.bench.scheduler.replay import Model, replay


def _scenario(*classes: g.WorkloadClass, queues: int = 1) -> g.Scenario:
    return g.Scenario(
        name="tiny",
        cohorts=1,
        queues_per_cohort=queues,
        nominal_quota_cpu=20,
        borrowing_limit_cpu=100,
        classes=classes,
        thresholds=g.BASELINE.thresholds,
    )


def _without_timing(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k != "replay_cpu_seconds"}


def test_a_large_arriving_at_a_queue_full_of_smalls_evicts_them_within_the_queue() -> None:
    small = g.WorkloadClass(
        "small", count=20, interval_ms=10, cpu=1, runtime_ms=10_000, priority=50
    )
    large = g.WorkloadClass(
        "large", count=1, interval_ms=500, cpu=20, runtime_ms=1000, priority=200
    )

    report = replay(Model(), _scenario(small, large))

    assert report["evictions_by_victim_class"] == {"small": 20}
    assert report["evictions_by_preemptor_and_victim"] == {"large->small": 20}
    assert report["evictions_by_reason"] == {"InClusterQueue": 20}
    assert report["preemptions"] == 1
    # every small is admitted again after the large finishes
    assert report["admissions"] == {"large": 1, "small": 40}


def test_no_evictions_when_everything_fits() -> None:
    small = g.WorkloadClass("small", count=10, interval_ms=100, cpu=1, runtime_ms=50, priority=50)
    medium = g.WorkloadClass("medium", count=4, interval_ms=300, cpu=5, runtime_ms=50, priority=100)

    report = replay(Model(), _scenario(small, medium, queues=2))

    assert report["evictions_total"] == 0
    assert report["admissions"] == {"medium": 8, "small": 20}


def test_the_replay_is_deterministic_under_every_model_knob() -> None:
    model = Model(
        pace=1.5,
        admit_s=0.05,
        runner_write_s=0.01,
        release_s=0.2,
        cycle_s=0.01,
        requeue_batch_s=1.0,
        reservation_seconds_granularity=True,
    )

    first = replay(model, g.SMOKE)
    second = replay(model, g.SMOKE)

    assert _without_timing(first) == _without_timing(second)
    assert sum(first["admissions"].values()) >= g.SMOKE.workload_count
