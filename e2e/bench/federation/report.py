"""The federation benchmark's results and their two renderings: a table for people (rich)
and JSON for tools. Pure: dataclasses in, text out."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from e2e.bench.federation.apirequests import ApiRequests
from e2e.bench.federation.managermetrics import ManagerMetrics
from e2e.bench.federation.stats import Summary


def mean_of(histogram: Mapping[int, int]) -> float:
    """Mean of a {value: how many} histogram."""
    total = sum(histogram.values())
    return sum(k * v for k, v in histogram.items()) / total if total else 0.0


@dataclass
class ModeResult:
    """One dispatch mode over the whole job set."""

    mode: str
    manager_args: list[str]
    jobs: int
    submitted: int
    finished: int
    complete: bool
    submit_seconds: float
    wall_seconds: float
    """From the first create call to every workload finished and its remote copies gone."""
    dispatch: Summary
    """Manager reservation seen -> a remote copy seen Admitted."""
    to_copy: Summary
    """Manager reservation seen -> the first remote copy seen (the manager's share)."""
    copy_to_admitted: Summary
    """First remote copy seen -> a copy seen Admitted (the worker's share)."""
    placement: Summary
    """Manager reservation seen -> the MultiKueue check seen Ready on the manager."""
    queueing: Summary
    """Create call returned -> manager reservation seen."""
    copies: dict[int, int]
    """{remote Workloads created for one workload: how many workloads}."""
    admitted_copies: dict[int, int]
    placements: dict[str, int]
    evictions: int
    cpu_seconds: dict[str, float]
    """Per process group, over the measured window (first create -> done)."""
    metrics: ManagerMetrics = field(default_factory=ManagerMetrics)
    submit_errors: list[str] = field(default_factory=list)
    negative_latencies: int = 0
    unfinished: list[dict[str, Any]] = field(default_factory=list)
    """The first workloads that did not finish, and where their copies were."""
    leftover_copies: list[str] = field(default_factory=list)
    """``worker: namespace/name`` of remote copies still there at the end."""
    api_requests: ApiRequests | None = None
    """Every apiserver's requests in the measured window and in an idle one before it."""
    idle_cpu_seconds: dict[str, float] = field(default_factory=dict)
    """Per process group, over the idle window (the manager ready, nothing submitted)."""

    @property
    def copies_per_workload(self) -> float:
        return mean_of(self.copies)

    @property
    def throughput(self) -> float:
        return self.finished / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def manager_cpu(self) -> float:
        return self.cpu_seconds.get("kfed manager", 0.0)

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "manager_args": self.manager_args,
            "jobs": self.jobs,
            "submitted": self.submitted,
            "finished": self.finished,
            "complete": self.complete,
            "submit_seconds": round(self.submit_seconds, 2),
            "wall_seconds": round(self.wall_seconds, 2),
            "throughput_jobs_per_second": round(self.throughput, 2),
            "dispatch_latency_seconds": self.dispatch.rounded(),
            "reserved_to_copy_seconds": self.to_copy.rounded(),
            "copy_to_admitted_seconds": self.copy_to_admitted.rounded(),
            "placement_recorded_latency_seconds": self.placement.rounded(),
            "submit_to_reserved_seconds": self.queueing.rounded(),
            "remote_workloads_per_workload": {
                "mean": round(self.copies_per_workload, 3),
                "max": max(self.copies, default=0),
                "histogram": {str(k): v for k, v in sorted(self.copies.items())},
                "total": sum(k * v for k, v in self.copies.items()),
            },
            "remote_copies_admitted_per_workload": {
                "mean": round(mean_of(self.admitted_copies), 3),
                "histogram": {str(k): v for k, v in sorted(self.admitted_copies.items())},
            },
            "placements": dict(sorted(self.placements.items())),
            "evictions": self.evictions,
            "cpu_seconds": {k: round(v, 2) for k, v in self.cpu_seconds.items()},
            "manager_cpu_seconds": round(self.manager_cpu, 2),
            "manager_metrics": self.metrics.to_json(),
            "submit_errors": len(self.submit_errors),
            "first_submit_error": self.submit_errors[0] if self.submit_errors else None,
            "copies_seen_admitted_before_reservation": self.negative_latencies,
            "unfinished": self.unfinished,
            "leftover_copies": self.leftover_copies,
            "api_requests": self.api_requests.to_json() if self.api_requests else None,
            "idle_cpu_seconds": {k: round(v, 2) for k, v in self.idle_cpu_seconds.items()},
        }


@dataclass
class DrillResult:
    index: int
    probe: str
    flavor: str
    from_cluster: str | None = None
    to_cluster: str | None = None
    failover_seconds: float | None = None
    """Cut -> the probe's pod seen Running on another worker."""
    fenced_seconds: float | None = None
    """Cut -> the probe's pod seen stopped on the cut worker (its shim fenced it)."""
    max_clusters: int = 0
    """Most workers seen running the probe at once (1 is right; 2 is a double run)."""
    samples: int = 0
    error: str | None = None

    @property
    def fence_margin_seconds(self) -> float | None:
        """How long before the new start the old pod had stopped."""
        if self.failover_seconds is None or self.fenced_seconds is None:
            return None
        return self.failover_seconds - self.fenced_seconds

    def to_json(self) -> dict[str, Any]:
        def r(value: float | None) -> float | None:
            return None if value is None else round(value, 3)

        return {
            "index": self.index,
            "probe": self.probe,
            "flavor": self.flavor,
            "from": self.from_cluster,
            "to": self.to_cluster,
            "cut_to_running_elsewhere_seconds": r(self.failover_seconds),
            "cut_to_stopped_on_cut_worker_seconds": r(self.fenced_seconds),
            "fence_margin_seconds": r(self.fence_margin_seconds),
            "max_clusters_running": self.max_clusters,
            "samples": self.samples,
            "error": self.error,
        }


@dataclass
class DrillsResult:
    manager_args: list[str]
    failover_settings: dict[str, float]
    """The manager's failover flags, and the fenced-failover window they give."""
    drills: list[DrillResult] = field(default_factory=list)

    @property
    def failover(self) -> Summary:
        return Summary.of(d.failover_seconds for d in self.drills if d.failover_seconds is not None)

    @property
    def double_runs(self) -> int:
        return sum(1 for d in self.drills if d.max_clusters >= 2)

    @property
    def failed(self) -> int:
        return sum(1 for d in self.drills if d.failover_seconds is None)

    def to_json(self) -> dict[str, Any]:
        return {
            "manager_args": self.manager_args,
            "failover_settings": self.failover_settings,
            "drills": len(self.drills),
            "failed": self.failed,
            "double_runs": self.double_runs,
            "cut_to_running_elsewhere_seconds": self.failover.rounded(),
            "per_drill": [d.to_json() for d in self.drills],
        }


@dataclass
class Report:
    settings: dict[str, Any]
    modes: list[ModeResult] = field(default_factory=list)
    drills: DrillsResult | None = None
    load_average_start: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_average_end: tuple[float, float, float] = (0.0, 0.0, 0.0)
    duration_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    aborted: str | None = None
    """Why the run stopped early, if it did."""

    @property
    def passed(self) -> bool:
        """Every mode completed, every drill failed over, and nothing ever ran twice."""
        if self.aborted is not None:
            return False
        modes_ok = all(m.complete and not m.submit_errors for m in self.modes)
        drills_ok = self.drills is None or (
            self.drills.failed == 0 and self.drills.double_runs == 0
        )
        return modes_ok and drills_ok

    def to_json(self) -> dict[str, Any]:
        return {
            "benchmark": "federation",
            "settings": self.settings,
            "modes": [m.to_json() for m in self.modes],
            "drills": self.drills.to_json() if self.drills is not None else None,
            "load_average": {
                "start": [round(x, 2) for x in self.load_average_start],
                "end": [round(x, 2) for x in self.load_average_end],
            },
            "duration_seconds": round(self.duration_seconds, 1),
            "notes": self.notes,
            "aborted": self.aborted,
            "passed": self.passed,
        }


def dumps(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2)


# -- the table -------------------------------------------------------------------------------


def _s(value: float) -> str:
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def dispatch_table(modes: list[ModeResult]) -> Table:
    table = Table(title="dispatch: manager reservation -> remote admission", title_justify="left")
    table.add_column("")
    for m in modes:
        table.add_column(m.mode, justify="right")

    def row(label: str, cell: Any) -> None:
        table.add_row(label, *(cell(m) for m in modes))

    row("jobs finished / submitted", lambda m: f"{m.finished} / {m.submitted}")
    row("wall s (of which submitting)", lambda m: f"{m.wall_seconds:.1f} ({m.submit_seconds:.1f})")
    row("throughput jobs/s", lambda m: f"{m.throughput:.2f}")
    row("dispatch latency p50 s", lambda m: _s(m.dispatch.p50))
    row("dispatch latency p99 s", lambda m: _s(m.dispatch.p99))
    row("dispatch latency max s", lambda m: _s(m.dispatch.max))
    row("  reserved -> copy p50 / p99 s", lambda m: f"{_s(m.to_copy.p50)} / {_s(m.to_copy.p99)}")
    row(
        "  copy -> admitted p50 / p99 s",
        lambda m: f"{_s(m.copy_to_admitted.p50)} / {_s(m.copy_to_admitted.p99)}",
    )
    row(
        "placement recorded p50 / p99 s", lambda m: f"{_s(m.placement.p50)} / {_s(m.placement.p99)}"
    )
    row("submit -> reserved p50 / p99 s", lambda m: f"{_s(m.queueing.p50)} / {_s(m.queueing.p99)}")
    row("remote Workloads per workload", lambda m: f"{m.copies_per_workload:.2f}")
    row("copies admitted per workload", lambda m: f"{mean_of(m.admitted_copies):.2f}")
    row(
        "placements",
        lambda m: " ".join(
            f"{k.removeprefix('worker-')}:{v}" for k, v in sorted(m.placements.items())
        ),
    )
    row("evictions", lambda m: str(m.evictions))
    names = list(dict.fromkeys(k for m in modes for k in m.cpu_seconds))
    for name in names:
        row(f"CPU s: {name}", lambda m, n=name: f"{m.cpu_seconds.get(n, 0.0):.1f}")
    row(
        "metrics: remote Workloads / Jobs created",
        lambda m: (
            f"{int(sum(m.metrics.dispatched.values()))} / "
            f"{int(m.metrics.remote_objects.get('Job', 0))}"
            if m.metrics.present
            else "n/a"
        ),
    )
    row(
        "metrics: latency mean / p50~ / p99~ s",
        lambda m: (
            f"{_s(m.metrics.latency_mean)} / {_s(m.metrics.latency_quantile(0.5))} / "
            f"{_s(m.metrics.latency_quantile(0.99))}"
            if m.metrics.latency_count
            else "n/a"
        ),
    )
    return table


def _opt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def requests_table(mode: str, requests: ApiRequests) -> Table:
    table = Table(
        title=(
            f"API requests per workload, {mode}: window {requests.window_seconds:.0f} s, "
            f"background from an idle window of {requests.idle_seconds:.0f} s before it"
        ),
        title_justify="left",
    )
    for name in ("cluster", "workloads", "requests", "background", "net", "per wl", "net per wl"):
        table.add_column(name, justify="left" if name == "cluster" else "right")
    for c in requests.rows():
        table.add_row(
            c.name,
            str(c.workloads),
            str(c.requests),
            f"{c.background():.0f}",
            f"{c.net():.0f}",
            _opt(c.per_workload(c.requests)),
            _opt(c.per_workload(c.net())),
        )
    return table


def requests_notes(requests: ApiRequests) -> list[str]:
    lines = [
        "counted: every request each kube-apiserver served (kfed, the benchmark's 1 POST jobs "
        "per workload on the manager and its watches, controller-manager, scheduler, kwok); "
        "WATCH counted when it ends; background = the idle window's rate x the window; "
        "net = requests - background; chosen worker = the workers that ran workloads over "
        "the workloads they ran; workers (all) = every worker over every workload",
    ]
    for c in requests.rows():
        top = ", ".join(f"{k} {v:.2f}" for k, v in c.top(6))
        if top:
            lines.append(f"  net per workload, {c.name}: {top}")
    for c in [requests.manager, *requests.workers]:
        idle = ", ".join(f"{k} {v:.2f}" for k, v in c.top_background())
        rate = c.background() / requests.window_seconds if requests.window_seconds > 0 else 0.0
        lines.append(f"  idle {c.name}: {rate:.1f} requests/s ({idle})")
    for c in [requests.manager, *requests.workers]:
        failed = sorted(c.measured.failed.items(), key=lambda kv: -kv[1])[:4]
        if failed:
            lines.append(f"  failed {c.name}: " + ", ".join(f"{k} x{v}" for k, v in failed))
    return lines


def drills_table(result: DrillsResult) -> Table:
    table = Table(
        title="partition drills: cut -> running elsewhere (never twice)", title_justify="left"
    )
    for name in (
        "#",
        "flavor",
        "from -> to",
        "cut->stopped s",
        "cut->running s",
        "margin s",
        "max run",
    ):
        table.add_column(name, justify="right" if name not in ("flavor", "from -> to") else "left")

    def opt(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    for d in result.drills:
        table.add_row(
            str(d.index),
            d.flavor,
            f"{d.from_cluster or '?'} -> {d.to_cluster or '?'}",
            opt(d.fenced_seconds),
            opt(d.failover_seconds) if d.error is None else f"[red]{d.error[:40]}[/red]",
            opt(d.fence_margin_seconds),
            str(d.max_clusters),
        )
    return table


def render(report: Report, *, width: int = 110) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, record=True, force_terminal=False)
    if report.modes:
        console.print(dispatch_table(report.modes))
    for m in report.modes:
        if m.api_requests is not None:
            console.print(requests_table(m.mode, m.api_requests))
            for line in requests_notes(m.api_requests):
                console.print(line)
    for m in report.modes:
        for straggler in m.unfinished[:3]:
            console.print(f"{m.mode}: did not finish: {json.dumps(straggler)}")
        if m.leftover_copies:
            console.print(f"{m.mode}: copies left on workers: {', '.join(m.leftover_copies)}")
    if report.drills is not None:
        d = report.drills
        console.print(drills_table(d))
        f = d.failover
        console.print(
            f"cut -> running elsewhere: p50 {f.p50:.2f}s, max {f.max:.2f}s over {f.count} drills; "
            f"failed {d.failed}; double runs {d.double_runs} (must be 0); "
            f"fenced-failover window {d.failover_settings.get('window_seconds', 0):.1f}s"
        )
    load = " ".join(f"{x:.2f}" for x in report.load_average_start)
    load_end = " ".join(f"{x:.2f}" for x in report.load_average_end)
    console.print(
        f"load average at start {load}, at end {load_end}; "
        f"took {report.duration_seconds:.0f}s; {'PASS' if report.passed else 'FAIL'}"
    )
    if report.aborted is not None:
        console.print(f"ABORTED: {report.aborted}")
    for note in report.notes:
        console.print(f"note: {note}")
    return console.export_text()
