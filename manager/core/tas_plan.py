"""What a pod set asks of a topology (its ``Plan``: levels resolved to indexes) and the
counting of one placement: pods and slices rolled up the domain tree, the fewest domains
that hold them, and why leaves took none (core/tas.py places with these)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from manager.core.model import ResourceName, TopologyRequest
from manager.core.tas_model import PodSetRequest, Requests
from manager.core.tas_tree import Domain, TopologyTree


@dataclass(slots=True)
class Exclusions:
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


@dataclass(frozen=True, slots=True)
class Plan:
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
    def of(snapshot: TopologyTree, request: PodSetRequest) -> Plan | str:
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
        return Plan(
            count=request.count,
            level=level,
            slice_level=slice_level,
            slice_size=slice_size,
            required=tr.required is not None,
            unconstrained=tr.unconstrained or request.implied or slice_only,
        )


def roll_up(domain: Domain, depth: int, plan: Plan) -> None:
    """A parent can take what its children can; slices are counted at the slice level
    (a slice never spans two of its domains) and summed above it."""
    if domain.children:
        domain.state = domain.slice_state = 0
        for child in domain.children:
            roll_up(child, depth + 1, plan)
            domain.state += child.state
            domain.slice_state += child.slice_state
    if depth == plan.slice_level:
        domain.slice_state = domain.state // plan.slice_size
    elif depth > plan.slice_level:
        domain.slice_state = 0


def best_fit_domain(domains: list[Domain], needed: int, *, slices: bool) -> Domain:
    """The first domain with the least room that still holds ``needed`` (else the first)."""
    best = domains[0]
    for domain in domains:
        have = domain.slice_state if slices else domain.state
        best_have = best.slice_state if slices else best.state
        if needed <= have < best_have:
            best = domain
    return best


def to_minimum(
    domains: list[Domain], count: int, slice_size: int, *, best_fit: bool, slices: bool
) -> list[Domain]:
    """Take domains in order until ``count`` pods are placed, the last one by best fit;
    each taken domain's ``state`` becomes the pods it gets."""
    taken: list[Domain] = []
    remaining = count // slice_size if slices else count
    for i, domain in enumerate(domains):
        have = domain.slice_state if slices else domain.state
        if best_fit and have >= remaining:
            domain = best_fit_domain(domains[i:], remaining, slices=slices)
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


def count_in(per_pod: Requests, remaining: Mapping[ResourceName, int]) -> tuple[int, str | None]:
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
