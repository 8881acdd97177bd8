"""Topology Aware Scheduling: where in a flavor's topology a pod set's pods go (Kueue's TAS).

A ``Topology`` names node labels from the widest level to the narrowest (block, rack,
hostname). The nodes of a flavor form a tree of domains by those labels; each leaf knows
what it has left (allocatable, minus other pods' requests, minus what admitted TAS
workloads hold there). ``find_assignment`` places one pod set in that tree the way
upstream's ``TASFlavorSnapshot.findTopologyAssignment`` does (read at kubernetes-sigs/kueue
ff69552e79), in two phases:

1. count, bottom up, how many pods (and slices) each domain can take;
2. pick the level and its domains, then walk down level by level keeping the number of
   domains used at each level as small as possible, and report the leaves' counts.

Domains are ordered by BestFit (most free slices first, then the tightest pod count, then
by name), and the last domain taken is the one that fits what is left most tightly.
Unconstrained requests use LeastFreeCapacity instead (upstream's TASProfileMixed, on by
default since 0.15). Leader/worker pod set groups, balanced placement, preferred node
affinity and multi-layer slices are not implemented (docs/tas.md).

The words (``Topology``, ``Node``, ``TopologyAssignment``) are in tas_model.py, the tree in
tas_tree.py, a request's plan and the counting in tas_plan.py.
"""

from __future__ import annotations

from collections.abc import Mapping

from manager.core.model import PODS
from manager.core.selectors import Toleration, first_untolerated_taint
from manager.core.tas_model import (
    DomainAssignment,
    DomainKey,
    Node,
    PodSetRequest,
    Requests,
    TopologyAssignment,
    add_requests,
)
from manager.core.tas_plan import Exclusions, Plan, best_fit_domain, count_in, roll_up, to_minimum
from manager.core.tas_tree import Domain, TopologyTree


class TopologySnapshot(TopologyTree):
    """The domain tree of one TAS flavor, and where a pod set's pods go in it."""

    def find_assignment(
        self,
        request: PodSetRequest,
        *,
        assumed: Mapping[DomainKey, Requests] | None = None,
        simulate_empty: bool = False,
    ) -> TopologyAssignment | str:
        """Where ``request``'s pods go, or why they can't be placed (upstream's reason).

        ``assumed`` is usage not in the snapshot yet (earlier pod sets of the same
        workload); ``simulate_empty`` ignores admitted TAS workloads (would preemption
        help at all?)."""
        plan = Plan.of(self, request)
        if isinstance(plan, str):
            return plan
        exclusions = self._fill_counts(request, plan, assumed or {}, simulate_empty)
        found = self._fit_level(plan.level, plan, exclusions)
        if isinstance(found, str):
            return found
        level, fit = found
        fit = to_minimum(fit, plan.count, plan.slice_size, best_fit=plan.best_fit, slices=True)
        while level < min(len(self.levels) - 1, plan.slice_level):
            lower = self._sorted([c for d in fit for c in d.children], plan.best_fit)
            fit = to_minimum(
                lower, plan.count, plan.slice_size, best_fit=plan.best_fit, slices=True
            )
            level += 1
        while level < len(self.levels) - 1:
            fit = [
                chosen
                for domain in fit
                for chosen in to_minimum(
                    self._sorted(domain.children, plan.best_fit),
                    domain.state,
                    1,
                    best_fit=plan.best_fit,
                    slices=False,
                )
            ]
            level += 1
        offset = self.key_offset
        domains = tuple(
            DomainAssignment(d.values[offset:], d.state)
            for d in sorted(fit, key=lambda d: d.values)
            if d.state > 0
        )
        return TopologyAssignment(self.levels[offset:], domains)

    def most_in_one_domain(
        self,
        request: PodSetRequest,
        level: str,
        *,
        assumed: Mapping[DomainKey, Requests] | None = None,
    ) -> int:
        """The most pods of ``request`` that one domain of ``level`` holds, whole slices
        only, beside ``assumed`` (0 when the request names levels this topology lacks). What
        the manager says when a worker has no domain for a gang: "the largest rack holds 6"."""
        plan = Plan.of(self, request)
        if isinstance(plan, str) or level not in self.levels:
            return 0
        self._fill_counts(request, plan, assumed or {}, False)
        index = self.levels.index(level)
        if index > plan.slice_level:
            return max((d.state for d in self.per_level[index].values()), default=0)
        return max((d.slice_state for d in self.per_level[index].values()), default=0) * (
            plan.slice_size
        )

    def _fill_counts(
        self,
        request: PodSetRequest,
        plan: Plan,
        assumed: Mapping[DomainKey, Requests],
        simulate_empty: bool,
    ) -> Exclusions:
        """Phase 1: pods (and slices) each domain can take, from the leaves up."""
        for level in self.per_level:
            for domain in level.values():
                domain.state = domain.slice_state = 0
        exclusions = Exclusions()
        per_pod = {**request.requests, PODS: 1}
        tolerations = request.tolerations + self.flavor_tolerations
        for leaf in self.leaves.values():
            exclusions.total += 1
            node = leaf.node
            if node is not None and self._excluded(node, request, tolerations, exclusions):
                continue
            remaining = dict(leaf.free)
            if not simulate_empty:
                add_requests(remaining, leaf.tas_usage, -1)
            add_requests(remaining, assumed.get(leaf.key, {}), -1)
            leaf.state, limiting = count_in(per_pod, remaining)
            if leaf.state == 0 and limiting is not None:
                exclusions.resources[limiting] = exclusions.resources.get(limiting, 0) + 1
        for root in self.per_level[0].values():
            roll_up(root, 0, plan)
        return exclusions

    @staticmethod
    def _excluded(
        node: Node,
        request: PodSetRequest,
        tolerations: tuple[Toleration, ...],
        exclusions: Exclusions,
    ) -> bool:
        taint = first_untolerated_taint(node.taints, tolerations)
        if taint is not None:
            exclusions.taints[str(taint)] = exclusions.taints.get(str(taint), 0) + 1
            return True
        if any(node.labels.get(k) != v for k, v in request.node_selector.items()):
            exclusions.node_selector += 1
            return True
        terms = request.node_affinity
        if terms and not any(
            all(req.matches(node.labels) for req in term.match_expressions) for term in terms
        ):
            exclusions.affinity += 1
            return True
        return False

    def _fit_level(
        self, index: int, plan: Plan, exclusions: Exclusions
    ) -> tuple[int, list[Domain]] | str:
        """Phase 2a: the level (from the one asked for, upwards when only preferred) and
        the fewest of its domains that hold every slice."""
        domains = list(self.per_level[index].values())
        if not domains:
            return f"no topology domains at level: {self.levels[index]}"
        ordered = self._sorted(domains, plan.best_fit)
        slices = plan.count // plan.slice_size
        top = ordered[0]
        if not plan.best_fit:
            for candidate in ordered:
                if candidate.slice_state >= slices:
                    return index, [candidate]
            if plan.required:
                return self._no_fit(ordered[-1].state, slices, plan, exclusions)
        elif top.slice_state >= slices:
            return index, [best_fit_domain(ordered, slices, slices=True)]
        if plan.required:
            return self._no_fit(top.slice_state, slices, plan, exclusions)
        if index > 0 and not plan.unconstrained:
            return self._fit_level(index - 1, plan, exclusions)
        chosen: list[Domain] = []
        remaining = slices
        for i, domain in enumerate(ordered):
            if remaining <= 0:
                break
            if plan.best_fit and domain.slice_state >= remaining:
                domain = best_fit_domain(ordered[i:], remaining, slices=True)
            chosen.append(domain)
            remaining -= domain.slice_state
        if remaining > 0:
            return self._no_fit(slices - remaining, slices, plan, exclusions)
        return index, chosen

    def _no_fit(self, fit: int, total: int, plan: Plan, exclusions: Exclusions) -> str:
        unit = "pod" if plan.slice_size == 1 else "slice"
        name = self.topology.name
        if fit <= 0:
            head = f'topology "{name}" doesn\'t allow to fit any of {total} {unit}(s)'
        else:
            head = f'topology "{name}" allows to fit only {fit} out of {total} {unit}(s)'
        return head + exclusions.text()

    @staticmethod
    def _sorted(domains: list[Domain], best_fit: bool) -> list[Domain]:
        """BestFit: most free slices first; LeastFreeCapacity: fewest first. Then the
        tightest pod count, then by name, so that equal domains keep a stable order."""
        if best_fit:
            return sorted(domains, key=lambda d: (-d.slice_state, d.state, d.values))
        return sorted(domains, key=lambda d: (d.slice_state, d.state, d.values))
