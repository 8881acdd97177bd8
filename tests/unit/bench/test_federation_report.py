"""The federation benchmark's report: the JSON tools read and the table people read."""

from __future__ import annotations

import json

from e2e.bench.federation import managermetrics
from e2e.bench.federation.report import (
    DrillResult,
    DrillsResult,
    ModeResult,
    Report,
    dumps,
    mean_of,
    render,
)
from e2e.bench.federation.stats import Summary


def mode(name: str, *, copies: dict[int, int], complete: bool = True) -> ModeResult:
    return ModeResult(
        mode=name,
        manager_args=["--dispatch-mode", name],
        jobs=4,
        submitted=4,
        finished=4 if complete else 3,
        complete=complete,
        submit_seconds=0.4,
        wall_seconds=8.0,
        dispatch=Summary.of([0.2, 0.3, 0.4, 0.9]),
        to_copy=Summary.of([0.1, 0.1, 0.2, 0.5]),
        copy_to_admitted=Summary.of([0.1, 0.2, 0.2, 0.4]),
        placement=Summary.of([0.3, 0.4, 0.5, 1.0]),
        queueing=Summary.of([0.1, 0.1, 0.1, 0.1]),
        copies=copies,
        admitted_copies={1: 4},
        placements={"worker-1": 2, "worker-3": 2},
        evictions=0,
        cpu_seconds={"kfed manager": 3.25, "kfed worker shims (3)": 2.0},
        metrics=managermetrics.parse(
            'multikueue_workloads_dispatched_total{cluster="worker-1"} 4\n'
            'kfed_dispatch_latency_seconds_bucket{cluster="worker-1",le="0.5"} 3\n'
            'kfed_dispatch_latency_seconds_bucket{cluster="worker-1",le="+Inf"} 4\n'
            'kfed_dispatch_latency_seconds_count{cluster="worker-1"} 4\n'
            'kfed_dispatch_latency_seconds_sum{cluster="worker-1"} 1.6\n'
        ),
    )


def drills(*seconds: float | None, double: bool = False) -> DrillsResult:
    result = DrillsResult(
        manager_args=["--fence-grace", "1.5"],
        failover_settings={"fence-grace": 1.5, "window_seconds": 5.5},
    )
    for i, s in enumerate(seconds):
        result.drills.append(
            DrillResult(
                index=i,
                probe=f"probe-{i:02d}",
                flavor="h100",
                from_cluster="worker-2",
                to_cluster="worker-3" if s is not None else None,
                failover_seconds=s,
                fenced_seconds=4.0 if s is not None else None,
                max_clusters=2 if double and i == 0 else 1,
                error=None if s is not None else "timed out",
            )
        )
    return result


def test_mean_of_a_histogram() -> None:
    assert mean_of({1: 3, 3: 1}) == 1.5
    assert mean_of({}) == 0.0


def test_the_json_has_every_figure_the_issue_asks_for() -> None:
    report = Report(
        settings={"jobs": 4},
        modes=[mode("capacity-aware", copies={1: 4}), mode("all-at-once", copies={3: 4})],
        drills=drills(7.0, 9.0, 8.0),
        load_average_start=(0.5, 0.4, 0.3),
        load_average_end=(1.0, 0.8, 0.5),
    )
    data = json.loads(dumps(report))
    capacity, all_at_once = data["modes"]
    assert capacity["dispatch_latency_seconds"]["p50"] == 0.35
    assert capacity["dispatch_latency_seconds"]["p99"] > 0.8
    assert capacity["remote_workloads_per_workload"]["mean"] == 1.0
    assert all_at_once["remote_workloads_per_workload"] == {
        "mean": 3.0,
        "max": 3,
        "histogram": {"3": 4},
        "total": 12,
    }
    assert capacity["manager_cpu_seconds"] == 3.25
    assert capacity["manager_metrics"]["workloads_dispatched_total"] == 4
    assert data["drills"]["cut_to_running_elsewhere_seconds"]["p50"] == 8.0
    assert data["drills"]["cut_to_running_elsewhere_seconds"]["max"] == 9.0
    assert data["drills"]["double_runs"] == 0
    assert data["drills"]["per_drill"][0]["fence_margin_seconds"] == 3.0
    assert data["load_average"] == {"start": [0.5, 0.4, 0.3], "end": [1.0, 0.8, 0.5]}
    assert data["settings"] == {"jobs": 4}
    assert data["passed"] is True


def test_a_double_run_an_unfinished_mode_or_a_failed_drill_fails_the_run() -> None:
    assert not Report({}, drills=drills(7.0, double=True)).passed
    assert not Report({}, drills=drills(7.0, None)).passed
    assert not Report({}, modes=[mode("all-at-once", copies={3: 3}, complete=False)]).passed
    assert not Report({}, aborted="WaitTimeout: namespace never emptied").passed
    assert Report({}).passed


def test_the_table_shows_both_modes_side_by_side_and_every_drill() -> None:
    report = Report(
        settings={},
        modes=[mode("capacity-aware", copies={1: 4}), mode("all-at-once", copies={3: 4})],
        drills=drills(7.0, None),
        load_average_start=(0.5, 0.4, 0.3),
        notes=["a note"],
    )
    text = render(report, width=140)
    assert "capacity-aware" in text and "all-at-once" in text
    assert "remote Workloads per workload" in text
    assert "1.00" in text and "3.00" in text
    assert "CPU s: kfed manager" in text and "3.2" in text
    assert "worker-2 -> worker-3" in text
    assert "timed out" in text
    assert "double runs 0 (must be 0)" in text
    assert "load average at start 0.50 0.40 0.30" in text
    assert "note: a note" in text
    assert "FAIL" in text  # a drill failed


def test_the_table_says_which_workloads_got_stuck() -> None:
    stuck = mode("all-at-once", copies={3: 3}, complete=False)
    stuck.unfinished = [{"workload": "ml-jobs/job-bench-00007-abcde", "copies": {"worker-2": 1}}]
    stuck.leftover_copies = ["worker-2: ml-jobs/job-bench-00007-abcde"]
    text = render(Report({}, modes=[stuck]), width=200)
    assert "all-at-once: did not finish:" in text and "job-bench-00007" in text
    assert "copies left on workers: worker-2: ml-jobs/job-bench-00007-abcde" in text
