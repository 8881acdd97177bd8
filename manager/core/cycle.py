"""What one scheduling cycle (scheduler.py) carries: each head's entry and its outcome, the
claims of the entries admitted so far in the cycle, a head's remembered lack of a way in,
and the decisions the cycle returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from manager.core import quota
from manager.core.cache import Cache
from manager.core.cachestate import AdmittedWorkload, ClusterQueueState
from manager.core.decisions import Admit, Preempt
from manager.core.flavorassigner import Assignment
from manager.core.model import FlavorResource, WorkloadKey
from manager.core.pending import PendingWorkload
from manager.core.preemptionrules import Target
from manager.core.reasons import PendingReason


class Outcome(Enum):
    ADMITTED = "admitted"
    PREEMPTING = "preempting"  # victims chosen; holds its ClusterQueue's head until they go
    SET_ASIDE = "set-aside"  # inadmissible: parked (BestEffortFIFO) or blocking (StrictFIFO)
    PARKED = "parked"  # inadmissible for a reason no queueing strategy should block on
    RETRY = "retry"  # lost a race within this cycle; evaluate again next cycle


@dataclass(slots=True)
class Entry:
    pending: PendingWorkload
    cq: ClusterQueueState
    assignment: Assignment | None = None
    targets: list[Target] = field(default_factory=list)
    outcome: Outcome = Outcome.SET_ASIDE
    reason: PendingReason | None = None
    share: float = 0.0


class CycleClaims:
    """What the entries admitted so far in a cycle have claimed (Kueue's ``fits`` in
    ``schedule``): the victims chosen so far, whose quota counts as free for the rest of
    the cycle, and the usage of the preemptors that chose them, added to the quota tree
    until the cycle ends so that no later entry takes what they wait for. Admissions are
    in the cache already."""

    __slots__ = ("added", "victims")

    def __init__(self) -> None:
        self.victims: dict[WorkloadKey, AdmittedWorkload] = {}
        self.added: list[tuple[ClusterQueueState, dict[FlavorResource, int]]] = []

    def overlaps(self, targets: list[Target]) -> bool:
        return any(t.workload.key in self.victims for t in targets)

    def fits(
        self,
        cache: Cache,
        cq: ClusterQueueState,
        usage: Mapping[FlavorResource, int],
        targets: list[Target],
    ) -> bool:
        removed = [*self.victims.values(), *(t.workload for t in targets)]
        for workload in removed:
            cache.simulate_removal(workload)
        try:
            return all(value <= quota.available(cq, fr) for fr, value in usage.items())
        finally:
            for workload in reversed(removed):
                cache.simulate_restore(workload)

    def claim(
        self, cq: ClusterQueueState, usage: Mapping[FlavorResource, int], targets: list[Target]
    ) -> None:
        for target in targets:
            self.victims[target.workload.key] = target.workload
        for fr, value in usage.items():
            quota.add_usage(cq, fr, value)
        self.added.append((cq, dict(usage)))

    def release_preemptors(self) -> None:
        for cq, usage in reversed(self.added):
            for fr, value in usage.items():
                quota.remove_usage(cq, fr, value)
        self.added = []


@dataclass(frozen=True, slots=True)
class NoWayIn:
    """A nomination that found neither room nor victims, and what it was judged on: the
    next head of the same queue with the same key gets the same answer without asking
    again. BestEffortFIFO walks a queue's whole backlog after every release, one head per
    cycle, and a backlog is mostly workloads of a few shapes."""

    key: tuple[object, ...]
    assignment: Assignment
    reason: PendingReason | None
    share: float


@dataclass(slots=True)
class CycleDecisions:
    admitted: list[Admit] = field(default_factory=list)
    preempted: list[Preempt] = field(default_factory=list)
    evaluated: int = 0
