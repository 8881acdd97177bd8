"""The rules of classical preemption (Kueue semantics), for one pending workload in its
ClusterQueue: which admitted workloads its queue's policy allows as candidates and in which
order, by which variant each may go (within the queue, reclaim with or without borrowing, a
hierarchical advantage), and whether the preemptor fits. The search for a minimal set of
victims is preemption.py's ``Preemptor``, built on these."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from manager.core import quota
from manager.core.cache import Cache
from manager.core.cachestate import AdmittedWorkload, ClusterQueueState, CohortState
from manager.core.decisions import PreemptionReason
from manager.core.model import (
    BorrowWithinCohortPolicy,
    FairSharingConfig,
    FlavorResource,
    PreemptionPolicy,
    Workload,
)
from manager.core.quota import QuotaNode


class Variant(IntEnum):
    WITHIN_CLUSTER_QUEUE = 0
    HIERARCHICAL_RECLAIM = 1  # the preemptor fits in its own subtree: priority aside, it wins
    RECLAIM_WITHOUT_BORROWING = 2  # only if the preemptor won't borrow afterwards
    RECLAIM_WHILE_BORROWING = 3  # borrowWithinCohort allows it even while borrowing

    @property
    def reason(self) -> PreemptionReason:
        if self is Variant.WITHIN_CLUSTER_QUEUE:
            return PreemptionReason.IN_CLUSTER_QUEUE
        if self is Variant.RECLAIM_WHILE_BORROWING:
            return PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING
        return PreemptionReason.IN_COHORT_RECLAMATION


@dataclass(frozen=True, slots=True)
class Target:
    workload: AdmittedWorkload
    reason: PreemptionReason


Question = tuple[tuple[tuple[FlavorResource, int], ...], frozenset[FlavorResource]]
"""What a search for victims is asked: the requests (sorted) and the flavor-resources that
need preemption."""


@dataclass(slots=True)
class Candidate:  # not frozen: built for every admitted workload a head may preempt
    workload: AdmittedWorkload
    cq: ClusterQueueState
    lca: QuotaNode | None
    """Where the candidate's queue meets the preemptor's path (None: same queue)."""
    path: tuple[QuotaNode, ...]
    """Cohorts between the candidate's queue and ``lca``: they too must be borrowing."""


class PreemptionRules:
    """One pending workload's preemption rules: its queue's policy, the candidates it allows
    (collected and sorted lazily, once), and the quota checks the search asks."""

    def __init__(
        self,
        cache: Cache,
        cq: ClusterQueueState,
        workload: Workload,
        *,
        order_time: float,
        fair_sharing: FairSharingConfig | None,
    ) -> None:
        self.cache = cache
        self.cq = cq
        self.workload = workload
        self.priority = workload.priority
        self.order_time = order_time
        self.fair_sharing = fair_sharing
        self._candidates: list[Candidate] | None = None
        self._own_candidates: list[Candidate] | None = None
        self._answers: dict[Question, list[Target]] = {}
        """The victims found so far, by question (``Preemptor.targets``)."""
        self._ancestors: list[QuotaNode] = []
        node = cq.parent
        while node is not None:
            self._ancestors.append(node)
            node = node.parent

    @property
    def preemption_is_possible(self) -> bool:
        policy = self.cq.spec.preemption
        return policy.within_cluster_queue is not PreemptionPolicy.NEVER or (
            self.cq.parent is not None
            and policy.reclaim_within_cohort is not PreemptionPolicy.NEVER
        )

    def _sorted_candidates(self) -> list[Candidate]:
        if self._candidates is None:
            self._candidates = self._collect()
            self._candidates.sort(key=_candidate_order)
        return self._candidates

    def _sorted_own_candidates(self) -> list[Candidate]:
        """The candidates in the preemptor's own queue only, in the same order."""
        if self._own_candidates is None:
            if self._candidates is not None:
                self._own_candidates = [c for c in self._candidates if c.lca is None]
            else:
                self._own_candidates = self._collect_own()
                self._own_candidates.sort(key=_candidate_order)
        return self._own_candidates

    def _only_own_queue_can_help(
        self, frs: set[FlavorResource], advantage: dict[int, bool]
    ) -> bool:
        """True when no victim in another queue could be chosen, so that collecting and
        ranking them (every workload of the cohort) can be skipped: with borrowWithinCohort
        Never and the preemptor over its nominal quota, ``targets`` makes only the attempt
        that allows borrowing, where reclaiming from other queues needs a hierarchical
        advantage; without one, every such candidate is RECLAIM_WITHOUT_BORROWING, which that
        attempt never takes. (Fair sharing ranks other queues differently: not skipped.)"""
        return (
            self.fair_sharing is None
            and self.cq.spec.preemption.borrow_within_cohort.policy
            is BorrowWithinCohortPolicy.NEVER
            and not self._under_nominal(frs)
            and not any(advantage.values())
        )

    def _collect_own(self) -> list[Candidate]:
        policy = self.cq.spec.preemption.within_cluster_queue
        if policy is PreemptionPolicy.NEVER:
            return []
        return [
            Candidate(workload, self.cq, None, ())
            for workload in self.cq.workloads.values()
            if self._allowed(policy, workload)
        ]

    def _collect(self) -> list[Candidate]:
        policy = self.cq.spec.preemption
        found = self._collect_own()
        if policy.reclaim_within_cohort is PreemptionPolicy.NEVER:
            return found
        previous: QuotaNode = self.cq
        for ancestor in self._ancestors:
            if isinstance(ancestor, CohortState):
                for cq, path in _queues_below(ancestor, skip=previous):
                    for workload in cq.workloads.values():
                        if self._allowed(policy.reclaim_within_cohort, workload):
                            found.append(Candidate(workload, cq, ancestor, path))
            previous = ancestor
        return found

    def _allowed(self, policy: PreemptionPolicy, candidate: AdmittedWorkload) -> bool:
        if policy is PreemptionPolicy.ANY:
            return True
        if candidate.priority < self.priority:
            return policy is not PreemptionPolicy.NEVER
        return (
            policy is PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
            and candidate.priority == self.priority
            and self.order_time < candidate.order_time
        )

    def _reclaim_variant(self, candidate: AdmittedWorkload) -> Variant:
        threshold = self._borrow_threshold()
        if threshold is None or candidate.priority >= threshold:
            return Variant.RECLAIM_WITHOUT_BORROWING
        return Variant.RECLAIM_WHILE_BORROWING

    def _borrow_threshold(self) -> int | None:
        """Candidates in other queues strictly below this may be preempted while borrowing."""
        bwc = self.cq.spec.preemption.borrow_within_cohort
        if bwc.policy is BorrowWithinCohortPolicy.NEVER:
            return None
        if bwc.max_priority_threshold is not None:
            return min(self.priority, bwc.max_priority_threshold + 1)
        return self.priority

    def _advantage_by_level(self, requests: dict[FlavorResource, int]) -> dict[int, bool]:
        """Per ancestor: does the preemptor fit in the subtree just below it?"""
        advantage: dict[int, bool] = {}
        has, remaining = quota.fits_in_quota(self.cq, requests)
        for ancestor in self._ancestors:
            advantage[id(ancestor)] = has
            fits, remaining = quota.fits_in_quota(ancestor, remaining)
            has = has or fits
        return advantage

    def _borrowing_along(
        self,
        cand: Candidate,
        frs: set[FlavorResource],
        memo: dict[int, bool] | None = None,
    ) -> bool:
        """Are the candidate's queue and the cohorts up to ``lca`` borrowing in ``frs``?"""
        for node in (cand.cq, *cand.path):
            known = memo.get(id(node)) if memo is not None else None
            if known is None:
                known = not quota.is_within_nominal(node, frs)
                if memo is not None:
                    memo[id(node)] = known
            if not known:
                return False
        return True

    def _could_fit(
        self,
        requests: dict[FlavorResource, int],
        ranked: list[tuple[int, int, Candidate, Variant]],
        allow_borrowing: bool,
    ) -> bool:
        """An upper bound: would evicting every eligible candidate be enough?

        Freeing X anywhere raises what the preemptor can use by at most X, and never
        beyond its potential; only its own workloads lower its own usage. This keeps the
        hopeless cases at O(candidates) instead of simulating every removal.
        """
        freed: dict[FlavorResource, int] = {}
        freed_here: dict[FlavorResource, int] = {}
        for _, _, cand, variant in ranked:
            if allow_borrowing and variant is Variant.RECLAIM_WITHOUT_BORROWING:
                continue
            for fr, value in cand.workload.usage.items():
                if fr in requests:
                    freed[fr] = freed.get(fr, 0) + value
                    if cand.lca is None:
                        freed_here[fr] = freed_here.get(fr, 0) + value
        cq = self.cq
        for fr, value in requests.items():
            ceiling = min(
                quota.potential_available(cq, fr), quota.available(cq, fr) + freed.get(fr, 0)
            )
            if value > ceiling:
                return False
            if not allow_borrowing and quota.is_borrowing_with(
                cq, fr, value - freed_here.get(fr, 0)
            ):
                return False
        return True

    def _valid(
        self, cand: Candidate, variant: Variant, frs: set[FlavorResource], allow_borrowing: bool
    ) -> bool:
        if cand.lca is None:
            return True
        if allow_borrowing and variant is Variant.RECLAIM_WITHOUT_BORROWING:
            return False
        return self._borrowing_along(cand, frs)

    def _under_nominal(self, frs: set[FlavorResource]) -> bool:
        cq = self.cq
        return all(
            cq.usage.get(fr, 0) < (cq.quotas[fr].nominal if fr in cq.quotas else 0) for fr in frs
        )

    def _fits(self, requests: dict[FlavorResource, int], allow_borrowing: bool) -> bool:
        cq = self.cq
        for fr, value in requests.items():
            if not allow_borrowing and quota.is_borrowing_with(cq, fr, value):
                return False
            if value > quota.available(cq, fr):
                return False
        return True


def _candidate_order(c: Candidate) -> tuple[int, int, int, float, str]:
    """Being evicted first, other queues before the preemptor's own, lower priority first,
    most recently admitted first (then by key, for determinism)."""
    return (
        0 if c.workload.evicting else 1,
        1 if c.lca is None else 0,
        c.workload.priority,
        -c.workload.reserved_at,
        c.workload.key,
    )


def _queues_below(
    cohort: CohortState, *, skip: QuotaNode
) -> list[tuple[ClusterQueueState, tuple[QuotaNode, ...]]]:
    """Every ClusterQueue under ``cohort`` outside ``skip``, with the cohorts in between."""
    found: list[tuple[ClusterQueueState, tuple[QuotaNode, ...]]] = []
    stack: list[tuple[CohortState, tuple[QuotaNode, ...]]] = [(cohort, ())]
    while stack:
        node, path = stack.pop()
        for cq in node.child_cqs.values():
            if cq is not skip:
                found.append((cq, path))
        for child in node.child_cohorts.values():
            if child is not skip:
                stack.append((child, (*path, child)))
    return found
