"""What the dispatch benchmark observes, from outside kfed: every manager Workload event and
every event of the remote copies on the three workers, each stamped with the benchmark's own
monotonic clock when it arrived. Pure: events and times come in as arguments.

Conditions' ``lastTransitionTime`` has one-second resolution, too coarse for latencies of a
few hundred milliseconds; arrival times of watch events are precise to the watch's delivery
delay, which is the same on both sides (the benchmark watches the manager and the workers
the same way, directly, not through any proxy).

Per manager Workload (the remote copy has the same namespace/name):

- reserved: the first event with ``QuotaReserved`` True on the manager (kfed's global
  admission);
- copy seen: the first event of any remote copy on a worker (the manager created it);
- remote admitted: the first event of any copy with ``Admitted`` True on a worker;
- placed: the first event with the MultiKueue check Ready on the manager (kfed recorded
  the placement; what ``kfed_dispatch_latency_seconds`` measures inside the manager);
- copies: the distinct remote Workloads (by uid) seen per worker: what dispatch created.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from manager.controllers import workloadstatus as ws
from manager.federation.decisions import checkstatus

Obj = dict[str, Any]


@dataclass(slots=True)
class WorkloadTimeline:
    key: str
    first_seen: float
    job: str | None = None
    """The owning Job's name."""
    reserved_at: float | None = None
    placed_at: float | None = None
    cluster: str | None = None
    """Where the manager placed it (``status.clusterName``)."""
    finished_at: float | None = None
    evictions: int = 0
    evicted: bool = False
    copies: dict[str, set[str]] = field(default_factory=dict)
    """worker -> uids of the remote copies seen there."""
    first_copy_at: float | None = None
    remote_admitted_at: float | None = None
    admitted_on: set[str] = field(default_factory=set)
    """Workers where a copy was seen admitted (AllAtOnce may have several)."""

    @property
    def copy_count(self) -> int:
        return sum(len(uids) for uids in self.copies.values())

    @property
    def dispatch_latency(self) -> float | None:
        if self.reserved_at is None or self.remote_admitted_at is None:
            return None
        return self.remote_admitted_at - self.reserved_at

    @property
    def copy_latency(self) -> float | None:
        """Reservation -> first copy seen: the manager's share of the dispatch latency."""
        if self.reserved_at is None or self.first_copy_at is None:
            return None
        return self.first_copy_at - self.reserved_at

    @property
    def remote_admission_latency(self) -> float | None:
        """First copy seen -> a copy admitted: the worker's share."""
        if self.first_copy_at is None or self.remote_admitted_at is None:
            return None
        return self.remote_admitted_at - self.first_copy_at

    @property
    def placement_latency(self) -> float | None:
        if self.reserved_at is None or self.placed_at is None:
            return None
        return self.placed_at - self.reserved_at


class DispatchRecorder:
    def __init__(self, check: str) -> None:
        self.check = check
        self.workloads: dict[str, WorkloadTimeline] = {}
        self.submitted_at: dict[str, float] = {}
        """Job name -> when the benchmark's create call returned."""
        self.submit_errors: list[str] = []
        self.negative_latencies = 0
        """Copies seen admitted before the manager's reservation was seen (watch delivery
        order across clusters); their latency counts as 0."""

    def _timeline(self, key: str, at: float) -> WorkloadTimeline:
        timeline = self.workloads.get(key)
        if timeline is None:
            timeline = self.workloads[key] = WorkloadTimeline(key, first_seen=at)
        return timeline

    # -- feeding -------------------------------------------------------------------------

    def submitted(self, job: str, at: float) -> None:
        self.submitted_at[job] = at

    def manager_event(self, kind: str, obj: Obj, at: float) -> None:
        if kind == "DELETED":
            return
        t = self._timeline(ws.key_of(obj), at)
        owner = ws.owner_job(obj)
        if owner is not None:
            t.job = owner.split("/", 1)[1]
        if t.reserved_at is None and ws.has_reservation(obj):
            t.reserved_at = at
        if t.placed_at is None and checkstatus.check_state(obj, self.check)[0] == "Ready":
            t.placed_at = at
            t.cluster = ws.status_of(obj).get("clusterName")
        evicted = ws.is_evicted(obj)
        if evicted and not t.evicted:
            t.evictions += 1
        t.evicted = evicted
        if t.finished_at is None and ws.is_finished(obj):
            t.finished_at = at

    def worker_event(self, worker: str, kind: str, obj: Obj, at: float) -> None:
        if kind == "DELETED":
            return
        t = self._timeline(ws.key_of(obj), at)
        uid = str((obj.get("metadata") or {}).get("uid", ""))
        t.copies.setdefault(worker, set()).add(uid)
        if t.first_copy_at is None:
            t.first_copy_at = at
        if ws.is_admitted(obj) and not ws.is_evicted(obj):
            t.admitted_on.add(worker)
            if t.remote_admitted_at is None:
                t.remote_admitted_at = at
                if t.reserved_at is not None and at < t.reserved_at:
                    self.negative_latencies += 1

    # -- reading -------------------------------------------------------------------------

    def finished(self) -> int:
        return sum(1 for t in self.workloads.values() if t.finished_at is not None)

    def dispatch_latencies(self) -> list[float]:
        return [
            max(0.0, d) for t in self.workloads.values() if (d := t.dispatch_latency) is not None
        ]

    def copy_latencies(self) -> list[float]:
        return [max(0.0, d) for t in self.workloads.values() if (d := t.copy_latency) is not None]

    def remote_admission_latencies(self) -> list[float]:
        return [
            max(0.0, d)
            for t in self.workloads.values()
            if (d := t.remote_admission_latency) is not None
        ]

    def placement_latencies(self) -> list[float]:
        return [
            max(0.0, d) for t in self.workloads.values() if (d := t.placement_latency) is not None
        ]

    def queueing_latencies(self) -> list[float]:
        """From the create call returning to the manager's reservation seen."""
        result = []
        for t in self.workloads.values():
            sent = self.submitted_at.get(t.job or "")
            if sent is not None and t.reserved_at is not None:
                result.append(max(0.0, t.reserved_at - sent))
        return result

    def copies_per_workload(self) -> Counter[int]:
        """How many workloads got 1, 2, 3... remote copies (placed workloads only)."""
        return Counter(t.copy_count for t in self.workloads.values() if t.reserved_at is not None)

    def admitted_copies_per_workload(self) -> Counter[int]:
        return Counter(
            len(t.admitted_on) for t in self.workloads.values() if t.reserved_at is not None
        )

    def placements(self) -> Counter[str]:
        return Counter(t.cluster for t in self.workloads.values() if t.cluster)

    def last_finished_at(self) -> float | None:
        times = [t.finished_at for t in self.workloads.values() if t.finished_at is not None]
        return max(times) if times else None

    def unfinished(self, limit: int = 10) -> list[dict[str, Any]]:
        """What became of the first workloads that did not finish: for a stuck run."""
        return [
            {
                "workload": t.key,
                "job": t.job,
                "reserved": t.reserved_at is not None,
                "copies": {w: len(uids) for w, uids in sorted(t.copies.items())},
                "admitted_on": sorted(t.admitted_on),
                "placed_on": t.cluster,
                "evictions": t.evictions,
            }
            for t in sorted(self.workloads.values(), key=lambda t: t.first_seen)
            if t.finished_at is None
        ][:limit]

    def evictions(self) -> int:
        return sum(t.evictions for t in self.workloads.values())
