"""What a failover drill measured, and what it means: the timeline of every probe, double
runs, the summary per phase, the verdict (exit code), and the report as text and JSON.

Pure: it works on the samples the watcher took (``drillwatch``), with times in seconds since
the break (negative: before it). A worker sample says which probes had a Running pod and which
had a Workload copy on that worker at that moment; a manager sample says whether the manager
reported the broken cluster lost and where it had each probe placed.

A probe *runs* on a worker from the first to the last of consecutive samples that saw one of
its pods Running there; a gap in a worker's samples (it could not be read) is bridged when the
probe ran on both sides of it. A **double run** is a moment when a probe ran on two workers:
two such intervals on different workers that overlap. A probe that ran on a worker just before
that worker became unobservable, while it ran elsewhere during the gap, is **unverified**: the
drill cannot tell.
"""

from __future__ import annotations

import itertools
import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.console import Group
from rich.text import Text

from manager.cli.tables import table

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_DOUBLE_RUN = 4
"""A probe ran on two clusters at once: the federation broke its promise."""

PHASES = (
    ("detection", "the manager noticed: cluster reported lost, or the probe evicted from it"),
    ("stopped", "the probe's pods no longer run on the broken cluster"),
    ("eviction", "the manager took the probe off the broken cluster"),
    ("re-dispatch", "a copy of the probe was created on another cluster"),
    ("running elsewhere", "the probe's pod runs on another cluster"),
)


@dataclass(frozen=True, slots=True)
class WorkerSample:
    """One read of one worker, made directly with its own kubeconfig."""

    at: float
    """Seconds since the break (the middle of the request)."""
    cluster: str
    running: frozenset[str]
    """Probes with a Running pod there."""
    copies: frozenset[str]
    """Probes with a Workload copy there."""


@dataclass(frozen=True, slots=True)
class ManagerSample:
    """One read of the manager: the broken cluster's Active condition and each probe's
    placement (the admission check's ``clusterName`` while admitted)."""

    at: float
    cluster_lost: bool
    placed_on: Mapping[str, str]
    """Probe -> the cluster the manager has it admitted on; "" while it is not."""


@dataclass(frozen=True, slots=True)
class Interval:
    start: float
    end: float
    clusters: tuple[str, ...] = ()

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


@dataclass(frozen=True, slots=True)
class ProbeResult:
    probe: str
    moved_to: str
    """The cluster it ran on after the break ("" when it never ran elsewhere)."""
    detection: float | None
    stopped: float | None
    eviction: float | None
    redispatch: float | None
    running_elsewhere: float | None
    margin: float | None
    """Running elsewhere minus stopped on the broken cluster: the gap between the two runs
    (negative: they overlapped)."""
    double_runs: list[Interval] = field(default_factory=list)
    unverified: list[Interval] = field(default_factory=list)
    resumed: float | None = None
    """When it was seen running on the broken cluster again after the restore, having run
    nowhere else: the at-most-once outcome of an outage the manager could not see through
    (None when it moved, or never ran again)."""

    @property
    def settled(self) -> bool:
        """It runs again: elsewhere, or on the restored cluster."""
        return bool(self.moved_to) or self.resumed is not None

    def phase(self, name: str) -> float | None:
        return {
            "detection": self.detection,
            "stopped": self.stopped,
            "eviction": self.eviction,
            "re-dispatch": self.redispatch,
            "running elsewhere": self.running_elsewhere,
        }[name]


@dataclass(frozen=True, slots=True)
class PhaseSummary:
    phase: str
    meaning: str
    p50: float | None
    max: float | None
    reached: int
    """How many probes reached this phase."""


# -- intervals -------------------------------------------------------------------------------


def _by_cluster(samples: Iterable[WorkerSample]) -> dict[str, list[WorkerSample]]:
    result: dict[str, list[WorkerSample]] = {}
    for sample in sorted(samples, key=lambda s: s.at):
        result.setdefault(sample.cluster, []).append(sample)
    return result


def _stretches(
    times_seen: Iterable[tuple[float, bool]], clusters: tuple[str, ...] = ()
) -> list[Interval]:
    """Runs of consecutive (time, seen) samples with ``seen`` true, from the first to the last
    sample of each run."""
    result: list[Interval] = []
    start: float | None = None
    last = 0.0
    for at, seen in times_seen:
        if seen:
            if start is None:
                start = at
            last = at
        elif start is not None:
            result.append(Interval(start, last, clusters))
            start = None
    if start is not None:
        result.append(Interval(start, last, clusters))
    return result


def running_intervals(samples: Sequence[WorkerSample], cluster: str, probe: str) -> list[Interval]:
    """When ``probe`` ran on ``cluster``: runs of consecutive samples that saw it Running."""
    own = _by_cluster(samples).get(cluster, [])
    return _stretches(((s.at, probe in s.running) for s in own), (cluster,))


def copy_intervals(samples: Sequence[WorkerSample], cluster: str, probe: str) -> list[Interval]:
    """When ``probe`` had a Workload copy on ``cluster``: runs of consecutive samples."""
    own = _by_cluster(samples).get(cluster, [])
    return _stretches(((s.at, probe in s.copies) for s in own), (cluster,))


def readable(samples: Sequence[WorkerSample], cluster: str, *, gap: float) -> list[Interval]:
    """The stretches when the drill could read ``cluster``: its samples, split where two in a
    row are more than ``gap`` apart (the complement of ``unobserved``)."""
    times = [s.at for s in _by_cluster(samples).get(cluster, [])]
    if not times:
        return []
    breaks = [(a, b) for a, b in itertools.pairwise(times) if b - a > gap]
    starts = [times[0], *(b for _, b in breaks)]
    ends = [*(a for a, _ in breaks), times[-1]]
    return [Interval(a, b, (cluster,)) for a, b in zip(starts, ends, strict=True)]


def lost_intervals(manager: Sequence[ManagerSample], cluster: str) -> list[Interval]:
    """When the manager reported ``cluster`` lost: runs of consecutive manager samples."""
    ordered = sorted(manager, key=lambda m: m.at)
    return _stretches(((m.at, m.cluster_lost) for m in ordered), (cluster,))


def overlaps(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    """Where intervals of ``a`` and ``b`` overlap (touching counts: both were seen at once)."""
    result = []
    for x in a:
        for y in b:
            start, end = max(x.start, y.start), min(x.end, y.end)
            if start <= end:
                result.append(Interval(start, end, tuple(sorted({*x.clusters, *y.clusters}))))
    return sorted(result, key=lambda i: i.start)


def double_runs(samples: Sequence[WorkerSample], probe: str) -> list[Interval]:
    """Every moment the probe ran on two clusters at once."""
    clusters = sorted({s.cluster for s in samples})
    runs = {c: running_intervals(samples, c, probe) for c in clusters}
    found: list[Interval] = []
    for i, first in enumerate(clusters):
        for second in clusters[i + 1 :]:
            found.extend(overlaps(runs[first], runs[second]))
    return sorted(found, key=lambda x: x.start)


def unobserved(
    samples: Sequence[WorkerSample],
    clusters: Iterable[str],
    *,
    start: float,
    end: float,
    gap: float,
) -> dict[str, list[Interval]]:
    """Per cluster, the stretches between ``start`` and ``end`` longer than ``gap`` without a
    sample (the cluster could not be read)."""
    by_cluster = _by_cluster(samples)
    result: dict[str, list[Interval]] = {}
    for cluster in sorted(clusters):
        times = [start, *(s.at for s in by_cluster.get(cluster, []) if start <= s.at <= end), end]
        holes = [Interval(a, b, (cluster,)) for a, b in itertools.pairwise(times)]
        result[cluster] = [h for h in holes if h.end - h.start > gap]
    return result


def unverified_runs(
    samples: Sequence[WorkerSample], probe: str, holes: Mapping[str, list[Interval]]
) -> list[Interval]:
    """Stretches when the probe ran somewhere while another cluster, which ran it at its last
    sample before going dark, could not be read."""
    by_cluster = _by_cluster(samples)
    found: list[Interval] = []
    for dark, dark_holes in holes.items():
        for hole in dark_holes:
            before = [s for s in by_cluster.get(dark, []) if s.at <= hole.start]
            if not before or probe not in before[-1].running:
                continue
            for other in by_cluster:
                if other == dark:
                    continue
                for run in running_intervals(samples, other, probe):
                    start, end = max(run.start, hole.start), min(run.end, hole.end)
                    if start <= end:
                        found.append(Interval(start, end, tuple(sorted((dark, other)))))
    return sorted(found, key=lambda x: x.start)


# -- one probe --------------------------------------------------------------------------------


def _first(values: Iterable[float]) -> float | None:
    return min(values, default=None)


def probe_result(
    probe: str,
    target: str,
    samples: Sequence[WorkerSample],
    manager: Sequence[ManagerSample],
    holes: Mapping[str, list[Interval]],
    restored_at: float | None = None,
) -> ProbeResult:
    after = [s for s in samples if s.at >= 0]
    lost = _first(m.at for m in manager if m.at >= 0 and m.cluster_lost)
    evicted = _first(m.at for m in manager if m.at >= 0 and m.placed_on.get(probe, "") != target)
    stopped = _first(s.at for s in after if s.cluster == target and probe not in s.running)
    redispatched = _first(s.at for s in after if s.cluster != target and probe in s.copies)
    elsewhere = [s for s in after if s.cluster != target and probe in s.running]
    running = min(elsewhere, key=lambda s: s.at) if elsewhere else None
    detection = _first(t for t in (lost, evicted) if t is not None)
    resumed = None
    if running is None and restored_at is not None:
        back = [s for s in after if s.at >= restored_at and s.cluster == target]
        resumed = _first(s.at for s in back if probe in s.running)
    return ProbeResult(
        probe=probe,
        moved_to=running.cluster if running else "",
        detection=detection,
        stopped=stopped,
        eviction=evicted,
        redispatch=redispatched,
        running_elsewhere=running.at if running else None,
        margin=running.at - stopped if running is not None and stopped is not None else None,
        double_runs=double_runs(samples, probe),
        unverified=unverified_runs(samples, probe, holes),
        resumed=resumed,
    )


def summarize(results: Sequence[ProbeResult]) -> list[PhaseSummary]:
    summary = []
    for name, meaning in PHASES:
        values = [v for r in results if (v := r.phase(name)) is not None]
        summary.append(
            PhaseSummary(
                phase=name,
                meaning=meaning,
                p50=statistics.median(values) if values else None,
                max=max(values) if values else None,
                reached=len(values),
            )
        )
    return summary


# -- the whole drill ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Restoration:
    actions: list[str]
    """What was put back, one line each."""
    restored_at: float | None
    """Seconds since the break when the cluster was restored."""
    active_again_after: float | None
    """Seconds from restoring until the manager reported the cluster Active again (None:
    not within the timeout)."""
    cleaned_after: float | None
    """Seconds from restoring until no copy of a probe was left on the cluster (None: not
    within the timeout)."""


@dataclass(frozen=True, slots=True)
class Timeline:
    """What the drill saw over time, for its picture (``drillplot``); seconds since the
    break, negative before it."""

    start: float
    """The first sample (the watch starts just before the break)."""
    end: float
    """When the drill stopped watching (restored, Active again, copies gone, or timeouts)."""
    readable: dict[str, list[Interval]]
    """Cluster -> the stretches when the drill could read it directly."""
    copies: dict[str, dict[str, list[Interval]]]
    """Probe -> cluster -> when a Workload copy of it was there."""
    lost: list[Interval]
    """When the manager reported the broken cluster lost."""


@dataclass(frozen=True, slots=True)
class DrillReport:
    kind: str
    cluster: str
    run_id: str
    started_at: str
    """UTC wall-clock time of the break (ISO 8601)."""
    queue: str
    flavor: str
    breaking: str
    """How the cluster was broken, in one sentence."""
    timeout: float
    interval: float
    probes: list[ProbeResult]
    phases: list[PhaseSummary]
    restoration: Restoration
    samples: int
    unobserved: dict[str, list[Interval]]
    running: dict[str, dict[str, list[Interval]]]
    """Probe -> cluster -> when it ran there."""
    notes: list[str]
    problems: list[str]
    exit_code: int
    timeline: Timeline

    @property
    def double_run_count(self) -> int:
        return sum(1 for p in self.probes if p.double_runs)

    @property
    def moved_count(self) -> int:
        return sum(1 for p in self.probes if p.moved_to)

    @property
    def resumed_count(self) -> int:
        return sum(1 for p in self.probes if p.resumed is not None)


def verdict(
    kind: str,
    cluster: str,
    probes: Sequence[ProbeResult],
    restoration: Restoration,
    *,
    timeout: float,
) -> tuple[int, list[str]]:
    """The exit code and the problems behind it: 4 when a probe ran twice; 1 when a probe ran
    neither elsewhere nor on the restored cluster, or the cluster did not come back; else 0.
    A probe that stayed on the broken cluster and ran on there once it was restored passes:
    under the at-most-once policy nothing may move while the old copy could still run."""
    problems = []
    doubled = [p for p in probes if p.double_runs]
    for p in doubled:
        spans = ", ".join(
            f"{'+'.join(i.clusters)} {fmt(i.start)}..{fmt(i.end)}" for i in p.double_runs
        )
        problems.append(f"{p.probe} ran on two clusters at once: {spans}")
    stuck = [p.probe for p in probes if not p.settled]
    if stuck:
        problems.append(
            f"{len(stuck)} of {len(probes)} probe(s) ran neither elsewhere nor on {cluster} "
            f"after it was restored (each phase up to {timeout:g}s) after the {kind}: "
            f"{', '.join(stuck)}"
        )
    if restoration.restored_at is None:
        problems.append(f"{cluster} was not restored: {'; '.join(restoration.actions)}")
    elif restoration.active_again_after is None:
        problems.append(f"{cluster} did not become Active again within {timeout:g}s of restoring")
    if doubled:
        return EXIT_DOUBLE_RUN, problems
    return (EXIT_FAILED if problems else EXIT_OK), problems


def build(
    *,
    kind: str,
    cluster: str,
    run_id: str,
    started_at: str,
    queue: str,
    flavor: str,
    breaking: str,
    timeout: float,
    interval: float,
    probes: Sequence[str],
    samples: Sequence[WorkerSample],
    manager: Sequence[ManagerSample],
    clusters: Sequence[str],
    end: float,
    restoration: Restoration,
    notes: Sequence[str] = (),
) -> DrillReport:
    """The report, from the samples taken between the break (0) and ``end``."""
    gap = max(1.0, 4 * interval)
    holes = unobserved(samples, clusters, start=0.0, end=end, gap=gap)
    results = [
        probe_result(p, cluster, samples, manager, holes, restoration.restored_at) for p in probes
    ]
    code, problems = verdict(kind, cluster, results, restoration, timeout=timeout)
    all_notes = list(notes)
    for name, dark in holes.items():
        if dark:
            total = sum(i.seconds for i in dark)
            all_notes.append(
                f"{name} could not be read for {fmt(total)} in all (runs there then are "
                "unknown to the drill)"
            )
    unverified = [p.probe for p in results if p.unverified and not p.double_runs]
    if unverified:
        all_notes.append(
            "double runs cannot be ruled out for "
            + ", ".join(unverified)
            + ": they ran elsewhere while a cluster that ran them could not be read"
        )
    return DrillReport(
        kind=kind,
        cluster=cluster,
        run_id=run_id,
        started_at=started_at,
        queue=queue,
        flavor=flavor,
        breaking=breaking,
        timeout=timeout,
        interval=interval,
        probes=results,
        phases=summarize(results),
        restoration=restoration,
        samples=len(samples) + len(manager),
        unobserved={k: v for k, v in holes.items() if v},
        running={p: {c: running_intervals(samples, c, p) for c in clusters} for p in probes},
        notes=all_notes,
        problems=problems,
        exit_code=code,
        timeline=Timeline(
            start=min([*(s.at for s in samples), *(m.at for m in manager)], default=0.0),
            end=end,
            readable={c: readable(samples, c, gap=gap) for c in clusters},
            copies={p: {c: copy_intervals(samples, c, p) for c in clusters} for p in probes},
            lost=lost_intervals(manager, cluster),
        ),
    )


# -- output ------------------------------------------------------------------------------------


def fmt(seconds: float | None) -> str:
    """Seconds for people: 0.42s, 6.3s, 2m05s; "-" for never."""
    if seconds is None:
        return "-"
    if abs(seconds) < 1:
        return f"{seconds:.2f}s"
    if abs(seconds) < 120:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest:02d}s"


def render(report: DrillReport, *, output_path: str | None = None) -> Group:
    """The report as people read it: what was done, the phases (p50/max), one row per probe,
    the double-run count, the restoration and the verdict."""
    n = len(report.probes)
    parts: list[Any] = [
        Text(
            f"kfed drill {report.kind} of {report.cluster} (run {report.run_id}, "
            f"{report.started_at})",
            style="bold",
        ),
        Text(f"  probes:   {n} Job(s) in {report.queue}, flavor {report.flavor}"),
        Text(f"  break:    {report.breaking}"),
        Text(""),
        table(
            ("phase (since the break)", "p50", "max", "probes"),
            ((p.phase, fmt(p.p50), fmt(p.max), f"{p.reached}/{n}") for p in report.phases),
        ),
        Text(""),
        table(
            (
                "probe",
                "moved to",
                "detected",
                "stopped",
                "evicted",
                "re-dispatched",
                "running",
                "gap",
                "double run",
            ),
            (
                (
                    p.probe,
                    p.moved_to or ("resumed there" if p.resumed is not None else "-"),
                    fmt(p.detection),
                    fmt(p.stopped),
                    fmt(p.eviction),
                    fmt(p.redispatch),
                    fmt(p.running_elsewhere),
                    fmt(p.margin),
                    "YES" if p.double_runs else ("unverified" if p.unverified else "no"),
                )
                for p in report.probes
            ),
        ),
        Text(""),
        Text(
            f"double runs: {report.double_run_count} "
            f"({report.samples} samples, every {report.interval:g}s per cluster)",
            style="bold red" if report.double_run_count else "bold",
        ),
        Text(
            f"moved: {report.moved_count} of {n} probe(s) ran elsewhere; resumed: "
            f"{report.resumed_count} ran on {report.cluster} once it was restored"
        ),
    ]
    r = report.restoration
    for action in r.actions:
        parts.append(Text(f"restored: {action}"))
    if r.restored_at is not None:
        parts.append(
            Text(
                f"restored at {fmt(r.restored_at)}; {report.cluster} Active again after "
                f"{fmt(r.active_again_after)}; probe copies gone from it after "
                f"{fmt(r.cleaned_after)}"
            )
        )
    for note in report.notes:
        parts.append(Text(f"note: {note}", style="yellow"))
    for problem in report.problems:
        parts.append(Text(f"problem: {problem}", style="red"))
    result = "PASS" if report.exit_code == EXIT_OK else f"FAIL (exit {report.exit_code})"
    written = f"; report written to {output_path}" if output_path else ""
    parts.append(
        Text(
            f"result: {result}{written}", style="bold green" if not report.exit_code else "bold red"
        )
    )
    return Group(*parts)


def as_json(report: DrillReport) -> str:
    """The whole report for scripts; times in seconds since the break, to the millisecond."""
    data = asdict(report)
    data["double_runs"] = report.double_run_count
    data["moved"] = report.moved_count
    data["resumed"] = report.resumed_count
    data["passed"] = report.exit_code == EXIT_OK
    return json.dumps(_milliseconds(data), indent=2) + "\n"


def _milliseconds(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: _milliseconds(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_milliseconds(v) for v in value]
    return value
