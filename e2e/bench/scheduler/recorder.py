"""What the scheduler benchmark observes, as upstream's recorder observes it: every Workload
and ClusterQueue event, with the time the runner saw it. Pure: times come in as arguments.

- A workload's time to admission runs from its first event (its creation, as the watch
  delivered it) to the event where ``Admitted`` turned True; after an eviction and a new
  admission it is measured to the new one, as upstream does.
- A ClusterQueue's cpu used is its ``status.flavorsUsage`` cpu total integrated over time,
  between its first and its last status event (mCPU x seconds).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from manager.api import constants as C
from manager.api import quantity

Obj = dict[str, Any]


def condition_true(obj: Obj, kind: str) -> bool:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return bool(c.get("status") == "True")
    return False


@dataclass(slots=True)
class WorkloadRecord:
    key: str
    class_name: str
    cluster_queue: str
    cpu: int
    first_seen: float
    admitted_at: float | None = None
    """The latest admission (None while not admitted)."""
    time_to_admission: float | None = None
    finished_at: float | None = None
    evictions: int = 0
    admitted: bool = False
    evicted: bool = False
    held_cpu_seconds: float = 0.0
    """cpu x time between each admission and its end (finish or eviction), as the runner saw it."""


@dataclass(slots=True)
class QueueUsage:
    """One ClusterQueue's usage, integrated over its status events (piecewise constant)."""

    nominal_milli: int
    first_event: float
    last_event: float
    last_usage_milli: int = 0
    used_milli_seconds: float = 0.0
    pending: int = 0
    reserving: int = 0
    status_seen: bool = False

    def observe(self, at: float, usage_milli: int) -> None:
        if at > self.last_event:
            self.used_milli_seconds += self.last_usage_milli * (at - self.last_event)
            self.last_event = at
        self.last_usage_milli = usage_milli

    @property
    def monitored_seconds(self) -> float:
        return self.last_event - self.first_event

    @property
    def usage_percent(self) -> float:
        span = self.monitored_seconds
        return 100 * self.used_milli_seconds / (self.nominal_milli * span) if span > 0 else 0.0


def cpu_usage_milli(cq: Obj) -> int:
    """The cpu total of ``status.flavorsUsage`` (admitted usage), summed over flavors."""
    total = 0
    for flavor in (cq.get("status") or {}).get("flavorsUsage") or ():
        for r in flavor.get("resources") or ():
            if r.get("name") == "cpu":
                total += quantity.to_core_units("cpu", r.get("total", 0))
    return total


def eviction_reason(obj: Obj) -> str:
    conditions = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or ()}
    for kind in (C.PREEMPTED, C.EVICTED):
        found = conditions.get(kind)
        if found is not None and found.get("status") == "True":
            return str(found.get("reason") or kind)
    return "unknown"


def nominal_cpu_milli(cq: Obj) -> int:
    total = 0
    for group in (cq.get("spec") or {}).get("resourceGroups") or ():
        for flavor in group.get("flavors") or ():
            for r in flavor.get("resources") or ():
                if r.get("name") == "cpu":
                    total += quantity.to_core_units("cpu", r.get("nominalQuota", 0))
    return total


@dataclass
class Recorder:
    expected_workloads: int
    workloads: dict[str, WorkloadRecord] = field(default_factory=dict)
    queues: dict[str, QueueUsage] = field(default_factory=dict)
    finished: int = 0
    eviction_reasons: dict[str, int] = field(default_factory=dict)
    """Evictions by reason: the Preempted condition's (InClusterQueue, InCohortReclamation,
    ...) when a preemption caused it, else the Evicted condition's."""

    # -- workloads -----------------------------------------------------------------------

    def workload_event(self, key: str, obj: Obj, at: float, *, cpu: int, class_name: str) -> str:
        """Record one event; returns "admitted" when the workload just became Admitted,
        "unadmitted" when it stopped being admitted (evicted), else ""."""
        record = self.workloads.get(key)
        if record is None:
            record = self.workloads[key] = WorkloadRecord(
                key=key,
                class_name=class_name,
                cluster_queue=key.split("/", 1)[0],
                cpu=cpu,
                first_seen=at,
            )
        if record.finished_at is not None:
            return ""
        outcome = ""
        admitted = condition_true(obj, C.ADMITTED) and not condition_true(obj, C.EVICTED)
        evicted = condition_true(obj, C.EVICTED)
        if evicted and not record.evicted:
            record.evictions += 1
            reason = eviction_reason(obj)
            self.eviction_reasons[reason] = self.eviction_reasons.get(reason, 0) + 1
        record.evicted = evicted
        if admitted and not record.admitted:
            record.admitted_at = at
            record.time_to_admission = at - record.first_seen
            outcome = "admitted"
        elif not admitted and record.admitted:
            self._end_hold(record, at)
            outcome = "unadmitted"
        record.admitted = admitted
        if condition_true(obj, C.FINISHED):
            if record.admitted:
                self._end_hold(record, at)
            record.admitted = False
            record.finished_at = at
            self.finished += 1
        return outcome

    @staticmethod
    def _end_hold(record: WorkloadRecord, at: float) -> None:
        if record.admitted_at is not None:
            record.held_cpu_seconds += record.cpu * (at - record.admitted_at)

    # -- cluster queues ------------------------------------------------------------------

    def queue_event(self, name: str, cq: Obj, at: float) -> None:
        usage = self.queues.get(name)
        if usage is None:
            usage = self.queues[name] = QueueUsage(
                nominal_milli=nominal_cpu_milli(cq), first_event=at, last_event=at
            )
        usage.observe(at, cpu_usage_milli(cq))
        status = cq.get("status") or {}
        if status:
            usage.status_seen = True
        usage.pending = int(status.get("pendingWorkloads") or 0)
        usage.reserving = int(status.get("reservingWorkloads") or 0)

    # -- the end -------------------------------------------------------------------------

    @property
    def all_finished(self) -> bool:
        return self.finished >= self.expected_workloads

    @property
    def queues_idle(self) -> bool:
        """Every ClusterQueue's status says nothing is pending or holding quota any more."""
        return bool(self.queues) and all(
            q.status_seen and q.pending == 0 and q.reserving == 0 for q in self.queues.values()
        )

    @property
    def done(self) -> bool:
        return self.all_finished and self.queues_idle
