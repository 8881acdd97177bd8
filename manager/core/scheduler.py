"""One scheduling cycle, in Kueue's six numbered steps.

1. heads     - take the head of every schedulable ClusterQueue (one each), and every
               head waiting for its victims in the same cohort trees (Kueue's sticky
               heads: evaluated again until admitted, so their claim holds);
2. snapshot  - fix the state every nomination is judged against;
3. nominate  - check the namespace, assign flavors and, if needed, find victims;
4. order     - non-borrowing before borrowing, then priority, then age (or, with fair
               sharing, the lowest resulting share first);
5. admit     - in that order, each entry must still fit once the victims chosen so far
               in the cycle (and its own) are gone and the usage of earlier entries is
               counted, preemptors' included; then admit it (assumed in the cache at once)
               or issue its preemptions;
6. requeue   - put back what wasn't admitted: parked or blocking until something
               changes, holding its queue while its victims go, or retried next cycle if
               it only lost a race in this one.

The core is single-threaded, so the live cache *is* the snapshot of step 2: nothing
else mutates it during a cycle, and preemption what-ifs restore it exactly. Step 5
mutates it, which is what makes later entries see earlier admissions.

What a cycle carries (its entries, the claims made so far, its decisions) is cycle.py's.
"""

from __future__ import annotations

from collections.abc import Mapping

from manager.core import fairsharing, quota, reasons, tas_admission
from manager.core.cache import Cache
from manager.core.cachestate import ClusterQueueState
from manager.core.cycle import CycleClaims, CycleDecisions, Entry, NoWayIn, Outcome
from manager.core.decisions import Admit, Preempt, Victim
from manager.core.flavorassigner import Assignment, FlavorAssigner, Mode
from manager.core.model import (
    BorrowWithinCohortPolicy,
    FairSharingConfig,
    Namespace,
    PreemptionPolicy,
)
from manager.core.pending import PendingWorkload
from manager.core.preemption import Preemptor
from manager.core.queues import QueueManager
from manager.core.reasons import PendingKind, PendingReason


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
        self._no_way_in: dict[str, NoWayIn] = {}
        """By ClusterQueue: its last head that found no way in (see ``NoWayIn``)."""
        self.remember_no_way_in = True
        """Off only in the property test that proves it changes no decision."""
        self.evaluated = 0
        """Heads judged by every cycle so far."""
        self.nominated = 0
        """Of those, nominated afresh (not answered from ``_no_way_in``)."""

    def cycle(self, now: float) -> CycleDecisions:
        decisions = CycleDecisions()

        # 1. heads: one per schedulable ClusterQueue, and the preemptors they compete with.
        heads = self.queues.heads(now)
        if not heads:
            return decisions
        heads += self._preemptors_alongside(heads)
        decisions.evaluated = len(heads)
        self.evaluated += len(heads)

        # 2. snapshot: the cache, untouched until step 5 (see the module docstring).

        # 3. nominate: flavors, and victims when preemption is needed.
        entries = [self._nominate(head) for head in heads]

        # 4. order.
        entries.sort(key=self._order_key)

        # 5. admit, re-checking quota as earlier entries take it.
        cycle = CycleClaims()
        try:
            for entry in entries:
                self._admit(entry, now, cycle, decisions)
        finally:
            cycle.release_preemptors()

        # 6. requeue what wasn't admitted.
        for entry in entries:
            self._requeue(entry)
        return decisions

    def _preemptors_alongside(self, heads: list[PendingWorkload]) -> list[PendingWorkload]:
        """Heads waiting for their victims in the cohort trees of this cycle's heads: the
        quota being freed for them must not go to another queue's head meanwhile (Kueue
        requeues such a head at once and evaluates it every cycle). Alone, they start no
        cycle: only a release, which wakes their queue, can change their answer."""
        held = self.queues.preempting_heads()
        if not held:
            return []
        cqs = self.cache.cluster_queues
        trees = {id(cqs[h.cluster_queue].root()) for h in heads if h.cluster_queue in cqs}
        return [
            p for p in held if p.cluster_queue in cqs and id(cqs[p.cluster_queue].root()) in trees
        ]

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
        if head.workload.not_chargeable is not None:
            entry.outcome = Outcome.PARKED
            entry.reason = PendingReason(PendingKind.NOT_CHARGEABLE, head.workload.not_chargeable)
            return entry
        left_to = head.workload.left_to_check
        if left_to is not None and left_to not in cq.spec.check_controllers:
            entry.outcome = Outcome.PARKED
            entry.reason = reasons.check_controller_missing(left_to, cq.spec.name)
            return entry
        key = self._nomination_key(head, cq)
        known = self._no_way_in.get(cq.spec.name) if self.remember_no_way_in else None
        if known is not None and known.key == key:
            entry.assignment, entry.reason = known.assignment, known.reason
            entry.share = known.share
            return entry
        self.nominated += 1
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
            topologies=self.cache.tas.topologies,
        ).assign()
        self._place_by_topology(assignment, cq)
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
        if assignment.mode is Mode.NO_FIT or (
            assignment.mode is Mode.PREEMPT and not entry.targets
        ):
            self._no_way_in[cq.spec.name] = NoWayIn(key, assignment, entry.reason, entry.share)
        return entry

    def _place_by_topology(self, assignment: Assignment, cq: ClusterQueueState) -> None:
        """Pod sets placed by topology get their domains, or the workload none of its
        flavors (upstream: TAS runs once flavors are found; with preemption ahead, only
        whether the pods could ever be placed is asked)."""
        if assignment.mode is Mode.NO_FIT:
            return
        placed = tas_admission.place(
            [
                (ps.pod_set, {r: c.flavor for r, c in ps.flavors.items()})
                for ps in assignment.pod_sets
            ],
            cq.spec,
            self.cache.flavors,
            self.cache.tas,
            simulate_empty=assignment.mode is Mode.PREEMPT,
        )
        if placed.reason is not None:
            assignment.mode, assignment.reason = Mode.NO_FIT, placed.reason
            return
        if assignment.mode is Mode.FIT:
            assignment.topology = placed.assignments
        assignment.delayed_topology = placed.delayed

    def _topology_still_fits(self, assignment: Assignment) -> bool:
        if not assignment.topology:
            return True
        return tas_admission.still_fits(
            [
                (ps.pod_set, {r: c.flavor for r, c in ps.flavors.items()})
                for ps in assignment.pod_sets
            ],
            assignment.topology,
            self.cache.flavors,
            self.cache.tas,
        )

    def _nomination_key(self, head: PendingWorkload, cq: ClusterQueueState) -> tuple[object, ...]:
        """Everything a nomination reads, but the namespace (checked first): the state of
        the cohort tree, the workload's shape and priority, and its queue time where the
        policy compares it (LowerOrNewerEqualPriority)."""
        newer_matters = (
            cq.spec.preemption.within_cluster_queue
            is PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
        )
        return (
            self.cache.tree_version(cq),
            self.cache.tas.version,
            head.shape,
            head.workload.priority,
            head.order_time if newer_matters else None,
        )

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
        self, entry: Entry, now: float, cycle: CycleClaims, decisions: CycleDecisions
    ) -> None:
        assignment = entry.assignment
        if assignment is None or assignment.mode is Mode.NO_FIT:
            return
        cq = entry.cq
        usage = assignment.usage
        if assignment.mode is Mode.PREEMPT:
            if not entry.targets:
                return
            if cycle.overlaps(entry.targets):
                entry.outcome = Outcome.RETRY
                entry.reason = reasons.retry(
                    "its preemption targets overlap with another workload's in this cycle"
                )
                return
            if not cycle.fits(self.cache, cq, usage, entry.targets):
                entry.outcome = Outcome.RETRY
                entry.reason = reasons.retry(
                    "no longer fits after processing another workload in this cycle"
                )
                return
            cycle.claim(cq, usage, entry.targets)
            entry.outcome = Outcome.PREEMPTING
            fresh = [t for t in entry.targets if not t.workload.evicting]
            if fresh:
                uid = entry.pending.workload.uid or entry.pending.key
                for target in fresh:
                    self.cache.set_evicting(target.workload, True)
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
        if not cycle.fits(self.cache, cq, usage, []) or not self._topology_still_fits(assignment):
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
                self.queues.hold_for_preemption(entry.pending, reason)
            case Outcome.PARKED:
                self.queues.park(entry.pending, reason)
            case Outcome.SET_ASIDE:
                self.queues.set_aside(entry.pending, reason)
