"""The samples a drill's watcher takes, and the interval maths on them: when a probe ran
(or had a copy) on each worker, when a worker could be read, when the manager had it lost,
and the double and unverified runs.

A probe *runs* on a worker from the first to the last of consecutive samples that saw one of
its pods Running there; a gap in a worker's samples (it could not be read) is bridged when the
probe ran on both sides of it. A **double run** is a moment when a probe ran on two workers:
two such intervals on different workers that overlap. A probe that ran on a worker just before
that worker became unobservable, while it ran elsewhere during the gap, is **unverified**: the
drill cannot tell.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


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
