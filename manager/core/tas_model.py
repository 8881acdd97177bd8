"""The words of Topology Aware Scheduling (core/tas.py): a Topology and its levels, the
Nodes it groups, a pod set to place and the assignment that places it, and what an
assignment holds in each leaf."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from manager.core.model import PODS, PodSetName, ResourceName, TopologyRequest
from manager.core.selectors import NodeSelectorTerm, Taint, Toleration

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


def add_requests(into: dict[ResourceName, int], values: Requests, sign: int) -> None:
    for resource, value in values.items():
        into[resource] = into.get(resource, 0) + sign * value


def usage_of(assignment: TopologyAssignment, per_pod: Requests) -> dict[DomainKey, Requests]:
    """What an assignment holds in each leaf it names (pods included)."""
    return {
        d.values: {**{r: v * d.count for r, v in per_pod.items()}, PODS: d.count}
        for d in assignment.domains
    }
