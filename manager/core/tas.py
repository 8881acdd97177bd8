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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from manager.core.model import PODS, PodSetName, ResourceName, TopologyRequest
from manager.core.selectors import NodeSelectorTerm, Taint, Toleration, first_untolerated_taint

HOSTNAME = "kubernetes.io/hostname"

DomainKey = tuple[str, ...]
"""A leaf domain as an assignment names it: its hostname when the lowest level is the
hostname (upstream writes only that level then), else its values at every level."""

Requests = Mapping[ResourceName, int]


@dataclass(frozen=True, slots=True)
class Topology:
    """A Topology object: ``levels`` are node label keys, widest first."""

    name: str
    levels: tuple[str, ...]

    @property
    def lowest_is_hostname(self) -> bool:
        return bool(self.levels) and self.levels[-1] == HOSTNAME


@dataclass(frozen=True, slots=True)
class Node:
    """What TAS needs of a Node: its labels, taints, allocatable and whether pods can land."""

    name: str
    labels: Mapping[str, str]
    allocatable: Requests
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False

    @property
    def schedulable(self) -> bool:
        return self.ready and not self.unschedulable


@dataclass(frozen=True, slots=True)
class DomainAssignment:
    values: DomainKey
    count: int


@dataclass(frozen=True, slots=True)
class TopologyAssignment:
    """Upstream's internal form of ``topologyAssignment``: the levels named, then each
    domain's values at those levels and its pod count, sorted by values."""

    levels: tuple[str, ...]
    domains: tuple[DomainAssignment, ...]

    @property
    def pods(self) -> int:
        return sum(d.count for d in self.domains)


@dataclass(frozen=True, slots=True)
class PodSetRequest:
    """One pod set to place: ``requests`` are per pod (no ``pods`` entry: one is added)."""

    name: PodSetName
    count: int
    requests: Requests
    topology_request: TopologyRequest | None
    implied: bool = False
    """TAS is not asked for but every flavor of the ClusterQueue has a topology (upstream's
    "implied" TAS: placed as if unconstrained)."""
    tolerations: tuple[Toleration, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    node_affinity: tuple[NodeSelectorTerm, ...] = ()


class _Domain:
    """A domain of the tree; ``state``/``slice_state`` are scratch for one placement."""

    __slots__ = (
        "children",
        "free",
        "key",
        "node",
        "parent",
        "slice_state",
        "state",
        "tas_usage",
        "values",
    )

    def __init__(self, values: DomainKey, key: DomainKey) -> None:
        self.values = values
        self.key = key
        self.parent: _Domain | None = None
        self.children: list[_Domain] = []
        self.state = 0
        self.slice_state = 0
        self.free: dict[ResourceName, int] = {}
        """Leaves: allocatable minus the requests of pods kfed does not place by topology."""
        self.tas_usage: dict[ResourceName, int] = {}
        """Leaves: what admitted TAS workloads hold here (pods included)."""
        self.node: Node | None = None
        """Leaves, when the lowest level is the hostname: the node, for its labels and taints."""


@dataclass(slots=True)
class _Exclusions:
    """Why leaves took no pod: upstream appends these counts to its no-fit message."""

    total: int = 0
    node_selector: int = 0
    affinity: int = 0
    taints: dict[str, int] = field(default_factory=dict)
    resources: dict[str, int] = field(default_factory=dict)

    def text(self) -> str:
        parts: list[str] = []
        if self.node_selector:
            parts.append(f"nodeSelector: {self.node_selector}")
        if self.affinity:
            parts.append(f"affinity: {self.affinity}")
        parts += [f'taint "{t}": {n}' for t, n in self.taints.items()]
        parts += [f'resource "{r}": {n}' for r, n in self.resources.items()]
        if not parts:
            return ""
        return f". Total nodes: {self.total}; excluded: {', '.join(sorted(parts))}"


class TopologySnapshot:
    """The domain tree of one TAS flavor, with what each leaf has free."""

    def __init__(
        self,
        topology: Topology,
        nodes: Iterable[Node],
        *,
        flavor_tolerations: tuple[Toleration, ...] = (),
        pod_usage: Mapping[str, Requests] | None = None,
        tas_usage: Mapping[DomainKey, Requests] | None = None,
    ) -> None:
        """``nodes`` are the flavor's nodes (its nodeLabels already matched); those not
        Ready, unschedulable or missing a level label hold no domain. ``pod_usage`` is by
        node name: requests of scheduled pods that no TAS workload accounts for.
        ``tas_usage`` is by leaf key: what admitted TAS workloads hold."""
        self.topology = topology
        self.levels = topology.levels
        self.flavor_tolerations = flavor_tolerations
        self.leaves: dict[DomainKey, _Domain] = {}
        self.per_level: list[dict[DomainKey, _Domain]] = [{} for _ in self.levels]
        self._leaf_of_node: dict[str, _Domain] = {}
        for node in sorted(nodes, key=lambda n: n.name):
            self._add_node(node)
        for leaf in self.leaves.values():
            self._link(leaf)
        for name, usage in (pod_usage or {}).items():
            on_node = self._leaf_of_node.get(name)
            if on_node is not None:
                _add(on_node.free, usage, -1)
        for key, usage in (tas_usage or {}).items():
            held = self.leaves.get(key)
            if held is not None:  # a node gone or not Ready any more: nothing to hold
                _add(held.tas_usage, usage, 1)

    def forget_nodes(self) -> None:
        """Keep only the domains and what is free in them: a tree read from a report has no
        node of its own to look at (no taints or labels beyond the levels), and dropping the
        stand-ins halves what a manager keeps per worker node."""
        self._leaf_of_node = {}
        for leaf in self.leaves.values():
            leaf.node = None

    @property
    def key_offset(self) -> int:
        """Where a leaf's key starts in its values (assignments name only the hostname)."""
        return len(self.levels) - 1 if self.topology.lowest_is_hostname else 0

    def _add_node(self, node: Node) -> None:
        if not node.schedulable or any(level not in node.labels for level in self.levels):
            return
        values = tuple(node.labels[level] for level in self.levels)
        key = values[self.key_offset :]
        leaf = self.leaves.get(key)
        if leaf is None:
            leaf = self.leaves[key] = _Domain(values, key)
            self.per_level[-1][values] = leaf
            if self.topology.lowest_is_hostname:
                leaf.node = node
        _add(leaf.free, node.allocatable, 1)
        self._leaf_of_node[node.name] = leaf

    def _link(self, domain: _Domain) -> None:
        depth = len(domain.values)
        if depth == 1:
            return
        parent_values = domain.values[:-1]
        parent = self.per_level[depth - 2].get(parent_values)
        if parent is None:
            parent = _Domain(parent_values, parent_values)
            self.per_level[depth - 2][parent_values] = parent
            self._link(parent)
        domain.parent = parent
        parent.children.append(domain)

    def fits(
        self,
        assignment: TopologyAssignment,
        per_pod: Requests,
        assumed: dict[DomainKey, dict[ResourceName, int]],
    ) -> bool:
        """Does every leaf of ``assignment`` still have room for its pods, beside
        ``assumed`` (which grows by what this assignment takes)? Upstream's ``Fits``: an
        assignment made earlier in a cycle is checked again before it is admitted."""
        for key, usage in usage_of(assignment, per_pod).items():
            leaf = self.leaves.get(key)
            if leaf is None:
                return False
            remaining = dict(leaf.free)
            _add(remaining, leaf.tas_usage, -1)
            taken = assumed.setdefault(key, {})
            _add(remaining, taken, -1)
            if any(remaining.get(r, 0) < v for r, v in usage.items()):
                return False
            _add(taken, usage, 1)
        return True

    # -- placement ---------------------------------------------------------------------

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
        plan = _Plan.of(self, request)
        if isinstance(plan, str):
            return plan
        exclusions = self._fill_counts(request, plan, assumed or {}, simulate_empty)
        found = self._fit_level(plan.level, plan, exclusions)
        if isinstance(found, str):
            return found
        level, fit = found
        fit = _to_minimum(fit, plan.count, plan.slice_size, best_fit=plan.best_fit, slices=True)
        while level < min(len(self.levels) - 1, plan.slice_level):
            lower = self._sorted([c for d in fit for c in d.children], plan.best_fit)
            fit = _to_minimum(
                lower, plan.count, plan.slice_size, best_fit=plan.best_fit, slices=True
            )
            level += 1
        while level < len(self.levels) - 1:
            fit = [
                chosen
                for domain in fit
                for chosen in _to_minimum(
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
        plan = _Plan.of(self, request)
        if isinstance(plan, str) or level not in self.levels:
            return 0
        self._fill_counts(request, plan, assumed or {}, False)
        index = self.levels.index(level)
        if index > plan.slice_level:
            return max((d.state for d in self.per_level[index].values()), default=0)
        return max((d.slice_state for d in self.per_level[index].values()), default=0) * (
            plan.slice_size
        )

    def free_leaves(self) -> list[tuple[DomainKey, dict[ResourceName, int]]]:
        """Each leaf's values at every level and what is free there (what admitted TAS
        workloads hold taken out), in the order of its values."""
        result = []
        for leaf in sorted(self.leaves.values(), key=lambda d: d.values):
            free = dict(leaf.free)
            _add(free, leaf.tas_usage, -1)
            result.append((leaf.values, free))
        return result

    def _fill_counts(
        self,
        request: PodSetRequest,
        plan: _Plan,
        assumed: Mapping[DomainKey, Requests],
        simulate_empty: bool,
    ) -> _Exclusions:
        """Phase 1: pods (and slices) each domain can take, from the leaves up."""
        for level in self.per_level:
            for domain in level.values():
                domain.state = domain.slice_state = 0
        exclusions = _Exclusions()
        per_pod = {**request.requests, PODS: 1}
        tolerations = request.tolerations + self.flavor_tolerations
        for leaf in self.leaves.values():
            exclusions.total += 1
            node = leaf.node
            if node is not None and self._excluded(node, request, tolerations, exclusions):
                continue
            remaining = dict(leaf.free)
            if not simulate_empty:
                _add(remaining, leaf.tas_usage, -1)
            _add(remaining, assumed.get(leaf.key, {}), -1)
            leaf.state, limiting = _count_in(per_pod, remaining)
            if leaf.state == 0 and limiting is not None:
                exclusions.resources[limiting] = exclusions.resources.get(limiting, 0) + 1
        for root in self.per_level[0].values():
            _roll_up(root, 0, plan)
        return exclusions

    @staticmethod
    def _excluded(
        node: Node,
        request: PodSetRequest,
        tolerations: tuple[Toleration, ...],
        exclusions: _Exclusions,
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
        self, index: int, plan: _Plan, exclusions: _Exclusions
    ) -> tuple[int, list[_Domain]] | str:
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
            return index, [_best_fit(ordered, slices, slices=True)]
        if plan.required:
            return self._no_fit(top.slice_state, slices, plan, exclusions)
        if index > 0 and not plan.unconstrained:
            return self._fit_level(index - 1, plan, exclusions)
        chosen: list[_Domain] = []
        remaining = slices
        for i, domain in enumerate(ordered):
            if remaining <= 0:
                break
            if plan.best_fit and domain.slice_state >= remaining:
                domain = _best_fit(ordered[i:], remaining, slices=True)
            chosen.append(domain)
            remaining -= domain.slice_state
        if remaining > 0:
            return self._no_fit(slices - remaining, slices, plan, exclusions)
        return index, chosen

    def _no_fit(self, fit: int, total: int, plan: _Plan, exclusions: _Exclusions) -> str:
        unit = "pod" if plan.slice_size == 1 else "slice"
        name = self.topology.name
        if fit <= 0:
            head = f'topology "{name}" doesn\'t allow to fit any of {total} {unit}(s)'
        else:
            head = f'topology "{name}" allows to fit only {fit} out of {total} {unit}(s)'
        return head + exclusions.text()

    @staticmethod
    def _sorted(domains: list[_Domain], best_fit: bool) -> list[_Domain]:
        """BestFit: most free slices first; LeastFreeCapacity: fewest first. Then the
        tightest pod count, then by name, so that equal domains keep a stable order."""
        if best_fit:
            return sorted(domains, key=lambda d: (-d.slice_state, d.state, d.values))
        return sorted(domains, key=lambda d: (d.slice_state, d.state, d.values))


@dataclass(frozen=True, slots=True)
class _Plan:
    """What a request asks of this topology, resolved to level indexes."""

    count: int
    level: int
    slice_level: int
    slice_size: int
    required: bool
    unconstrained: bool

    @property
    def best_fit(self) -> bool:
        return not self.unconstrained

    @staticmethod
    def of(snapshot: TopologySnapshot, request: PodSetRequest) -> _Plan | str:
        levels = snapshot.levels
        tr = request.topology_request or TopologyRequest()
        slice_only = not tr.required and not tr.preferred and tr.slice_required is not None
        if tr.required:
            key: str | None = tr.required
        elif tr.preferred:
            key = tr.preferred
        elif slice_only:
            key = levels[0]
        elif tr.unconstrained or request.implied:
            key = levels[-1]
        else:
            key = None
        if key is None:
            return "topology level not specified"
        if key not in levels:
            return f"no requested topology level: {key}"
        slice_size = 1
        if tr.slice_required is not None:
            if tr.slice_size is None:
                return "slice topology requested, but slice size not provided"
            slice_size = tr.slice_size
        slice_key = tr.slice_required or levels[-1]
        if slice_key not in levels:
            return f"no requested topology level for slices: {slice_key}"
        level, slice_level = levels.index(key), levels.index(slice_key)
        if level > slice_level:
            return f"podset slice topology {slice_key} is above the podset topology {key}"
        if slice_size < 1 or request.count % slice_size:
            return (
                f"pod set {request.name} has {request.count} pods, not a multiple of its "
                f"slice size {slice_size}"
            )
        return _Plan(
            count=request.count,
            level=level,
            slice_level=slice_level,
            slice_size=slice_size,
            required=tr.required is not None,
            unconstrained=tr.unconstrained or request.implied or slice_only,
        )


def _roll_up(domain: _Domain, depth: int, plan: _Plan) -> None:
    """A parent can take what its children can; slices are counted at the slice level
    (a slice never spans two of its domains) and summed above it."""
    if domain.children:
        domain.state = domain.slice_state = 0
        for child in domain.children:
            _roll_up(child, depth + 1, plan)
            domain.state += child.state
            domain.slice_state += child.slice_state
    if depth == plan.slice_level:
        domain.slice_state = domain.state // plan.slice_size
    elif depth > plan.slice_level:
        domain.slice_state = 0


def _best_fit(domains: list[_Domain], needed: int, *, slices: bool) -> _Domain:
    """The first domain with the least room that still holds ``needed`` (else the first)."""
    best = domains[0]
    for domain in domains:
        have = domain.slice_state if slices else domain.state
        best_have = best.slice_state if slices else best.state
        if needed <= have < best_have:
            best = domain
    return best


def _to_minimum(
    domains: list[_Domain], count: int, slice_size: int, *, best_fit: bool, slices: bool
) -> list[_Domain]:
    """Take domains in order until ``count`` pods are placed, the last one by best fit;
    each taken domain's ``state`` becomes the pods it gets."""
    taken: list[_Domain] = []
    remaining = count // slice_size if slices else count
    for i, domain in enumerate(domains):
        have = domain.slice_state if slices else domain.state
        if best_fit and have >= remaining:
            domain = _best_fit(domains[i:], remaining, slices=slices)
            have = domain.slice_state if slices else domain.state
        if have >= remaining:
            domain.state = remaining * slice_size if slices else remaining
            if slices:
                domain.slice_state = remaining
            taken.append(domain)
            return taken
        if slices:
            domain.state = have * slice_size
        remaining -= have
        taken.append(domain)
    return taken


def _count_in(per_pod: Requests, remaining: Mapping[ResourceName, int]) -> tuple[int, str | None]:
    """How many pods of ``per_pod`` fit in ``remaining``, and the resource that limits it."""
    best: int | None = None
    limiting: str | None = None
    for resource in sorted(per_pod):
        value = per_pod[resource]
        if value <= 0:
            continue
        fits = max(0, remaining.get(resource, 0)) // value
        if best is None or fits < best:
            best, limiting = fits, resource
    return (0, None) if best is None else (best, limiting)


def _add(into: dict[ResourceName, int], values: Requests, sign: int) -> None:
    for resource, value in values.items():
        into[resource] = into.get(resource, 0) + sign * value


def usage_of(assignment: TopologyAssignment, per_pod: Requests) -> dict[DomainKey, Requests]:
    """What an assignment holds in each leaf it names (pods included)."""
    return {
        d.values: {**{r: v * d.count for r, v in per_pod.items()}, PODS: d.count}
        for d in assignment.domains
    }
