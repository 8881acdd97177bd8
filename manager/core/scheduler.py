"""One scheduling cycle, in Kueue's six numbered steps.

1. heads     - take the head of every schedulable ClusterQueue (one each);
2. snapshot  - fix the state every nomination is judged against;
3. nominate  - check the namespace, assign flavors and, if needed, find victims;
4. order     - non-borrowing before borrowing, then priority, then age (or, with fair
               sharing, the lowest resulting share first);
5. admit     - admit what still fits (assumed in the cache at once) and issue
               preemptions, re-checking quota after every admission of the cycle;
6. requeue   - put back what wasn't admitted: parked or blocking until something
               changes, or retried next cycle if it only lost a race in this one.

The core is single-threaded, so the live cache *is* the snapshot of step 2: nothing
else mutates it during a cycle, and preemption what-ifs restore it exactly. Step 5
mutates it, which is what makes later entries see earlier admissions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from manager.core import fairsharing, quota, reasons
from manager.core.cache import Cache, ClusterQueueState
from manager.core.decisions import Admit, Preempt, Victim
from manager.core.flavorassigner import Assignment, FlavorAssigner, Mode
from manager.core.model import (
    BorrowWithinCohortPolicy,
    FairSharingConfig,
    Namespace,
    PreemptionPolicy,
    WorkloadKey,
)
from manager.core.preemption import Preemptor, Target
from manager.core.queues import PendingWorkload, QueueManager
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


@dataclass(slots=True)
class CycleDecisions:
    admitted: list[Admit] = field(default_factory=list)
    preempted: list[Preempt] = field(default_factory=list)
    evaluated: int = 0


class Scheduler:
    def __init__(
        self,
        cache: Cache,
        queues: QueueManager,
        namespaces: Mapping[Namespace, Mapping[str, str]],
        fair_sharing: FairSharingConfig | None,
    ) -> None:
        self.cache = cache
        self.queues = queues
        self.namespaces = namespaces
        self.fair_sharing = fair_sharing

    def cycle(self, now: float) -> CycleDecisions:
        decisions = CycleDecisions()

        # 1. heads: one per schedulable ClusterQueue.
        heads = self.queues.heads(now)
        decisions.evaluated = len(heads)
        if not heads:
            return decisions

        # 2. snapshot: the cache, untouched until step 5 (see the module docstring).

        # 3. nominate: flavors, and victims when preemption is needed.
        entries = [self._nominate(head) for head in heads]

        # 4. order.
        entries.sort(key=self._order_key)

        # 5. admit, re-checking quota as earlier entries take it.
        claimed: set[WorkloadKey] = set()
        reclaiming_trees: set[int] = set()
        for entry in entries:
            self._admit(entry, now, claimed, reclaiming_trees, decisions)

        # 6. requeue what wasn't admitted.
        for entry in entries:
            self._requeue(entry)
        return decisions

    # -- 3. nominate -----------------------------------------------------------------

    def _nominate(self, head: PendingWorkload) -> Entry:
        cq = self.cache.cluster_queues[head.cluster_queue] if head.cluster_queue else None
        assert cq is not None, "heads only come from existing ClusterQueues"
        entry = Entry(head, cq)
        selector = cq.spec.namespace_selector
        if selector is None or not selector.matches(self.namespaces.get(head.namespace, {})):
            entry.outcome = Outcome.PARKED
            entry.reason = reasons.namespace_not_selected(head.namespace, cq.spec.name)
            return entry
        preemptor = Preemptor(
            self.cache,
            cq,
            head.workload,
            order_time=head.order_time,
            fair_sharing=self.fair_sharing,
        )
        assignment = FlavorAssigner(
            head.workload,
            cq,
            self.cache.flavors,
            preemptor,
            can_preempt_while_borrowing=self._can_preempt_while_borrowing(cq),
        ).assign()
        entry.assignment = assignment
        if assignment.mode is Mode.PREEMPT:
            entry.targets = preemptor.targets(assignment.usage, assignment.frs_needing_preemption())
            if entry.targets:
                entry.reason = reasons.waiting_for_preemption(len(entry.targets))
            else:
                entry.reason = assignment.reason
        elif assignment.mode is Mode.NO_FIT:
            entry.reason = assignment.reason
        if self.fair_sharing is not None:
            entry.share = fairsharing.dominant_resource_share(cq, assignment.usage)
        return entry

    def _can_preempt_while_borrowing(self, cq: ClusterQueueState) -> bool:
        policy = cq.spec.preemption
        if policy.borrow_within_cohort.policy is not BorrowWithinCohortPolicy.NEVER:
            return True
        return (
            self.fair_sharing is not None
            and policy.reclaim_within_cohort is not PreemptionPolicy.NEVER
        )

    # -- 4. order --------------------------------------------------------------------

    def _order_key(self, entry: Entry) -> tuple[float, int, float, str]:
        workload = entry.pending.workload
        if self.fair_sharing is not None:
            first = entry.share
        else:
            first = 1.0 if entry.assignment is not None and entry.assignment.borrowing else 0.0
        return (first, -workload.priority, entry.pending.order_time, entry.pending.key)

    # -- 5. admit --------------------------------------------------------------------

    def _admit(
        self,
        entry: Entry,
        now: float,
        claimed: set[WorkloadKey],
        reclaiming_trees: set[int],
        decisions: CycleDecisions,
    ) -> None:
        assignment = entry.assignment
        if assignment is None or assignment.mode is Mode.NO_FIT:
            return
        cq = entry.cq
        tree = id(cq.root())
        if assignment.mode is Mode.PREEMPT:
            if not entry.targets:
                return
            keys = {t.workload.key for t in entry.targets}
            if not keys.isdisjoint(claimed):
                entry.outcome = Outcome.RETRY
                entry.reason = reasons.retry(
                    "its preemption targets overlap with another workload's in this cycle"
                )
                return
            claimed |= keys
            if cq.parent is not None:
                reclaiming_trees.add(tree)
            entry.outcome = Outcome.PREEMPTING
            fresh = [t for t in entry.targets if not t.workload.evicting]
            if fresh:
                uid = entry.pending.workload.uid or entry.pending.key
                for target in fresh:
                    target.workload.evicting = True
                decisions.preempted.append(
                    Preempt(
                        preemptor=entry.pending.key,
                        cluster_queue=cq.spec.name,
                        victims=tuple(
                            Victim(
                                workload=t.workload.key,
                                cluster_queue=t.workload.cluster_queue,
                                reason=t.reason,
                                message=(
                                    f"Preempted to accommodate a workload (UID: {uid}) "
                                    f"due to {t.reason.human}"
                                ),
                            )
                            for t in fresh
                        ),
                    )
                )
            return
        if assignment.borrowing and tree in reclaiming_trees:
            entry.outcome = Outcome.RETRY
            entry.reason = reasons.retry(
                "skipped: its cohort's quota is being reclaimed by a preemption in this cycle"
            )
            return
        usage = assignment.usage
        if any(value > quota.available(cq, fr) for fr, value in usage.items()):
            entry.outcome = Outcome.RETRY
            entry.reason = reasons.retry(
                "no longer fits after another workload was admitted in this cycle"
            )
            return
        borrowing = any(quota.is_borrowing_with(cq, fr, value) for fr, value in usage.items())
        admission = assignment.admission(cq)
        pending = entry.pending
        self.queues.remove(pending.key)
        held = self.cache.reserve(
            pending.workload,
            admission,
            reserved_at=now,
            order_time=pending.order_time,
            admitted=False,
            assumed=True,
        )
        entry.outcome = Outcome.ADMITTED
        decisions.admitted.append(Admit(pending.key, admission, dict(held.usage), borrowing))

    # -- 6. requeue ------------------------------------------------------------------

    def _requeue(self, entry: Entry) -> None:
        reason = entry.reason or reasons.queued()
        match entry.outcome:
            case Outcome.ADMITTED:
                pass
            case Outcome.RETRY:
                self.queues.set_reason(entry.pending, reason)
            case Outcome.PREEMPTING:
                self.queues.block(entry.pending, reason)
            case Outcome.PARKED:
                self.queues.park(entry.pending, reason)
            case Outcome.SET_ASIDE:
                self.queues.set_aside(entry.pending, reason)
