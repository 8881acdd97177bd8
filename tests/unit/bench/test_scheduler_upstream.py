"""Reading upstream Kueue's scheduler harness (its summary, stats and CSVs) into kfed's
figures by upstream's own definitions, and the kfed / upstream comparison with its goals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.bench.scheduler import compare, controller_process, report, upstream, upstreamfigures
from e2e.bench.scheduler import generator as g

SUMMARY = """
clusterQueueClasses:
  cq:
    cpuAverageUsage: 11
    cpuUsed: 6600000000
    firstEventTime: "2026-12-01T17:00:00.123456789Z"
    lastEventTime: "2026-12-01T17:01:40.123456789Z"
    nominalQuota: 600000
droppedWorkloadEvents: 0
workloadClasses:
  large:
    averageTimeToAdmissionMs: 6000
    averageTimeToFinishMs: 7000
    count: 2
    totalEvictions: 1
  medium:
    averageTimeToAdmissionMs: 2000
    averageTimeToFinishMs: 2500
    count: 1
    totalEvictions: 0
  small:
    averageTimeToAdmissionMs: 1000
    averageTimeToFinishMs: 1200
    count: 1
    totalEvictions: 0
"""

WORKLOADS_CSV = """id,class name,namespace,name,ms to admitted,ms to finish,num evictions
1,large,ns-a,large-1,4000,5000,1
2,large,ns-a,large-2,8000,9000,0
3,medium,ns-a,medium-1,2000,2500,0
4,small,ns-a,small-1,1000,1200,0
"""

QUEUES_CSV = (
    "name,cohort,class name,CPU quota (mCPU),CPU used (mCPU * ms),CPU max usage (mCPU),"
    "monitor time (ms)\n"
    """cq-a,cohort-0,cq,20000,1000000000,20000,100000
cq-b,cohort-0,cq,20000,500000000,20000,100000
"""
)

RUNNER_LOG = (
    "2026-12-01T17:01:00Z\tINFO\tRun generator\tmain.go:330\t"
    'Generator done\t{"duration": "1m2.5s"}\n'
)


def upstream_figures() -> report.Figures:
    return upstreamfigures.figures_from(
        g.scenario("baseline"),
        summary=yaml.safe_load(SUMMARY),
        cmd_stats={"wallMs": 441000, "userMs": 100000, "sysMs": 24900, "maxrss": 632832},
        workloads=upstreamfigures.read_workloads(WORKLOADS_CSV),
        queues=upstreamfigures.read_queues(QUEUES_CSV),
        runner_log=RUNNER_LOG,
    )


def test_usage_is_upstreams_checker_arithmetic() -> None:
    # cpuUsed x 100 / (nominalQuota x elapsed ms): 6.6e9 x 100 / (600,000 x 100,000 ms) = 11 %.
    assert upstreamfigures.class_usage_percent(yaml.safe_load(SUMMARY)) == pytest.approx(11.0)


def test_upstreams_files_become_the_same_figures_as_kfeds_benchmark() -> None:
    f = upstream_figures()
    assert f.wall_seconds == 441.0
    assert f.generation_seconds == pytest.approx(62.5)
    assert f.usage.class_percent == pytest.approx(11.0)
    assert f.usage.mean_percent == pytest.approx(37.5)  # 50 % and 25 % per queue
    assert f.usage.min_percent == pytest.approx(25.0)
    assert f.usage.held_percent is None
    large = next(c for c in f.classes if c.name == "large")
    # The average is upstream's own (its summary); the percentiles come from its CSV.
    assert large.avg_time_to_admission == 6.0
    assert (large.count, large.admitted, large.finished, large.evictions) == (2, 2, 2, 1)
    assert large.max_time_to_admission == 8.0
    assert "n/a" in report.render(g.scenario("baseline"), f)


def test_minimalkueues_own_cpu_and_memory_come_from_its_runners_rusage() -> None:
    figures = upstreamfigures.minimalkueue_process(
        {"userMs": 100000, "sysMs": 24900, "maxrss": 632832}
    )
    assert figures.cpu_seconds == pytest.approx(124.9)
    assert figures.peak_rss_mib == pytest.approx(618.0)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1m2.5s", 62.5), ("850ms", 0.85), ("1h0m1s", 3601.0), ("7m21.123s", 441.123)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert upstreamfigures.go_duration_seconds(text) == pytest.approx(seconds)


def test_a_log_without_the_generators_line_gives_no_generation_time() -> None:
    assert upstreamfigures.generation_seconds("Start runner\n") == 0.0


def a_report(
    wall: float, waits: tuple[float, float, float], cpu: float, controller: str, evictions: int
) -> dict[str, Any]:
    classes = [
        {
            "name": name,
            "admitted": count,
            "evictions": evictions if name == "small" else 0,
            "avg_time_to_admission": wait,
            "p95_time_to_admission": 2 * wait,
        }
        for name, wait, count in zip(
            ("large", "medium", "small"), waits, (1500, 3000, 10500), strict=True
        )
    ]
    return {
        "figures": {
            "wall_seconds": wall,
            "usage": {"class_percent": 60.0},
            "classes": classes,
            "processes": {
                controller: {"cpu_seconds": cpu, "peak_rss_mib": 400.0},
                "kube-apiserver": {"cpu_seconds": 300.0},
                "etcd": {"cpu_seconds": 20.0},
            },
            "load_average_before": [0.5, 0.5, 0.5],
            "load_average_after": [3.0, 3.0, 3.0],
        }
    }


RANGESPEC = {
    "cmd": {"maxWallMs": 425000},
    "clusterQueueClassesMinUsage": {"cq": 55},
    "wlClassesMaxAvgTimeToAdmissionMs": {"large": 11000, "medium": 90000, "small": 260000},
}


def test_the_comparison_gives_ratios_gates_and_goals() -> None:
    kfed = a_report(300.0, (10.0, 60.0, 120.0), 150.0, compare.KFED_CONTROLLER, 40)
    up = a_report(441.0, (6.0, 70.0, 220.0), 125.0, compare.UPSTREAM_CONTROLLER, 48)
    up["upstream_rangespec"] = RANGESPEC
    result = compare.comparison(kfed, up)
    rows = {r["figure"]: r for r in result["rows"]}
    assert rows["wall (s)"]["ratio"] == pytest.approx(300 / 441, abs=1e-3)
    assert rows["wall (s)"]["upstream_passes"] is False
    assert rows["wall (s)"]["kfed_passes"] is True
    assert rows["avg time to admission, large (s)"]["gate"] == {"kind": "max", "limit": 11.0}
    assert rows["usage, cq class (%)"]["gate"] == {"kind": "min", "limit": 55.0}
    assert rows["evictions"]["kfed"] == 40
    assert rows["controller CPU per admitted workload (ms)"]["kfed"] == pytest.approx(10.0)
    verdicts = {goal["goal"]: goal["met"] for goal in result["goals"]}
    assert verdicts["wall <= 0.8x upstream's"] is True
    assert verdicts["large: admitted sooner than upstream"] is False
    assert verdicts["medium: admitted sooner than upstream"] is True
    assert verdicts["controller CPU per admitted workload <= 1.0x upstream's"] is False
    text = compare.render(result)
    assert "MISSED" in text and "up FAIL, kfed pass" in text


def test_a_figure_upstream_did_not_measure_has_no_ratio() -> None:
    assert compare.ratio(3.0, 0.0) is None


def test_upstreams_run_is_judged_by_the_pinned_rangespec() -> None:
    judged = upstream.with_upstream_gates(g.scenario("baseline"), RANGESPEC)
    t = judged.thresholds
    assert (t.max_wall_seconds, t.min_usage_percent) == (425.0, 55.0)
    assert t.max_avg_time_to_admission_seconds == {"small": 260.0, "medium": 90.0, "large": 11.0}


def test_the_runner_starts_kfeds_controller_through_a_wrapper_that_execs_it(
    tmp_path: Path,
) -> None:
    """Upstream's runner starts ``--minimalKueue PATH --kubeconfig FILE [its flags]`` and
    measures that process's rusage: the wrapper must exec (not fork) kfed's controller with
    every argument, and the stats file is named after the wrapper."""
    controller = upstream.kfed_controller(tmp_path)
    text = controller.path.read_text()
    assert text.startswith("#!/bin/sh\n")
    assert " exec " in text and '-m e2e.bench.scheduler.controller_process "$@"' in text
    assert controller.path.stat().st_mode & 0o111
    assert controller.stats_file == "kfed-controllers.stats.yaml"
    assert controller.label == compare.KFED_CONTROLLER
    assert "--stats-every" not in text


def test_the_wrapper_appends_kfeds_internal_figures_to_the_stats_file(tmp_path: Path) -> None:
    stats = tmp_path / "kfed stats.log"
    text = upstream.kfed_controller(tmp_path, stats).path.read_text()
    assert f"\"$@\" --stats-every 10 >> '{stats}'\n" in text


def test_kfeds_controller_accepts_the_runners_options() -> None:
    args = controller_process.parse_args(
        ["--kubeconfig", "k", "--zap-log-level=2", "--metricsPort", "9090", "--enableTAS"]
    )
    assert args.kubeconfig == "k"
    assert args.ignored_metricsPort == "9090" and args.enableTAS
