"""Placement by topology across workers (pure): does a worker have domains that hold every pod
set of a TAS workload at the level it asks for, and how tightly?

Each worker's shim reports, per TAS flavor, each leaf of its topology with what is free there
(``manager/core/tas_summary.py``); the manager rebuilds the domain tree and runs the worker's
own placement on it (``TopologySnapshot.find_assignment``), pod set after pod set, each seeing
the domains the earlier ones took. So a worker is a candidate only where the worker's shim
would find domains too, as far as the summary tells: it leaves out taints and node labels
other than the levels, and what the manager sent there that the worker has not admitted yet.

- **required** level: a worker without one domain of that level holding the pod set (whole
  slices) is refused, with the largest such domain it has ("no rack holds 8 pods of pod set
  main (1 nvidia.com/gpu each), the largest 6");
- **preferred** level: every worker that holds the pod set somewhere is a candidate; the
  number of levels above the preferred one it must go up to (0: one domain of the preferred
  level holds it; the number of levels plus one: no single domain does) is added to the
  score, so the tightest worker wins and quota's best fit decides among equals;
- unconstrained, slices: as the worker places them; no score.

A worker that reports no topology for the flavor (its shim runs without
``--topology-aware-scheduling``, or is not there yet) is not a candidate for a TAS workload.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

from manager.api import quantity
from manager.api.view import at, items
from manager.core.model import PODS, PodSet, PodSetName, ResourceName, TopologyRequest
from manager.core.tas import TopologySnapshot
from manager.core.tas_model import DomainKey, PodSetRequest, Requests, TopologyAssignment, usage_of
from manager.federation.decisions.capacity import Candidate

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class PodSetNeed:
    """One pod set placed by topology: its pods, what each requests, what it asks of the
    topology and the manager flavor its quota is in."""

    name: str
    count: int
    per_pod: Mapping[str, int]
    request: TopologyRequest
    flavor: str


@dataclass(frozen=True, slots=True)
class Need:
    pod_sets: tuple[PodSetNeed, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.pod_sets)


def topology_request(raw: Mapping[str, Any] | None) -> TopologyRequest | None:
    """A pod set's ``topologyRequest`` as the Workload spells it (None: asks for nothing)."""
    if not raw:
        return None
    slice_level = raw.get("podSetSliceRequiredTopology")
    slice_size = raw.get("podSetSliceSize")
    layers = raw.get("podsetSliceRequiredTopologyConstraints") or []
    if slice_level is None and layers:
        slice_level, slice_size = layers[0].get("topology"), layers[0].get("size")
    request = TopologyRequest(
        required=raw.get("required"),
        preferred=raw.get("preferred"),
        unconstrained=bool(raw.get("unconstrained")),
        slice_required=slice_level,
        slice_size=int(slice_size) if slice_size is not None else None,
    )
    return request if request.asks else None


def need_of(workload: Obj) -> Need:
    """What a manager Workload with quota asks of a worker's topology: its pod sets with a
    topology request, each pod's requests from the admission's usage."""
    requests = {
        str(ps.get("name", "")): topology_request(ps.get("topologyRequest"))
        for ps in items(workload, "spec", "podSets")
    }
    admission = at(workload, "status", "admission")
    needs = []
    for psa in admission.get("podSetAssignments") or []:
        name = str(psa.get("name", ""))
        request = requests.get(name)
        count = int(psa.get("count") or 0)
        flavors = psa.get("flavors") or {}
        if request is None or count <= 0 or not flavors:
            continue
        per_pod = {
            str(r): quantity.to_core_units(str(r), v) // count
            for r, v in (psa.get("resourceUsage") or {}).items()
        }
        flavor = str(flavors[sorted(flavors)[0]])
        needs.append(PodSetNeed(name, count, per_pod, request, flavor))
    return Need(tuple(needs))


def need_of_pod_sets(pod_sets: Iterable[PodSet], flavors: Mapping[str, str]) -> Need:
    """The same for a workload not admitted yet (``kfed whatif``): its pod sets as the core
    reads them, and the flavor the manager would give each resource."""
    needs = []
    for ps in pod_sets:
        request = ps.topology_request
        chosen = [flavors[r] for r in sorted(ps.requests) if r in flavors]
        if request is None or not request.asks or not chosen:
            continue
        per_pod = {str(r): v for r, v in ps.requests.items()}
        needs.append(PodSetNeed(str(ps.name), ps.count, per_pod, request, chosen[0]))
    return Need(tuple(needs))


@dataclass(frozen=True, slots=True)
class Fit:
    fits: bool
    reason: str
    levels_up: int = 0
    """Levels above the preferred one the tightest pod set had to go to (0: none)."""
    assignments: Mapping[str, TopologyAssignment] | None = None
    held: Held | None = None
    """With what was in flight: what the worker holds once these assignments are taken."""


def short(level: str) -> str:
    """A level's name in a sentence: ``cloud.provider.com/topology-rack`` -> ``rack``."""
    name = level.rsplit("/", 1)[-1]
    name = name.removeprefix("topology-")
    return "host" if name == "hostname" else name


def _each(per_pod: Mapping[str, int]) -> str:
    shown = [
        f"{quantity.from_core_units(r, v).canonical()} {r}"
        for r, v in sorted(per_pod.items())
        if v and r not in ("cpu", "memory", PODS)
    ]
    if not shown:
        shown = [
            f"{quantity.from_core_units(r, v).canonical()} {r}"
            for r, v in sorted(per_pod.items())
            if v and r != PODS
        ]
    return ", ".join(shown) or "no resources"


Held = Mapping[str, Mapping[DomainKey, Mapping[str, int]]]
"""Worker flavor -> leaf domain -> resources: what copies sent to a worker and not admitted
there yet are expected to take (its report does not show them yet)."""


def check(
    trees: Mapping[str, TopologySnapshot] | None,
    need: Need,
    flavors: Mapping[str, str],
    in_flight: Held | None = None,
) -> Fit:
    """Can this worker's topology (``trees``: worker flavor -> its domain tree) hold every
    pod set of ``need``, beside what is ``in_flight`` to it? ``flavors`` maps the manager's
    flavors to the worker's."""
    assumed: dict[str, dict[DomainKey, dict[str, int]]] = {}
    add_held(assumed, in_flight or {})
    placed: dict[str, TopologyAssignment] = {}
    levels_up = 0
    for ps in need.pod_sets:
        worker_flavor = flavors.get(ps.flavor, ps.flavor)
        tree = (trees or {}).get(worker_flavor)
        if tree is None:
            return Fit(False, f"no topology reported for flavor {worker_flavor}")
        per_pod: Requests = {ResourceName(r): v for r, v in ps.per_pod.items() if r != PODS}
        request = PodSetRequest(PodSetName(ps.name), ps.count, per_pod, ps.request)
        taken = assumed.setdefault(worker_flavor, {})
        found = tree.find_assignment(request, assumed=cast(Mapping[DomainKey, Requests], taken))
        if isinstance(found, str):
            return Fit(False, _no_fit(tree, request, ps, found, taken))
        placed[ps.name] = found
        for key, usage in usage_of(found, per_pod).items():
            leaf = taken.setdefault(key, {})
            for resource, value in usage.items():
                leaf[resource] = leaf.get(resource, 0) + value
        levels_up = max(levels_up, _levels_up(tree, request, ps.request))
    where = ", ".join(f"{name}: {_domains(a)}" for name, a in placed.items())
    return Fit(True, f"topology: {where}", levels_up, placed, assumed)


def _no_fit(
    tree: TopologySnapshot,
    request: PodSetRequest,
    ps: PodSetNeed,
    upstream: str,
    taken: Mapping[DomainKey, Mapping[str, int]],
) -> str:
    """A required level: which domain is missing and the largest there is; otherwise (only
    preferred, or slices alone) upstream's count of what fits."""
    level = ps.request.required
    if level is None or level not in tree.levels:
        return upstream
    assumed = cast(Mapping[DomainKey, Requests], taken)
    largest = tree.most_in_one_domain(request, level, assumed=assumed)
    unit = ""
    if ps.request.slice_required:
        each = short(ps.request.slice_required)
        unit = f" in slices of {ps.request.slice_size} (each on one {each})"
    return (
        f"no {short(level)} holds {ps.count} pods{unit} of pod set {ps.name} "
        f"({_each(ps.per_pod)} each), the largest {largest}"
    )


def _levels_up(tree: TopologySnapshot, request: PodSetRequest, asked: TopologyRequest) -> int:
    """For a preferred level: how many levels up one domain holds every pod (levels + 1:
    none does, the pods are spread)."""
    if not asked.preferred or asked.preferred not in tree.levels:
        return 0
    index = tree.levels.index(asked.preferred)
    for up, level in enumerate(reversed(tree.levels[: index + 1])):
        if tree.most_in_one_domain(request, level) >= request.count:
            return up
    return len(tree.levels) + 1


def _domains(assignment: TopologyAssignment) -> str:
    shown = [f"{'/'.join(d.values)} x{d.count}" for d in assignment.domains[:4]]
    more = len(assignment.domains) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def evaluate(
    candidate: Candidate,
    trees: Mapping[str, TopologySnapshot] | None,
    need: Need,
    in_flight: Held | None = None,
) -> Candidate:
    """The topology check, only where quota fits (its reason comes first) and only for a
    workload that asks for a topology: refused with the topology's reason, or its score
    raised by the levels a preferred pod set had to go up."""
    if not candidate.fits or not need:
        return candidate
    fit = check(trees, need, candidate.flavors, in_flight)
    if not fit.fits:
        return replace(candidate, fits=False, reason=fit.reason)
    tightest, waiting, order = candidate.score
    return replace(
        candidate,
        reason=f"{candidate.reason}; {fit.reason}",
        score=(tightest + fit.levels_up, waiting, order),
    )


def expected(
    trees: Mapping[str, TopologySnapshot] | None, need: Need, flavors: Mapping[str, str]
) -> Held:
    """What a copy sent to this worker is expected to take there (the manager's own
    assignment, the worker's will be the same or another as tight): {} when it asks for no
    topology or does not fit."""
    if not need:
        return {}
    fit = check(trees, need, flavors)
    return fit.held or {} if fit.fits else {}


def add_held(into: dict[str, dict[DomainKey, dict[str, int]]], held: Held) -> None:
    for flavor, leaves in held.items():
        per_leaf = into.setdefault(flavor, {})
        for key, usage in leaves.items():
            leaf = per_leaf.setdefault(key, {})
            for resource, value in usage.items():
                leaf[resource] = leaf.get(resource, 0) + value
