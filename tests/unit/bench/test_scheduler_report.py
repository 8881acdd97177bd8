"""The scheduler benchmark's maths: what the recorder integrates, upstream's usage formula,
and the verdicts and margins against the thresholds."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.bench.scheduler import generator as g
from e2e.bench.scheduler import report
from e2e.bench.scheduler.recorder import QueueUsage, Recorder


def cq_status(usage_cpu: str, *, pending: int = 0, reserving: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"name": "cq-0-0"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "bench", "resources": [{"name": "cpu", "nominalQuota": 20}]}
                    ],
                }
            ]
        },
        "status": {
            "pendingWorkloads": pending,
            "reservingWorkloads": reserving,
            "flavorsUsage": [{"name": "bench", "resources": [{"name": "cpu", "total": usage_cpu}]}],
        },
    }


def workload(*conditions: str) -> dict[str, Any]:
    return {
        "status": {
            "conditions": [
                {"type": kind, "status": "True", "reason": kind, "message": ""}
                for kind in conditions
            ]
        }
    }


def test_queue_usage_is_integrated_piecewise_constant() -> None:
    q = QueueUsage(nominal_milli=20_000, first_event=0.0, last_event=0.0)

    q.observe(0.0, 10_000)  # 10 cpus from t=0
    q.observe(2.0, 20_000)  # 20 cpus from t=2
    q.observe(3.0, 0)  # idle from t=3
    q.observe(5.0, 0)

    assert q.used_milli_seconds == pytest.approx(10_000 * 2 + 20_000 * 1)
    assert q.monitored_seconds == pytest.approx(5.0)
    assert q.usage_percent == pytest.approx(100 * 40_000 / (20_000 * 5))


def test_class_usage_is_total_used_over_total_quota_and_class_span() -> None:
    a = QueueUsage(20_000, first_event=0.0, last_event=10.0, used_milli_seconds=100_000.0)
    b = QueueUsage(20_000, first_event=2.0, last_event=20.0, used_milli_seconds=300_000.0)

    # Upstream: sum(used) * 100 / (sum(nominal) * (last event - first event of the class)).
    assert report.class_usage_percent([a, b]) == pytest.approx(100 * 400_000 / (40_000 * 20.0))
    # Per queue, over each queue's own span: 50 % and 83.3 %.
    assert a.usage_percent == pytest.approx(50.0)
    assert b.usage_percent == pytest.approx(100 * 300_000 / (20_000 * 18))


def test_recorder_reads_usage_and_counts_from_cluster_queue_status() -> None:
    r = Recorder(expected_workloads=0)

    r.queue_event("cq-0-0", cq_status("0"), 0.0)
    r.queue_event("cq-0-0", cq_status("1500m", pending=3, reserving=2), 1.0)
    r.queue_event("cq-0-0", cq_status("0"), 3.0)

    q = r.queues["cq-0-0"]
    assert q.nominal_milli == 20_000
    assert q.used_milli_seconds == pytest.approx(1_500 * 2.0)
    assert (q.pending, q.reserving) == (0, 0)
    assert r.queues_idle


def test_time_to_admission_runs_from_first_event_to_the_last_admission() -> None:
    r = Recorder(expected_workloads=1)
    key = "cq-0-0/small-00000"

    def see(obj: dict[str, Any], at: float) -> str:
        return r.workload_event(key, obj, at, cpu=2, class_name="small")

    assert see(workload(), 10.0) == ""
    assert see(workload("QuotaReserved", "Admitted"), 12.0) == "admitted"
    assert see(workload("QuotaReserved", "Admitted", "Evicted"), 13.0) == "unadmitted"
    assert see(workload(), 13.5) == ""
    assert see(workload("QuotaReserved", "Admitted"), 16.0) == "admitted"
    assert see(workload("QuotaReserved", "Admitted", "Finished"), 17.0) == ""

    record = r.workloads[key]
    assert record.time_to_admission == pytest.approx(6.0)
    assert record.evictions == 1
    assert record.finished_at == 17.0
    # Held 1 s before the eviction and 1 s before finishing, 2 cpus each time.
    assert record.held_cpu_seconds == pytest.approx(4.0)
    assert r.all_finished


def test_evictions_are_counted_by_the_reason_a_preemption_gives() -> None:
    r = Recorder(expected_workloads=2)
    preempted = workload("QuotaReserved", "Evicted", "Preempted")
    preempted["status"]["conditions"][-1]["reason"] = "InCohortReclamation"
    r.workload_event("cq-0-0/a", workload("QuotaReserved", "Admitted"), 1.0, cpu=1, class_name="s")
    r.workload_event("cq-0-0/a", preempted, 2.0, cpu=1, class_name="s")
    r.workload_event("cq-0-0/a", preempted, 2.5, cpu=1, class_name="s")  # the same eviction
    r.workload_event("cq-0-0/b", workload("Evicted"), 3.0, cpu=1, class_name="s")

    assert r.eviction_reasons == {"InCohortReclamation": 1, "Evicted": 1}


def test_the_run_is_done_only_when_everything_finished_and_queues_are_idle() -> None:
    r = Recorder(expected_workloads=1)
    r.queue_event("cq-0-0", cq_status("1", reserving=1), 0.0)
    r.workload_event("cq-0-0/w", workload("Admitted", "Finished"), 1.0, cpu=1, class_name="small")
    assert r.all_finished and not r.done

    r.queue_event("cq-0-0", cq_status("0"), 2.0)
    assert r.done


def figures(*, wall: float, usage: float, waits: dict[str, float]) -> report.Figures:
    s = g.BASELINE
    return report.Figures(
        scenario=s.name,
        cluster_queues=s.cluster_queue_count,
        workloads=s.workload_count,
        wall_seconds=wall,
        generation_seconds=60.0,
        usage=report.UsageFigures(usage, usage, usage - 10, usage, wall),
        classes=[
            report.ClassFigures(
                name=c.name,
                count=s.count_of(c.name),
                admitted=s.count_of(c.name),
                finished=s.count_of(c.name),
                evictions=0,
                avg_time_to_admission=waits[c.name],
                p50_time_to_admission=waits[c.name],
                p95_time_to_admission=waits[c.name],
                max_time_to_admission=waits[c.name],
            )
            for c in s.classes
        ],
    )


def test_checks_give_verdicts_and_margins() -> None:
    f = figures(wall=300.0, usage=60.0, waits={"small": 100.0, "medium": 95.0, "large": 5.0})

    checks = {c.name: c for c in report.checks(g.BASELINE, f)}

    wall = checks["wall time (s)"]
    assert wall.passed and wall.margin == pytest.approx(125.0)
    assert wall.margin_percent == pytest.approx(100 * 125 / 425)
    usage = checks["usage, cq class (%)"]
    assert usage.passed and usage.margin == pytest.approx(10.0)
    medium = checks["avg time to admission, medium (s)"]
    assert not medium.passed and medium.margin == pytest.approx(-5.0)
    assert checks["usage, min over CQs (%)"].informational
    assert not report.passed(checks.values(), f)


def test_a_run_passes_only_complete_and_in_time() -> None:
    f = figures(wall=300.0, usage=60.0, waits={"small": 100.0, "medium": 50.0, "large": 5.0})
    assert report.passed(report.checks(g.BASELINE, f), f)

    # The informational per-queue minimum (50 % here) does not decide the verdict.
    low_min = figures(wall=300.0, usage=55.0, waits={"small": 1.0, "medium": 1.0, "large": 1.0})
    assert low_min.usage.min_percent < 50
    assert report.passed(report.checks(g.BASELINE, low_min), low_min)

    f.timed_out = True
    assert not report.passed(report.checks(g.BASELINE, f), f)

    incomplete = figures(wall=300.0, usage=60.0, waits={"small": 1.0, "medium": 1.0, "large": 1.0})
    incomplete.classes[0] = report.ClassFigures("small", 10_500, 10_499, 10_499, 0, 1, 1, 1, 1)
    assert not report.passed(report.checks(g.BASELINE, incomplete), incomplete)


def test_render_and_json_carry_the_verdict() -> None:
    f = figures(wall=300.0, usage=60.0, waits={"small": 100.0, "medium": 50.0, "large": 5.0})

    text = report.render(g.BASELINE, f)
    data = report.to_json(g.BASELINE, f)

    assert "verdict: PASS" in text
    assert data["passed"] is True
    assert data["scenario"]["workloads"] == 15_000
    assert {c["name"] for c in data["checks"]} >= {"wall time (s)", "usage, cq class (%)"}
