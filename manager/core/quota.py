"""Hierarchical quota arithmetic shared by ClusterQueues and Cohorts (Kueue semantics).

Every node of a cohort tree holds, per flavor and resource:

- ``quotas``: its own nominal quota with optional borrowing and lending limits;
- ``subtree_quota``: its nominal plus what its children lend up to it. A child lends
  everything above its *local quota*, the part a lendingLimit keeps back;
- ``usage``: for a ClusterQueue, what its admitted workloads use; for a Cohort, the
  sum of its children's usage beyond their local quota.

A ClusterQueue can use its local quota plus whatever its parent has available, capped
by its borrowingLimit. Usage is added and removed incrementally (bubbling up only the
part above the local quota), so each check costs O(depth), never a tree walk.
"""

from __future__ import annotations

from dataclasses import dataclass

from manager.core.model import FlavorResource


@dataclass(frozen=True, slots=True)
class Quota:
    nominal: int = 0
    borrowing_limit: int | None = None
    lending_limit: int | None = None


class QuotaNode:
    """The quota view of a ClusterQueue or a Cohort (both subclass it in cache.py)."""

    __slots__ = ("fair_weight", "name", "parent", "quotas", "subtree_quota", "usage", "version")

    def __init__(self, name: str, *, fair_weight: float = 1.0) -> None:
        self.name = name
        self.fair_weight = fair_weight
        self.quotas: dict[FlavorResource, Quota] = {}
        self.subtree_quota: dict[FlavorResource, int] = {}
        self.usage: dict[FlavorResource, int] = {}
        self.parent: QuotaNode | None = None
        self.version = 0
        """On a tree's root: bumped whenever the workloads holding quota anywhere in the
        tree change (see ``Cache.tree_version``). What-ifs restore usage exactly and leave
        it alone."""

    def root(self) -> QuotaNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def path(self) -> str:
        """Where this node sits in its cohort tree, as Kueue's preemption messages name it:
        ``/root-cohort/.../name`` (``/name`` without a cohort)."""
        names = []
        node: QuotaNode | None = self
        while node is not None:
            names.append(node.name)
            node = node.parent
        return "/" + "/".join(reversed(names))


def local_quota(node: QuotaNode, fr: FlavorResource) -> int:
    """Capacity a lendingLimit keeps inside this node's subtree (never visible above)."""
    quota = node.quotas.get(fr)
    if quota is None or quota.lending_limit is None:
        return 0
    return max(0, node.subtree_quota.get(fr, 0) - quota.lending_limit)


def local_available(node: QuotaNode, fr: FlavorResource) -> int:
    return max(0, local_quota(node, fr) - node.usage.get(fr, 0))


def available(node: QuotaNode, fr: FlavorResource) -> int:
    """How much more of ``fr`` the node can use now, borrowing included.

    Can be negative after over-admission (quota lowered under running workloads).
    """
    parent = node.parent
    if parent is None:
        return node.subtree_quota.get(fr, 0) - node.usage.get(fr, 0)
    parent_available = available(parent, fr)
    quota = node.quotas.get(fr)
    if quota is not None and quota.borrowing_limit is not None:
        local = local_quota(node, fr)
        stored_in_parent = node.subtree_quota.get(fr, 0) - local
        used_in_parent = max(0, node.usage.get(fr, 0) - local)
        parent_available = min(
            parent_available, stored_in_parent - used_in_parent + quota.borrowing_limit
        )
    return local_available(node, fr) + parent_available


def potential_available(node: QuotaNode, fr: FlavorResource) -> int:
    """The most the node could ever use of ``fr``: ``available`` with no usage anywhere."""
    parent = node.parent
    if parent is None:
        return node.subtree_quota.get(fr, 0)
    result = local_quota(node, fr) + potential_available(parent, fr)
    quota = node.quotas.get(fr)
    if quota is not None and quota.borrowing_limit is not None:
        result = min(result, node.subtree_quota.get(fr, 0) + quota.borrowing_limit)
    return result


def add_usage(node: QuotaNode, fr: FlavorResource, value: int) -> None:
    local_free = local_available(node, fr)
    node.usage[fr] = node.usage.get(fr, 0) + value
    if node.parent is not None and value > local_free:
        add_usage(node.parent, fr, value - local_free)


def remove_usage(node: QuotaNode, fr: FlavorResource, value: int) -> None:
    stored_in_parent = node.usage.get(fr, 0) - local_quota(node, fr)
    node.usage[fr] = node.usage.get(fr, 0) - value
    if node.parent is not None and stored_in_parent > 0:
        remove_usage(node.parent, fr, min(value, stored_in_parent))


def is_borrowing_with(node: QuotaNode, fr: FlavorResource, value: int) -> bool:
    """Would using ``value`` more take the node past its own (subtree) quota?"""
    return node.usage.get(fr, 0) + value > node.subtree_quota.get(fr, 0)


def is_within_nominal(
    node: QuotaNode, frs: set[FlavorResource] | frozenset[FlavorResource]
) -> bool:
    """Not borrowing in any of ``frs`` (what makes a node off-limits for reclamation)."""
    usage, subtree = node.usage, node.subtree_quota
    return all(usage.get(fr, 0) <= subtree.get(fr, 0) for fr in frs)


def fits_in_quota(
    node: QuotaNode, requests: dict[FlavorResource, int]
) -> tuple[bool, dict[FlavorResource, int]]:
    """Whether ``requests`` fit in the node's own subtree quota, and what would spill upward."""
    fits = True
    remaining: dict[FlavorResource, int] = {}
    for fr, value in requests.items():
        if node.usage.get(fr, 0) + value > node.subtree_quota.get(fr, 0):
            fits = False
        remaining[fr] = max(0, value - local_available(node, fr))
    return fits, remaining


def borrowing_level(node: QuotaNode, fr: FlavorResource, value: int) -> tuple[int, bool]:
    """How far up the tree ``value`` more of ``fr`` must come from (0: no borrowing).

    Also says whether the lowest subtree that fits is smaller than the whole tree, in
    which case the node may reclaim quota lent inside that subtree.
    """
    if node.parent is None or not is_borrowing_with(node, fr, value):
        return 0, node.parent is not None
    remaining = value - local_available(node, fr)
    level = 0
    tracking: QuotaNode | None = node.parent
    last = node.parent
    while tracking is not None:
        level += 1
        last = tracking
        if not is_borrowing_with(tracking, fr, remaining):
            return level, tracking.parent is not None
        remaining -= local_available(tracking, fr)
        tracking = tracking.parent
    return level, last.parent is not None


def accumulate_from_child(parent: QuotaNode, child: QuotaNode) -> None:
    """Add what ``child`` lends and stores upward into ``parent`` (tree rebuilds only)."""
    for fr, quota in child.subtree_quota.items():
        parent.subtree_quota[fr] = parent.subtree_quota.get(fr, 0) + quota - local_quota(child, fr)
    for fr, used in child.usage.items():
        parent.usage[fr] = parent.usage.get(fr, 0) + max(0, used - local_quota(child, fr))
