"""The recent past of a process, for the dashboard's charts: a sample every few seconds,
kept in memory over a window (30 minutes by default). A page reload keeps it; a restart
starts it again (a Prometheus server keeps the long history: docs/metrics.md).

A sample holds levels (pending and admitted workloads per ClusterQueue, GPU quota reserved
per worker and flavor) and the running totals of two counters (dispatch latency sum and
count per worker, failovers per worker); the charts show the counters per interval, as the
difference between two samples.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from manager.observability import charts

WINDOW_SECONDS = 1800.0
INTERVAL_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class Sample:
    at: float
    """Unix time."""
    pending: Mapping[str, int] = field(default_factory=dict)
    """ClusterQueue -> pending workloads (active and inadmissible)."""
    admitted: Mapping[str, int] = field(default_factory=dict)
    """ClusterQueue -> admitted workloads."""
    gpus_reserved: Mapping[str, float] = field(default_factory=dict)
    """"worker / flavor" -> GPUs reserved in the worker's ClusterQueues (manager only)."""
    dispatch_totals: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """Worker -> (sum of dispatch latencies in seconds, dispatches), since the start."""
    failover_totals: Mapping[str, float] = field(default_factory=dict)
    """Worker -> workloads taken off it to be placed again, since the start."""


def counter_totals(
    registry: CollectorRegistry,
) -> tuple[dict[str, tuple[float, float]], dict[str, float]]:
    """The dispatch latency sum and count and the failover count per worker, read from the
    process's own metrics (the one place they are counted)."""
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    failovers: dict[str, float] = {}
    for family in registry.collect():
        for s in family.samples:
            if s.name == "kfed_dispatch_latency_seconds_sum":
                sums[s.labels["cluster"]] = s.value
            elif s.name == "kfed_dispatch_latency_seconds_count":
                counts[s.labels["cluster"]] = s.value
            elif s.name == "kfed_failovers_total":
                worker = s.labels["from_cluster"]
                failovers[worker] = failovers.get(worker, 0.0) + s.value
    dispatch = {w: (sums.get(w, 0.0), counts[w]) for w in counts}
    return dispatch, failovers


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    unit: str
    steps: bool
    series: Callable[[list[Sample]], dict[str, list[charts.Point]]]
    manager_only: bool = False


def _levels(
    pick: Callable[[Sample], Mapping[str, float]],
) -> Callable[[list[Sample]], dict[str, list[charts.Point]]]:
    def series(samples: list[Sample]) -> dict[str, list[charts.Point]]:
        out: dict[str, list[charts.Point]] = {}
        for sample in samples:
            for name, value in pick(sample).items():
                out.setdefault(name, []).append((sample.at, float(value)))
        return out

    return series


def _per_interval(samples: list[Sample]) -> Iterable[tuple[Sample, Sample]]:
    return itertools.pairwise(samples)


def dispatch_latency(samples: list[Sample]) -> dict[str, list[charts.Point]]:
    """Mean dispatch latency per worker in each interval that had dispatches there."""
    out: dict[str, list[charts.Point]] = {}
    for before, after in _per_interval(samples):
        for worker, (total, count) in after.dispatch_totals.items():
            total0, count0 = before.dispatch_totals.get(worker, (0.0, 0.0))
            if count > count0:
                out.setdefault(worker, []).append((after.at, (total - total0) / (count - count0)))
    return out


def failovers(samples: list[Sample]) -> dict[str, list[charts.Point]]:
    """Failovers off each worker per interval (zero included, once the worker had one)."""
    out: dict[str, list[charts.Point]] = {}
    for before, after in _per_interval(samples):
        for worker, total in after.failover_totals.items():
            out.setdefault(worker, []).append(
                (after.at, total - before.failover_totals.get(worker, 0.0))
            )
    return out


CHARTS: dict[str, Chart] = {
    "pending": Chart("Pending workloads per ClusterQueue", "", False, _levels(lambda s: s.pending)),
    "admitted": Chart(
        "Admitted workloads per ClusterQueue", "", False, _levels(lambda s: s.admitted)
    ),
    "gpus": Chart(
        "GPU quota reserved per worker and flavor",
        "GPUs",
        False,
        _levels(lambda s: s.gpus_reserved),
        manager_only=True,
    ),
    "dispatch-latency": Chart(
        "Dispatch latency, mean per interval", "s", False, dispatch_latency, manager_only=True
    ),
    "failovers": Chart(
        "Failovers per interval, by worker left", "", True, failovers, manager_only=True
    ),
}
"""The charts the dashboard shows, by the name in their URL (``charts/NAME.svg``)."""


class History:
    """The samples of the last ``window`` seconds (at most one per ``interval``)."""

    def __init__(self, window: float = WINDOW_SECONDS, interval: float = INTERVAL_SECONDS) -> None:
        self.window = window
        self.interval = interval
        self._samples: deque[Sample] = deque(maxlen=int(window / interval) + 2)

    def add(self, sample: Sample) -> None:
        self._samples.append(sample)

    def samples(self) -> list[Sample]:
        return list(self._samples)

    def chart(self, name: str, *, now: float) -> str:
        """The SVG of chart ``name`` (a key of ``CHARTS``)."""
        chart = CHARTS[name]
        return charts.line_chart(
            chart.title,
            chart.series(self.samples()),
            now=now,
            window=self.window,
            unit=chart.unit,
            steps=chart.steps,
        )

    def to_json(self) -> dict[str, object]:
        """Every chart's series, for tools and tests (``/dashboard/history.json``)."""
        samples = self.samples()
        return {
            "window_seconds": self.window,
            "interval_seconds": self.interval,
            "samples": len(samples),
            "charts": {
                name: {
                    "title": chart.title,
                    "unit": chart.unit,
                    "series": {k: [list(p) for p in v] for k, v in chart.series(samples).items()},
                }
                for name, chart in CHARTS.items()
            },
        }
