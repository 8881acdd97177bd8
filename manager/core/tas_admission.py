"""TAS in admission: which flavors a pod set may get, and its placement once it has them
(upstream's ``tas_flavorassigner.go``).

A pod set is placed by topology when it asks to (its ``topologyRequest``), or when every
flavor of its ClusterQueue has a topology (TAS is then implied, placed as unconstrained).
Such a pod set only takes flavors with a topology that has the levels it names; a flavor
with a topology only takes such pod sets. Once quota is found, each of them gets a
topology assignment or the workload is not admitted (gang: all pod sets or none).

A ClusterQueue with a MultiKueue admission check places nothing by topology: the worker
that runs the workload does (upstream's delayed topology request); kfed's manager does not
need the Topology object either (docs/tas.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from manager.api.constants import MULTIKUEUE_CONTROLLER_NAME
from manager.core import reasons
from manager.core.model import (
    ClusterQueue,
    FlavorName,
    PodSet,
    ResourceFlavor,
    ResourceName,
)
from manager.core.reasons import PendingReason
from manager.core.tas_cache import TopologyCache
from manager.core.tas_model import DomainKey, PodSetRequest, Topology, TopologyAssignment, usage_of


def requested(ps: PodSet) -> bool:
    return ps.topology_request is not None and ps.topology_request.asks


def tas_only(cq: ClusterQueue, flavors: Mapping[FlavorName, ResourceFlavor]) -> bool:
    """Every flavor of the ClusterQueue has a topology (TAS is implied for its pod sets)."""
    names = [f.name for rg in cq.resource_groups for f in rg.flavors]
    return bool(names) and all(
        (flavor := flavors.get(name)) is not None and flavor.topology_name is not None
        for name in names
    )


def delayed(cq: ClusterQueue) -> bool:
    """Placed by topology on the worker that runs it, not here (MultiKueue)."""
    return MULTIKUEUE_CONTROLLER_NAME in cq.check_controllers


def flavor_mismatch(
    flavor: ResourceFlavor,
    ps: PodSet,
    cq: ClusterQueue,
    *,
    implied: bool,
    topologies: Mapping[str, Topology],
) -> str | None:
    """Why ``flavor`` can't serve ``ps`` as far as TAS goes (upstream's words), or None."""
    name = flavor.name
    if requested(ps):
        if flavor.topology_name is None:
            return f'Flavor "{name}" does not support TopologyAwareScheduling'
        topology = topologies.get(flavor.topology_name)
        if topology is None:
            if delayed(cq):
                return None
            return f'Flavor "{name}" information missing in TAS cache'
        request = ps.topology_request
        assert request is not None
        named = [request.required, request.preferred, request.slice_required]
        if any(level and level not in topology.levels for level in named):
            return f'Flavor "{name}" does not contain the requested level'
        return None
    if implied or flavor.topology_name is None:
        return None
    return f'Flavor "{name}" supports only TopologyAwareScheduling'


class Placed:
    """The outcome for one workload: each pod set's assignment, or why one failed."""

    __slots__ = ("assignments", "delayed", "reason")

    def __init__(self) -> None:
        self.assignments: dict[str, TopologyAssignment] = {}
        self.delayed: set[str] = set()
        self.reason: PendingReason | None = None


def still_fits(
    pod_sets: list[tuple[PodSet, Mapping[ResourceName, FlavorName]]],
    assignments: Mapping[str, TopologyAssignment],
    flavors: Mapping[FlavorName, ResourceFlavor],
    cache: TopologyCache,
) -> bool:
    """Do the domains a nomination found still hold its pods, now that workloads admitted
    earlier in the same cycle hold theirs?"""
    assumed: dict[FlavorName, dict[DomainKey, dict[ResourceName, int]]] = {}
    for ps, chosen in pod_sets:
        assignment = assignments.get(ps.name)
        if assignment is None:
            continue
        name = next(
            (f for f in sorted(set(chosen.values())) if f in flavors and flavors[f].topology_name),
            None,
        )
        if name is None:
            return False
        snapshot = cache.snapshot(flavors[name])
        if snapshot is None:
            return False
        per_pod = {r: v for r, v in ps.requests.items() if r != "pods"}
        if not snapshot.fits(assignment, per_pod, assumed.setdefault(name, {})):
            return False
    return True


def place(
    pod_sets: list[tuple[PodSet, Mapping[ResourceName, FlavorName]]],
    cq: ClusterQueue,
    flavors: Mapping[FlavorName, ResourceFlavor],
    cache: TopologyCache,
    *,
    simulate_empty: bool = False,
) -> Placed:
    """Topology assignments for the pod sets placed by topology, given their flavors.

    Pod sets in the same flavor see the earlier ones' domains as taken (upstream's
    assumed usage). ``simulate_empty`` ignores admitted TAS workloads: with preemption
    ahead, the question is only whether the pods could ever be placed."""
    placed = Placed()
    implied = tas_only(cq, flavors)
    assumed: dict[FlavorName, dict[DomainKey, dict[ResourceName, int]]] = {}
    for ps, chosen in pod_sets:
        if not (requested(ps) or implied) or ps.count == 0:
            continue
        tas_flavors = sorted(
            {f for f in chosen.values() if (rf := flavors.get(f)) and rf.topology_name}
        )
        if len(tas_flavors) != 1:
            why = (
                "no TAS flavor assigned"
                if not tas_flavors
                else f"multiple TAS flavors assigned: {', '.join(tas_flavors)}"
            )
            placed.reason = reasons.topology_placement_failed(ps.name, why)
            return placed
        if delayed(cq):
            placed.delayed.add(ps.name)
            continue
        flavor = flavors[tas_flavors[0]]
        snapshot = cache.snapshot(flavor)
        if snapshot is None:
            why = f'Flavor "{flavor.name}" information missing in TAS cache'
            placed.reason = reasons.topology_placement_failed(ps.name, why)
            return placed
        per_pod = {r: v for r, v in ps.requests.items() if r != "pods"}
        taken = assumed.setdefault(flavor.name, {})
        result = snapshot.find_assignment(
            PodSetRequest(
                ps.name,
                ps.count,
                per_pod,
                ps.topology_request,
                implied=not requested(ps),
                tolerations=ps.tolerations,
                node_selector=ps.node_selector,
                node_affinity=ps.node_affinity,
            ),
            assumed=taken,
            simulate_empty=simulate_empty,
        )
        if isinstance(result, str):
            placed.reason = reasons.topology_placement_failed(ps.name, result)
            return placed
        placed.assignments[ps.name] = result
        for key, usage in usage_of(result, per_pod).items():
            leaf = taken.setdefault(key, {})
            for resource, value in usage.items():
                leaf[resource] = leaf.get(resource, 0) + value
    return placed
