"""What the MultiKueue benchmark observes, with upstream's definitions
(``test/performance/multikueue``): a workload's latencies start immediately before the
request that creates it (here its Job: kfed's Job controller makes the Workload) and end
when the state is first seen on a watch of the manager's Workloads; throughput is the
workload count over the time from the first create to the last admission; percentiles use
the nearest-rank method. Pure: events and times come in as arguments.

Per workload: quota reserved (``QuotaReserved`` True), dispatched (the MultiKueue check
Ready: a worker admitted its copy), admitted (``Admitted`` True), and the worker it went to.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from manager.controllers import workloadstatus as ws
from manager.federation.decisions import checkstatus

Obj = dict[str, Any]


def nearest_rank(ordered: list[float], share: float) -> float:
    """Upstream's percentile: the value at rank ceil(share * n) (1-based) of sorted values."""
    if not ordered:
        return 0.0
    index = math.ceil(share * len(ordered)) - 1
    return ordered[max(0, min(index, len(ordered) - 1))]


@dataclass(frozen=True, slots=True)
class Durations:
    """Upstream's summary of one latency, in milliseconds."""

    count: int
    min_ms: float
    avg_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float

    @classmethod
    def of(cls, seconds: Iterable[float]) -> Durations:
        ordered = sorted(s * 1000 for s in seconds)
        if not ordered:
            return cls(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        return cls(
            count=len(ordered),
            min_ms=ordered[0],
            avg_ms=statistics.fmean(ordered),
            p50_ms=nearest_rank(ordered, 0.50),
            p95_ms=nearest_rank(ordered, 0.95),
            p99_ms=nearest_rank(ordered, 0.99),
            max_ms=ordered[-1],
        )

    def to_json(self) -> dict[str, float | int]:
        return {
            "count": self.count,
            "minMs": round(self.min_ms, 1),
            "avgMs": round(self.avg_ms, 1),
            "p50Ms": round(self.p50_ms, 1),
            "p95Ms": round(self.p95_ms, 1),
            "p99Ms": round(self.p99_ms, 1),
            "maxMs": round(self.max_ms, 1),
        }


@dataclass(slots=True)
class Timing:
    created_at: float | None = None
    quota_reserved_at: float | None = None
    dispatched_at: float | None = None
    admitted_at: float | None = None
    cluster: str = ""


@dataclass
class AdmissionRecorder:
    check: str
    """The MultiKueue admission check's name on the manager."""
    jobs: dict[str, Timing] = field(default_factory=dict)
    """Job name -> its workload's timing (the Workload is matched to its Job by owner)."""
    create_errors: list[str] = field(default_factory=list)
    stories: dict[str, list[str]] = field(default_factory=dict)
    """The first few jobs' Workload, one line per event seen (each is one write): what the
    manager wrote, in order."""
    story_count: int = 3

    def creating(self, job: str, now: float) -> None:
        """Immediately before the create request of ``job`` (its name; one namespace)."""
        self.jobs.setdefault(job, Timing()).created_at = now

    def manager_event(self, obj: Obj, now: float) -> None:
        owner = ws.owner_job(obj)
        if owner is None:
            return
        job = owner.split("/", 1)[1]
        timing = self.jobs.setdefault(job, Timing())
        if job in self.stories or len(self.stories) < self.story_count:
            self.stories.setdefault(job, []).append(summary(obj))
        if timing.quota_reserved_at is None and ws.has_reservation(obj):
            timing.quota_reserved_at = now
        if timing.dispatched_at is None and checkstatus.check_state(obj, self.check)[0] == "Ready":
            timing.dispatched_at = now
        if timing.admitted_at is None and ws.is_admitted(obj):
            timing.admitted_at = now
        if not timing.cluster:
            timing.cluster = str(ws.status_of(obj).get("clusterName") or "")

    def admitted(self) -> int:
        return sum(1 for t in self.jobs.values() if t.admitted_at is not None)

    def _created(self) -> list[Timing]:
        return [t for t in self.jobs.values() if t.created_at is not None]

    def quota_reservation(self) -> Durations:
        return Durations.of(
            t.quota_reserved_at - t.created_at
            for t in self._created()
            if t.created_at is not None and t.quota_reserved_at is not None
        )

    def admission(self) -> Durations:
        return Durations.of(
            t.admitted_at - t.created_at
            for t in self._created()
            if t.created_at is not None and t.admitted_at is not None
        )

    def dispatch(self) -> Durations:
        """Quota reserved on the manager until a worker's admission was recorded there."""
        return Durations.of(
            t.dispatched_at - t.quota_reserved_at
            for t in self.jobs.values()
            if t.dispatched_at is not None and t.quota_reserved_at is not None
        )

    def span(self) -> tuple[float, float, float] | None:
        """(first create, last create, last admission), or None before any admission."""
        created = [t.created_at for t in self.jobs.values() if t.created_at is not None]
        admitted = [t.admitted_at for t in self.jobs.values() if t.admitted_at is not None]
        if not created or not admitted:
            return None
        return min(created), max(created), max(admitted)

    def throughput(self) -> float:
        """Workloads admitted per second from the first create to the last admission."""
        span = self.span()
        if span is None or span[2] <= span[0]:
            return 0.0
        return self.admitted() / (span[2] - span[0])

    def distribution(self) -> dict[str, int]:
        return dict(sorted(Counter(t.cluster for t in self.jobs.values() if t.cluster).items()))


def summary(obj: Obj) -> str:
    """A Workload's state in one line: its true conditions (false ones with their reason),
    check states, cluster and annotations."""
    status = ws.status_of(obj)
    conditions = []
    for c in status.get("conditions") or []:
        mark = "" if c.get("status") == "True" else f"=False({c.get('reason')})"
        conditions.append(f"{c.get('type')}{mark}")
    checks = [f"{c.get('name')}:{c.get('state')}" for c in status.get("admissionChecks") or []]
    notes = sorted(obj.get("metadata", {}).get("annotations") or {})
    return (
        f"rv {obj.get('metadata', {}).get('resourceVersion')}: "
        f"{' '.join(conditions) or '-'} | checks {' '.join(checks) or '-'} | "
        f"cluster {status.get('clusterName') or '-'} | annotations {len(notes)}"
    )
