"""Choose the fewest admitted workloads to evict so a pending one fits (Kueue semantics).

Candidates must use a flavor-resource the preemptor needs and be allowed by the
preemptor's ClusterQueue policy:

- same ClusterQueue: ``withinClusterQueue`` LowerPriority, or LowerOrNewerEqualPriority
  (equal priority but queued later than the preemptor);
- other ClusterQueues of the cohort tree, only while they borrow:
  ``reclaimWithinCohort`` LowerPriority or Any. Whether the preemptor may itself
  borrow while reclaiming depends on ``borrowWithinCohort`` (and its priority
  threshold), unless the preemptor fits within its own part of the tree (it then has
  the stronger claim and may always reclaim).

Candidates are tried in order: already being evicted first, other queues before the
preemptor's own, lower priority first, most recently admitted first. They are removed
one by one from a what-if copy of the usage (the live quota tree, restored after)
until the preemptor fits; then each is put back, last first, if the preemptor still
fits without it. The result is a minimal set for that order, never violating policy.

The rules (candidates, their order and variants, the quota checks) are preemptionrules.py's.
"""

from __future__ import annotations

from operator import itemgetter

from manager.core import fairsharing, quota
from manager.core.cachestate import AdmittedWorkload, ClusterQueueState
from manager.core.flavorassigner import Granular, Mode
from manager.core.model import BorrowWithinCohortPolicy, FlavorResource
from manager.core.preemptionrules import Candidate, PreemptionRules, Question, Target, Variant


class Preemptor(PreemptionRules):
    """Finds victims for one pending workload in its ClusterQueue.

    Built once per head per cycle: the policy-allowed candidates are collected and
    sorted lazily, once, and reused by every what-if the flavor assigner asks for.
    """

    # -- the oracle the flavor assigner asks --------------------------------------------

    def simulate(self, requests: dict[FlavorResource, int]) -> Granular:
        """Kueue's preemption oracle, asked once per flavor for the resources that need it.

        Upstream asks once per resource; asking for the flavor's resources together is
        both cheaper and closer to what the final preemption will need.
        """
        targets = self.targets(requests, set(requests))
        if not targets:
            return Granular(Mode.NO_CANDIDATES, self._borrowing_level(requests))
        for target in targets:
            self.cache.simulate_removal(target.workload)
        borrow = self._borrowing_level(requests)
        for target in targets:
            self.cache.simulate_restore(target.workload)
        same_queue = any(t.workload.cluster_queue == self.cq.spec.name for t in targets)
        return Granular(Mode.PREEMPT if same_queue else Mode.RECLAIM, borrow)

    def _borrowing_level(self, requests: dict[FlavorResource, int]) -> int:
        return max(quota.borrowing_level(self.cq, fr, value)[0] for fr, value in requests.items())

    # -- victims -------------------------------------------------------------------------

    def targets(
        self, requests: dict[FlavorResource, int], frs: set[FlavorResource]
    ) -> list[Target]:
        """A minimal set of victims so ``requests`` fit, or [] when policy allows none.

        Remembered by question: a nomination asks the oracle per flavor, then asks again
        for its chosen assignment's victims, mostly the same question, and the cache is
        the same in between (every what-if is restored)."""
        if not frs or not self.preemption_is_possible:
            return []
        question: Question = (tuple(sorted(requests.items())), frozenset(frs))
        known = self._answers.get(question)
        if known is None:
            known = self._answers[question] = self._search(requests, frs)
        return list(known)

    def _search(
        self, requests: dict[FlavorResource, int], frs: set[FlavorResource]
    ) -> list[Target]:
        advantage = self._advantage_by_level(requests)
        candidates = (
            self._sorted_own_candidates()
            if self._only_own_queue_can_help(frs, advantage)
            else self._sorted_candidates()
        )
        borrowing: dict[int, bool] = {}  # per queue or cohort, before any what-if
        ranked: list[tuple[int, int, Candidate, Variant]] = []
        for cand in candidates:
            if cand.workload.used_frs.isdisjoint(frs):
                continue
            if cand.lca is None:
                variant, group = Variant.WITHIN_CLUSTER_QUEUE, 2
            elif not self._borrowing_along(cand, frs, borrowing):
                continue
            elif advantage[id(cand.lca)]:
                variant, group = Variant.HIERARCHICAL_RECLAIM, 0
            else:
                variant, group = self._reclaim_variant(cand.workload), 1
            ranked.append((0 if cand.workload.evicting else 1, group, cand, variant))
        if not ranked:
            return []
        # Stable: keeps the candidate order within (evicting first) x (group) buckets.
        ranked.sort(key=itemgetter(0, 1))
        no_other = all(r[1] == 2 for r in ranked)
        if self.fair_sharing is not None and not no_other:
            return self._fair(requests, frs, ranked)
        no_hierarchical = all(r[1] != 0 for r in ranked)
        borrow_forbidden = (
            self.cq.spec.preemption.borrow_within_cohort.policy is BorrowWithinCohortPolicy.NEVER
        )
        attempts: tuple[bool, ...]
        if no_other or (borrow_forbidden and not self._under_nominal(frs)):
            attempts = (True,)
        elif borrow_forbidden and no_hierarchical:
            attempts = (False, True)
        else:
            attempts = (True, False)
        for allow_borrowing in attempts:
            targets = self._minimal(requests, frs, ranked, allow_borrowing)
            if targets:
                return targets
        return []

    def _minimal(
        self,
        requests: dict[FlavorResource, int],
        frs: set[FlavorResource],
        ranked: list[tuple[int, int, Candidate, Variant]],
        allow_borrowing: bool,
    ) -> list[Target]:
        if not self._could_fit(requests, ranked, allow_borrowing):
            return []
        removed: list[Target] = []
        fits = False
        for _, _, cand, variant in ranked:
            if not self._valid(cand, variant, frs, allow_borrowing):
                continue
            self.cache.simulate_removal(cand.workload)
            removed.append(Target(cand.workload, variant.reason))
            if self._fits(requests, allow_borrowing):
                fits = True
                break
        if not fits:
            for target in removed:
                self.cache.simulate_restore(target.workload)
            return []
        return self._fill_back(requests, removed, allow_borrowing)

    def _fill_back(
        self, requests: dict[FlavorResource, int], removed: list[Target], allow_borrowing: bool
    ) -> list[Target]:
        """Put back every victim the preemptor can do without, last chosen first."""
        kept = [removed[-1]]
        for target in reversed(removed[:-1]):
            self.cache.simulate_restore(target.workload)
            if not self._fits(requests, allow_borrowing):
                self.cache.simulate_removal(target.workload)
                kept.append(target)
        for target in kept:
            self.cache.simulate_restore(target.workload)
        kept.reverse()
        return kept

    def _fair(
        self,
        requests: dict[FlavorResource, int],
        frs: set[FlavorResource],
        ranked: list[tuple[int, int, Candidate, Variant]],
    ) -> list[Target]:
        assert self.fair_sharing is not None
        threshold = self._borrow_threshold()
        sim = _Simulation(self, requests, frs)
        chosen = fairsharing.fair_preemptions(
            preemptor_cq=self.cq,
            requests=requests,
            candidates=[r[2].workload for r in ranked],
            cluster_queues=self.cache.cluster_queues,
            strategies=self.fair_sharing.preemption_strategies,
            below_threshold=lambda w: threshold is not None and w.priority < threshold,
            sim=sim,
        )
        if not chosen:
            return []
        return self._fill_back(requests, [Target(w, reason) for w, reason in chosen], True)

    # -- rules ---------------------------------------------------------------------------


class _Simulation:
    """Adapts a Preemptor to what fair sharing needs (fairsharing.Simulator)."""

    def __init__(
        self, preemptor: Preemptor, requests: dict[FlavorResource, int], frs: set[FlavorResource]
    ) -> None:
        self.preemptor = preemptor
        self.requests = requests
        self.frs = frs

    def remove(self, workload: AdmittedWorkload) -> None:
        self.preemptor.cache.simulate_removal(workload)

    def restore(self, workload: AdmittedWorkload) -> None:
        self.preemptor.cache.simulate_restore(workload)

    def fits(self, allow_borrowing: bool) -> bool:
        return self.preemptor._fits(self.requests, allow_borrowing)

    def is_borrowing(self, cq: ClusterQueueState) -> bool:
        return not quota.is_within_nominal(cq, self.frs)
