"""What the drill's picture (plot.py) draws, from the report alone (pure): the drill's
moments as labelled lines, the title and headline figures, the workers' lanes and when each
could not be read, and the rows the moments' labels go in."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from manager.cli.drills.intervals import Interval
from manager.cli.drills.report import DrillReport, fmt

BREAK_NAMES = {"partition": "cut", "outage": "outage", "maintenance": "drain"}
STOP_NAMES = {"partition": "fenced", "outage": "fenced", "maintenance": "stopped"}


@dataclass(frozen=True, slots=True)
class Event:
    """A moment of the drill, drawn as a vertical line with its label."""

    at: float
    """Seconds since the break."""
    name: str
    color: str

    @property
    def label(self) -> str:
        return f"{self.name} {'0s' if self.at == 0 else fmt(self.at)}"


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def events(report: DrillReport) -> list[Event]:
    """The drill's moments, in time order; a phase no probe reached is left out."""
    target = report.cluster
    phases = {p.phase: p.p50 for p in report.phases}
    found: list[tuple[float | None, str, str]] = [
        (0.0, BREAK_NAMES.get(report.kind, "break"), "#000000"),
        (phases.get("detection"), "detected", "#9467bd"),
        (phases.get("stopped"), f"{STOP_NAMES.get(report.kind, 'stopped')} on {target}", "#8c564b"),
        (phases.get("eviction"), "evicted", "#e377c2"),
        (phases.get("re-dispatch"), "re-dispatched", "#17becf"),
        (phases.get("running elsewhere"), "running elsewhere", "#2ca02c"),
        (_median([p.resumed for p in report.probes]), f"resumed on {target}", "#2ca02c"),
    ]
    r = report.restoration
    if r.restored_at is not None:
        found.append((r.restored_at, "restored", "#1f77b4"))
        if r.active_again_after is not None:
            found.append((r.restored_at + r.active_again_after, "Active again", "#1f77b4"))
    found.append((report.timeline.end, "finish", "#555555"))
    result = [Event(at, name, color) for at, name, color in found if at is not None]
    return sorted(result, key=lambda e: e.at)


def headline(report: DrillReport) -> tuple[str, str]:
    """The title (the drill, its run, its verdict) and the line of headline figures."""
    verdict = "PASS" if report.exit_code == 0 else f"FAIL (exit {report.exit_code})"
    title = (
        f"kfed drill {report.kind} of {report.cluster} — run {report.run_id}, "
        f"{report.started_at[:19].replace('T', ' ')} UTC — {verdict}"
    )
    phases = {p.phase: p for p in report.phases}
    n = len(report.probes)
    detection, elsewhere = phases["detection"], phases["running elsewhere"]
    figures = [
        f"detection {fmt(detection.p50)}",
        f"running elsewhere {fmt(elsewhere.p50)} (p50; max {fmt(elsewhere.max)})",
        f"moved {report.moved_count}/{n}",
        f"resumed {report.resumed_count}/{n}",
        f"double runs {report.double_run_count} in {report.samples} samples "
        f"(every {report.interval:g}s)",
    ]
    return title, " · ".join(figures)


def workers(report: DrillReport) -> list[str]:
    """The workers' lanes, the broken one first."""
    others = sorted(c for c in report.timeline.readable if c != report.cluster)
    return [report.cluster, *others]


def unreadable(report: DrillReport, cluster: str) -> list[Interval]:
    """When the drill could not read ``cluster``: between and after its readable stretches
    (gaps as long as the report's), and all along when it never could."""
    tl = report.timeline
    gap = max(1.0, 4 * report.interval)
    stretches = tl.readable.get(cluster, [])
    if not stretches:
        return [Interval(tl.start, tl.end, (cluster,))]
    holes = [Interval(a.end, b.start, (cluster,)) for a, b in itertools.pairwise(stretches)]
    if stretches[0].start - tl.start > gap:
        holes.insert(0, Interval(tl.start, stretches[0].start, (cluster,)))
    if tl.end - stretches[-1].end > gap:
        holes.append(Interval(stretches[-1].end, tl.end, (cluster,)))
    return holes


def label_rows(spans: Sequence[tuple[float, float]], pad: float) -> list[int]:
    """For labels spanning (left, right), the lowest row each fits in without touching another
    (greedy, left to right): close events get stacked labels instead of overlapping ones."""
    order = sorted(range(len(spans)), key=lambda i: spans[i][0])
    ends: list[float] = []
    rows = [0] * len(spans)
    for i in order:
        left, right = spans[i]
        row = next((r for r, end in enumerate(ends) if left >= end + pad), len(ends))
        if row == len(ends):
            ends.append(right)
        else:
            ends[row] = right
        rows[i] = row
    return rows
