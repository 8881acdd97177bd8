"""Reading upstream Kueue's scheduler-performance harness's output into kfed's figures (pure):
the runner's ``wlStates.csv`` and ``cqStates.csv``, its ``summary.yaml`` and its log, read
with upstream's own definitions (``upstream.py`` runs the harness)."""

from __future__ import annotations

import csv
import re
import statistics
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from e2e.bench.scheduler import generator as g
from e2e.bench.scheduler import report


@dataclass(frozen=True, slots=True)
class UpstreamWorkload:
    """One line of the runner's ``wlStates.csv``."""

    class_name: str
    ms_to_admitted: int
    ms_to_finish: int
    evictions: int


@dataclass(frozen=True, slots=True)
class UpstreamQueue:
    """One line of the runner's ``cqStates.csv``."""

    name: str
    quota_milli: int
    used_milli_ms: int
    monitored_ms: int

    @property
    def usage_percent(self) -> float:
        denominator = self.quota_milli * self.monitored_ms
        return 100 * self.used_milli_ms / denominator if denominator else 0.0


def read_workloads(text: str) -> list[UpstreamWorkload]:
    rows = csv.DictReader(text.splitlines())
    return [
        UpstreamWorkload(
            class_name=row["class name"],
            ms_to_admitted=int(row["ms to admitted"]),
            ms_to_finish=int(row["ms to finish"]),
            evictions=int(row["num evictions"]),
        )
        for row in rows
    ]


def read_queues(text: str) -> list[UpstreamQueue]:
    rows = csv.DictReader(text.splitlines())
    return [
        UpstreamQueue(
            name=row["name"],
            quota_milli=int(row["CPU quota (mCPU)"]),
            used_milli_ms=int(row["CPU used (mCPU * ms)"]),
            monitored_ms=int(row["monitor time (ms)"]),
        )
        for row in rows
    ]


def class_usage_percent(summary: dict[str, Any], class_name: str = "cq") -> float:
    """Upstream's checker, verbatim in arithmetic: cpuUsed x 100 / (nominalQuota x elapsed)."""
    group = summary["clusterQueueClasses"][class_name]
    elapsed_ms = _timestamp(group["lastEventTime"]) - _timestamp(group["firstEventTime"])
    elapsed_ms *= 1000
    denominator = group["nominalQuota"] * elapsed_ms
    return 100 * group["cpuUsed"] / denominator if denominator else 0.0


def _timestamp(value: Any) -> float:
    """Seconds since the epoch of an RFC 3339 time as the runner's YAML writes it."""
    if isinstance(value, datetime):
        return value.timestamp()
    text = str(value)
    # Go writes nanoseconds; Python parses at most microseconds.
    text = re.sub(r"(\.\d{6})\d+", r"\1", text).replace("Z", "+00:00")
    return datetime.fromisoformat(text).timestamp()


def class_figures(
    name: str, workloads: list[UpstreamWorkload], summary: dict[str, Any]
) -> report.ClassFigures:
    mine = [w for w in workloads if w.class_name == name]
    admitted = [w.ms_to_admitted / 1000 for w in mine if w.ms_to_admitted > 0]
    summary_class = summary.get("workloadClasses", {}).get(name, {})
    # Upstream's average divides by every workload of the class (its summary's figure).
    average_ms = summary_class.get("averageTimeToAdmissionMs")
    average = average_ms / 1000 if average_ms is not None else statistics.fmean(admitted or [0])
    return report.ClassFigures(
        name=name,
        count=len(mine),
        admitted=len(admitted),
        finished=sum(1 for w in mine if w.ms_to_finish > 0),
        evictions=sum(w.evictions for w in mine),
        avg_time_to_admission=average,
        p50_time_to_admission=report.percentile(admitted, 0.5),
        p95_time_to_admission=report.percentile(admitted, 0.95),
        max_time_to_admission=max(admitted, default=0.0),
    )


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|µs|us|ns|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "µs": 1e-6, "us": 1e-6, "ns": 1e-9}


def go_duration_seconds(text: str) -> float:
    """Seconds in a Go duration string (``1m2.5s``, ``850ms``)."""
    return sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(text))


def generation_seconds(runner_log: str) -> float:
    """How long upstream's generator took, from the runner's "Generator done" line."""
    match = re.search(r'Generator done.*?"duration": "([^"]+)"', runner_log)
    return go_duration_seconds(match.group(1)) if match else 0.0


def figures_from(
    s: g.Scenario,
    *,
    summary: dict[str, Any],
    cmd_stats: dict[str, Any],
    workloads: list[UpstreamWorkload],
    queues: list[UpstreamQueue],
    runner_log: str,
) -> report.Figures:
    per_queue = [q.usage_percent for q in queues]
    class_group = summary["clusterQueueClasses"]["cq"]
    monitored = _timestamp(class_group["lastEventTime"]) - _timestamp(class_group["firstEventTime"])
    return report.Figures(
        scenario=s.name,
        cluster_queues=len(queues),
        workloads=len(workloads),
        wall_seconds=cmd_stats["wallMs"] / 1000,
        generation_seconds=generation_seconds(runner_log),
        usage=report.UsageFigures(
            class_percent=class_usage_percent(summary),
            mean_percent=statistics.fmean(per_queue) if per_queue else 0.0,
            min_percent=min(per_queue, default=0.0),
            held_percent=None,
            monitored_seconds=monitored,
        ),
        classes=[class_figures(c.name, workloads, summary) for c in s.classes],
    )


def minimalkueue_process(cmd_stats: dict[str, Any]) -> report.ProcessFigures:
    """The controller's own figures, as the runner measured them (rusage; maxrss in KiB)."""
    cpu = (cmd_stats["userMs"] + cmd_stats["sysMs"]) / 1000
    return report.ProcessFigures(cpu, max(0, cmd_stats.get("maxrss", 0)) / 1024)
