"""What a failover drill measured, and what it means: each probe's timeline, the summary
per phase, and the verdict (exit code). Pure: it works on the samples the watcher took, with
times in seconds since the break (negative: before it); the interval maths is in
``intervals``, the text and JSON in ``output``.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from manager.cli.drills.intervals import (
    Interval,
    ManagerSample,
    WorkerSample,
    copy_intervals,
    double_runs,
    lost_intervals,
    readable,
    running_intervals,
    unobserved,
    unverified_runs,
)

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
