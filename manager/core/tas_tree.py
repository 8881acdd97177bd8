"""The domain tree of one TAS flavor: its nodes grouped by the topology's levels, widest
first, each leaf with what it has left (allocatable, minus other pods' requests, minus what
admitted TAS workloads hold there). Placing pod sets in it is core/tas.py's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from manager.core.model import ResourceName
from manager.core.selectors import Toleration
from manager.core.tas_model import (
    DomainKey,
    Node,
    Requests,
    Topology,
    TopologyAssignment,
    add_requests,
    usage_of,
)


class Domain:
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
        self.parent: Domain | None = None
        self.children: list[Domain] = []
        self.state = 0
        self.slice_state = 0
        self.free: dict[ResourceName, int] = {}
        """Leaves: allocatable minus the requests of pods kfed does not place by topology."""
        self.tas_usage: dict[ResourceName, int] = {}
        """Leaves: what admitted TAS workloads hold here (pods included)."""
        self.node: Node | None = None
        """Leaves, when the lowest level is the hostname: the node, for its labels and taints."""


class TopologyTree:
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
        self.leaves: dict[DomainKey, Domain] = {}
        self.per_level: list[dict[DomainKey, Domain]] = [{} for _ in self.levels]
        self._leaf_of_node: dict[str, Domain] = {}
        for node in sorted(nodes, key=lambda n: n.name):
            self._add_node(node)
        for leaf in self.leaves.values():
            self._link(leaf)
        for name, usage in (pod_usage or {}).items():
            on_node = self._leaf_of_node.get(name)
            if on_node is not None:
                add_requests(on_node.free, usage, -1)
        for key, usage in (tas_usage or {}).items():
            held = self.leaves.get(key)
            if held is not None:  # a node gone or not Ready any more: nothing to hold
                add_requests(held.tas_usage, usage, 1)

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
            leaf = self.leaves[key] = Domain(values, key)
            self.per_level[-1][values] = leaf
            if self.topology.lowest_is_hostname:
                leaf.node = node
        add_requests(leaf.free, node.allocatable, 1)
        self._leaf_of_node[node.name] = leaf

    def _link(self, domain: Domain) -> None:
        depth = len(domain.values)
        if depth == 1:
            return
        parent_values = domain.values[:-1]
        parent = self.per_level[depth - 2].get(parent_values)
        if parent is None:
            parent = Domain(parent_values, parent_values)
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
            add_requests(remaining, leaf.tas_usage, -1)
            taken = assumed.setdefault(key, {})
            add_requests(remaining, taken, -1)
            if any(remaining.get(r, 0) < v for r, v in usage.items()):
                return False
            add_requests(taken, usage, 1)
        return True

    def free_leaves(self) -> list[tuple[DomainKey, dict[ResourceName, int]]]:
        """Each leaf's values at every level and what is free there (what admitted TAS
        workloads hold taken out), in the order of its values."""
        result = []
        for leaf in sorted(self.leaves.values(), key=lambda d: d.values):
            free = dict(leaf.free)
            add_requests(free, leaf.tas_usage, -1)
            result.append((leaf.values, free))
        return result
