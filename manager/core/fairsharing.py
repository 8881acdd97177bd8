"""Fair sharing: dominant resource share (DRS) and preemption between borrowing queues.

A ClusterQueue's share is how much it borrows beyond its own quota, relative to what
its cohort could lend, for its most-borrowed resource, divided by its weight (Kueue's
KEP-1714). Within a cohort, the admission order prefers the queue whose share after
admitting the workload is lowest, and preemption may take workloads from a queue whose
share is (or would stay) higher than the preemptor's.

What is supported: per-ClusterQueue shares for ordering heads and for
InCohortFairSharing preemption with both Kueue strategies. Cohort-level shares in
hierarchical cohorts (Kueue's tournament between sub-cohorts) are not modelled: queues
are compared by their own share only.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from manager.core import quota
from manager.core.cachestate import AdmittedWorkload, ClusterQueueState
from manager.core.decisions import PreemptionReason
from manager.core.model import ClusterQueueName, FairSharingStrategy, FlavorResource, ResourceName
from manager.core.quota import QuotaNode


def dominant_resource_share(
    node: QuotaNode, delta: Mapping[FlavorResource, int] | None = None, *, sign: int = 1
) -> float:
    """The node's weighted share with ``delta`` added (sign=1) or removed (sign=-1).

    0 when not borrowing; +inf when borrowing with weight 0.
    """
    parent = node.parent
    if parent is None:
        return 0.0
    borrowed: dict[ResourceName, int] = {}
    usage = node.usage
    for fr, own in node.subtree_quota.items():
        extra = sign * delta.get(fr, 0) if delta else 0
        amount = usage.get(fr, 0) + extra - own
        if amount > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + amount
    if not borrowed:
        return 0.0
    if node.fair_weight == 0:
        return math.inf
    lendable: dict[ResourceName, int] = {}
    for fr in node.root().subtree_quota:
        lendable[fr[1]] = lendable.get(fr[1], 0) + quota.potential_available(parent, fr)
    ratio = 0.0
    for resource, amount in borrowed.items():
        capacity = lendable.get(resource, 0)
        if capacity > 0:
            ratio = max(ratio, amount * 1000.0 / capacity)
    return ratio / node.fair_weight


Strategy = Callable[[float, float, float], bool]
"""(preemptor share after, preemptee share before, preemptee share after) -> may preempt."""


def _less_than_or_equal_to_final_share(
    preemptor_new: float, _old: float, preemptee_new: float
) -> bool:
    return preemptor_new <= preemptee_new


def _less_than_initial_share(preemptor_new: float, preemptee_old: float, _new: float) -> bool:
    return preemptor_new < preemptee_old


STRATEGIES: dict[FairSharingStrategy, Strategy] = {
    FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE: _less_than_or_equal_to_final_share,
    FairSharingStrategy.LESS_THAN_INITIAL_SHARE: _less_than_initial_share,
}


class Simulator(Protocol):
    """The what-if operations fair preemption needs from the preemptor."""

    def remove(self, workload: AdmittedWorkload) -> None: ...

    def restore(self, workload: AdmittedWorkload) -> None: ...

    def fits(self, allow_borrowing: bool) -> bool: ...

    def is_borrowing(self, cq: ClusterQueueState) -> bool: ...


class _QueueCandidates:
    __slots__ = ("cq", "share", "workloads")

    def __init__(
        self, cq: ClusterQueueState, share: float, workloads: list[AdmittedWorkload]
    ) -> None:
        self.cq = cq
        self.share = share
        self.workloads = workloads


def fair_preemptions(
    *,
    preemptor_cq: ClusterQueueState,
    requests: Mapping[FlavorResource, int],
    candidates: Sequence[AdmittedWorkload],
    cluster_queues: Mapping[ClusterQueueName, ClusterQueueState],
    strategies: Sequence[FairSharingStrategy],
    below_threshold: Callable[[AdmittedWorkload], bool],
    sim: Simulator,
) -> list[tuple[AdmittedWorkload, PreemptionReason]]:
    """Pick victims from the queues with the highest share first (Kueue's fairPreemptions).

    ``candidates`` are already filtered by policy and sorted in preemption order. On
    success the victims are still removed from the quota tree (the caller minimises
    the set and restores it); on failure the tree is restored and the list is empty.
    """
    rules = [STRATEGIES[s] for s in strategies] or [_less_than_or_equal_to_final_share]
    queues = _by_queue(candidates, cluster_queues, first_only=False)
    heap = _share_heap(queues)
    preemptor_share = dominant_resource_share(preemptor_cq, requests)
    targets: list[tuple[AdmittedWorkload, PreemptionReason]] = []
    retry: list[AdmittedWorkload] = []
    fits = False
    while heap and not fits:
        cand = queues[heapq.heappop(heap)[2]]
        if cand.cq is preemptor_cq:
            victim = cand.workloads.pop(0)
            sim.remove(victim)
            targets.append((victim, PreemptionReason.IN_CLUSTER_QUEUE))
            if sim.fits(True):
                fits = True
                break
            preemptor_share = dominant_resource_share(preemptor_cq, requests)
            if cand.workloads:
                cand.share = dominant_resource_share(cand.cq)
                heapq.heappush(heap, (-cand.share, cand.cq.name, cand.cq.name))
            continue
        for i, victim in enumerate(cand.workloads):
            new_share = dominant_resource_share(cand.cq, victim.usage, sign=-1)
            allowed = rules[0](preemptor_share, cand.share, new_share)
            if allowed or below_threshold(victim):
                sim.remove(victim)
                reason = (
                    PreemptionReason.IN_COHORT_FAIR_SHARING
                    if allowed
                    else PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING
                )
                targets.append((victim, reason))
                if sim.fits(True):
                    fits = True
                    break
                cand.workloads = cand.workloads[i + 1 :]
                if cand.workloads and sim.is_borrowing(cand.cq):
                    cand.share = new_share
                    heapq.heappush(heap, (-cand.share, cand.cq.name, cand.cq.name))
                break
            retry.append(victim)
    if not fits and len(rules) > 1:
        queues = _by_queue(retry, cluster_queues, first_only=True)
        heap = _share_heap(queues)
        while heap and not fits:
            cand = queues[heapq.heappop(heap)[2]]
            if rules[1](preemptor_share, cand.share, 0.0):
                victim = cand.workloads[0]
                sim.remove(victim)
                targets.append((victim, PreemptionReason.IN_COHORT_FAIR_SHARING))
                fits = sim.fits(True)
    if not fits:
        for victim, _ in targets:
            sim.restore(victim)
        return []
    return targets


def _by_queue(
    candidates: Sequence[AdmittedWorkload],
    cluster_queues: Mapping[ClusterQueueName, ClusterQueueState],
    *,
    first_only: bool,
) -> dict[str, _QueueCandidates]:
    queues: dict[str, _QueueCandidates] = {}
    for workload in candidates:
        entry = queues.get(workload.cluster_queue)
        if entry is None:
            cq = cluster_queues[workload.cluster_queue]
            queues[workload.cluster_queue] = _QueueCandidates(
                cq, dominant_resource_share(cq), [workload]
            )
        elif not first_only:
            entry.workloads.append(workload)
    return queues


def _share_heap(queues: Mapping[str, _QueueCandidates]) -> list[tuple[float, str, str]]:
    heap = [(-q.share, name, name) for name, q in queues.items()]
    heapq.heapify(heap)
    return heap
