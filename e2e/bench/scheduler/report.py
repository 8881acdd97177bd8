"""The scheduler benchmark's figures, upstream's pass criteria applied to them, and their
rendering (a table for people, JSON for tools). Pure.

Upstream's criteria (its checker):

- wall time <= max: here, from starting kfed's controller process until every workload is
  finished and every ClusterQueue's status says so;
- usage >= min, for the ClusterQueue class as a whole: the cpu used by all its queues
  (``flavorsUsage`` integrated over time) x 100 / (the sum of their nominal quotas x the span
  from the class's first to its last ClusterQueue event). We also give the mean and the min
  of the same ratio computed per ClusterQueue;
- average time to admission <= max, per workload class.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from e2e.bench.scheduler.generator import Scenario
from e2e.bench.scheduler.recorder import QueueUsage, Recorder, WorkloadRecord


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    value: float
    limit: float
    kind: Literal["max", "min"]
    informational: bool = False
    """Reported, not part of upstream's verdict."""

    @property
    def passed(self) -> bool:
        return self.value <= self.limit if self.kind == "max" else self.value >= self.limit

    @property
    def margin(self) -> float:
        """How far inside the limit (positive) or outside it (negative), in its unit."""
        return self.limit - self.value if self.kind == "max" else self.value - self.limit

    @property
    def margin_percent(self) -> float:
        """The margin as a share of the limit."""
        return 100 * self.margin / self.limit if self.limit else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": round(self.value, 3),
            "limit": self.limit,
            "kind": self.kind,
            "passed": self.passed,
            "margin": round(self.margin, 3),
            "margin_percent": round(self.margin_percent, 1),
            "informational": self.informational,
        }


@dataclass(frozen=True, slots=True)
class ClassFigures:
    name: str
    count: int
    admitted: int
    finished: int
    evictions: int
    avg_time_to_admission: float
    p50_time_to_admission: float
    p95_time_to_admission: float
    max_time_to_admission: float


@dataclass(frozen=True, slots=True)
class UsageFigures:
    class_percent: float
    """Upstream's figure: the whole ClusterQueue class at once."""
    mean_percent: float
    """The same ratio per ClusterQueue, averaged."""
    min_percent: float
    held_percent: float | None
    """Cross-check from workload events: cpu x (finish - admission) seen by the runner, over
    the same quota and span (None where the events are not at hand: upstream's harness)."""
    monitored_seconds: float


@dataclass(frozen=True, slots=True)
class ProcessFigures:
    cpu_seconds: float
    peak_rss_mib: float


@dataclass
class Figures:
    scenario: str
    cluster_queues: int
    workloads: int
    wall_seconds: float
    generation_seconds: float
    usage: UsageFigures
    classes: list[ClassFigures]
    processes: dict[str, ProcessFigures] = field(default_factory=dict)
    load_average_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_average_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    notes: list[str] = field(default_factory=list)
    timed_out: bool = False
    eviction_reasons: dict[str, int] = field(default_factory=dict)


# -- the maths -----------------------------------------------------------------------------


def class_usage_percent(queues: Iterable[QueueUsage]) -> float:
    """Upstream's usage of a ClusterQueue class: total used / (total quota x class span)."""
    queues = list(queues)
    if not queues:
        return 0.0
    span = max(q.last_event for q in queues) - min(q.first_event for q in queues)
    quota = sum(q.nominal_milli for q in queues)
    used = sum(q.used_milli_seconds for q in queues)
    return 100 * used / (quota * span) if span > 0 and quota > 0 else 0.0


def held_usage_percent(records: Iterable[WorkloadRecord], queues: Iterable[QueueUsage]) -> float:
    queues = list(queues)
    if not queues:
        return 0.0
    span = max(q.last_event for q in queues) - min(q.first_event for q in queues)
    quota_cpu = sum(q.nominal_milli for q in queues) / 1000
    held = sum(r.held_cpu_seconds for r in records)
    return 100 * held / (quota_cpu * span) if span > 0 and quota_cpu > 0 else 0.0


WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION")


def event_share(requests: Mapping[str, Mapping[str, int]], wall_seconds: float) -> dict[str, Any]:
    """Events written (``requests``: resource -> ``VERB[ subresource]`` -> count, as
    ``e2e.bench.cluster.request_counts`` reads them) and their share of every write
    counted."""

    def writes(counts: Mapping[str, int]) -> int:
        return sum(n for key, n in counts.items() if key.split(" ", 1)[0] in WRITE_VERBS)

    events = writes(requests.get("events", {}))
    total = sum(writes(counts) for counts in requests.values())
    return {
        "written": events,
        "per_second": events / wall_seconds if wall_seconds else 0.0,
        "share_of_writes": events / total if total else 0.0,
    }


def percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def class_figures(name: str, records: Iterable[WorkloadRecord]) -> ClassFigures:
    records = [r for r in records if r.class_name == name]
    waits = [r.time_to_admission for r in records if r.time_to_admission is not None]
    return ClassFigures(
        name=name,
        count=len(records),
        admitted=len(waits),
        finished=sum(1 for r in records if r.finished_at is not None),
        evictions=sum(r.evictions for r in records),
        avg_time_to_admission=statistics.fmean(waits) if waits else 0.0,
        p50_time_to_admission=percentile(waits, 0.5),
        p95_time_to_admission=percentile(waits, 0.95),
        max_time_to_admission=max(waits, default=0.0),
    )


def usage_figures(recorder: Recorder) -> UsageFigures:
    queues = list(recorder.queues.values())
    per_queue = [q.usage_percent for q in queues]
    span = max(q.last_event for q in queues) - min(q.first_event for q in queues) if queues else 0.0
    return UsageFigures(
        class_percent=class_usage_percent(queues),
        mean_percent=statistics.fmean(per_queue) if per_queue else 0.0,
        min_percent=min(per_queue, default=0.0),
        held_percent=held_usage_percent(recorder.workloads.values(), queues),
        monitored_seconds=span,
    )


def figures_of(
    s: Scenario,
    recorder: Recorder,
    *,
    wall_seconds: float,
    generation_seconds: float,
) -> Figures:
    return Figures(
        scenario=s.name,
        cluster_queues=s.cluster_queue_count,
        workloads=s.workload_count,
        wall_seconds=wall_seconds,
        generation_seconds=generation_seconds,
        usage=usage_figures(recorder),
        classes=[class_figures(c.name, recorder.workloads.values()) for c in s.classes],
        eviction_reasons=dict(sorted(recorder.eviction_reasons.items())),
    )


def checks(s: Scenario, f: Figures) -> list[Check]:
    t = s.thresholds
    result = [
        Check("wall time (s)", f.wall_seconds, t.max_wall_seconds, "max"),
        Check("usage, cq class (%)", f.usage.class_percent, t.min_usage_percent, "min"),
        Check(
            "usage, min over CQs (%)",
            f.usage.min_percent,
            t.min_usage_percent,
            "min",
            informational=True,
        ),
    ]
    by_name = {c.name: c for c in f.classes}
    for name, limit in t.max_avg_time_to_admission_seconds.items():
        cls = by_name.get(name)
        value = cls.avg_time_to_admission if cls is not None else float("inf")
        result.append(Check(f"avg time to admission, {name} (s)", value, limit, "max"))
    return result


def passed(all_checks: Iterable[Check], f: Figures) -> bool:
    """Upstream's verdict: every check holds, and every workload was admitted and finished."""
    complete = (
        all(c.finished == c.count for c in f.classes)
        and sum(c.count for c in f.classes) == f.workloads
    )
    return complete and not f.timed_out and all(c.passed for c in all_checks if not c.informational)


# -- rendering -----------------------------------------------------------------------------


def to_json(s: Scenario, f: Figures, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    all_checks = checks(s, f)
    return {
        "benchmark": "scheduler",
        "scenario": {
            "name": s.name,
            "cohorts": s.cohorts,
            "cluster_queues": s.cluster_queue_count,
            "workloads": s.workload_count,
            "nominal_quota_cpu": s.nominal_quota_cpu,
            "borrowing_limit_cpu": s.borrowing_limit_cpu,
            "classes": [asdict(c) for c in s.classes],
            "planned_generation_seconds": s.generation_seconds,
            "min_drain_seconds": round(s.min_drain_seconds, 1),
        },
        "figures": _rounded(asdict(f)),
        "checks": [c.to_json() for c in all_checks],
        "passed": passed(all_checks, f),
        **(extra or {}),
    }


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value


def render(s: Scenario, f: Figures) -> str:
    all_checks = checks(s, f)
    held = "n/a" if f.usage.held_percent is None else f"{f.usage.held_percent:.1f}%"
    lines = [
        f"scheduler benchmark, {s.name}: {s.cluster_queue_count} ClusterQueues in "
        f"{s.cohorts} cohorts, {s.workload_count} workloads",
        f"wall {f.wall_seconds:.1f}s (generation {f.generation_seconds:.1f}s, "
        f"planned {s.generation_seconds:.1f}s; lower bound {s.min_drain_seconds:.1f}s)",
        f"usage: class {f.usage.class_percent:.1f}%  mean {f.usage.mean_percent:.1f}%  "
        f"min {f.usage.min_percent:.1f}%  (held by workload events {held}, "
        f"over {f.usage.monitored_seconds:.1f}s)",
        "",
        f"{'class':<8} {'count':>6} {'admitted':>8} {'finished':>8} {'evictions':>9} "
        f"{'avg s':>7} {'p50 s':>7} {'p95 s':>7} {'max s':>7}",
    ]
    for c in f.classes:
        lines.append(
            f"{c.name:<8} {c.count:>6} {c.admitted:>8} {c.finished:>8} {c.evictions:>9} "
            f"{c.avg_time_to_admission:>7.1f} {c.p50_time_to_admission:>7.1f} "
            f"{c.p95_time_to_admission:>7.1f} {c.max_time_to_admission:>7.1f}"
        )
    if f.eviction_reasons:
        by_reason = ", ".join(f"{r} {n}" for r, n in f.eviction_reasons.items())
        lines.append(f"evictions by reason: {by_reason}")
    if f.processes:
        lines.append("")
        lines.append(f"{'process':<16} {'cpu s':>8} {'cores':>6} {'peak RSS MiB':>13}")
        for name, p in f.processes.items():
            cores = p.cpu_seconds / f.wall_seconds if f.wall_seconds else 0.0
            lines.append(f"{name:<16} {p.cpu_seconds:>8.1f} {cores:>6.2f} {p.peak_rss_mib:>13.1f}")
    lines += ["", f"{'check':<34} {'value':>9} {'limit':>9} {'margin':>9} {'':>7}  verdict"]
    for check in all_checks:
        op = "<=" if check.kind == "max" else ">="
        verdict = "pass" if check.passed else "FAIL"
        if check.informational:
            verdict += " (informational)"
        lines.append(
            f"{check.name:<34} {check.value:>9.1f} {op} {check.limit:>6.1f} "
            f"{check.margin:>+9.1f} {check.margin_percent:>+6.0f}%  {verdict}"
        )
    lines.append("")
    lines.append(
        "load average before "
        + " ".join(f"{x:.2f}" for x in f.load_average_before)
        + ", after "
        + " ".join(f"{x:.2f}" for x in f.load_average_after)
    )
    lines.extend(f.notes)
    lines.append(f"verdict: {'PASS' if passed(all_checks, f) else 'FAIL'}")
    return "\n".join(lines)


def dumps(report: Mapping[str, Any]) -> str:
    return json.dumps(report, indent=2)
