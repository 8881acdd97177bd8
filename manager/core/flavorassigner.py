"""Choose a flavor for every resource of every pod set of a workload (Kueue semantics).

For each pod set, resources are grouped by the ClusterQueue's resource groups; each
group gets one flavor, tried in the order the ClusterQueue lists them. A flavor is a
candidate only if the pod set tolerates its taints and its nodeSelector / required
node affinity is compatible with the flavor's nodeLabels (checking only the label keys
the flavor defines). Each candidate gets a *mode* per resource: it fits (maybe by
borrowing), it needs preemption, or it can't fit; flavorFungibility decides whether
to stop at the first workable flavor or keep looking for a better one.

All pod sets are assigned together: if any pod set gets no flavor, the workload gets
nothing (gang semantics). Partial admission (minCount) is not supported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Protocol

from manager.core import quota, reasons, tas_admission
from manager.core.cachestate import ClusterQueueState
from manager.core.decisions import Admission, PodSetAssignment
from manager.core.model import (
    PODS,
    FlavorFungibility,
    FlavorName,
    FlavorResource,
    FungibilityPolicy,
    FungibilityPreference,
    PodSet,
    ResourceFlavor,
    ResourceGroup,
    ResourceName,
    Workload,
)
from manager.core.reasons import PendingKind, PendingReason
from manager.core.selectors import first_untolerated_taint, node_selection_mismatch
from manager.core.tas_model import Topology, TopologyAssignment


class Mode(IntEnum):
    """How a flavor can serve a resource, worst to best."""

    NO_FIT = 0
    NO_CANDIDATES = 1  # would need preemption, but nothing may be preempted
    PREEMPT = 2  # preemption inside the ClusterQueue is needed
    RECLAIM = 3  # only quota lent to other ClusterQueues needs reclaiming
    FIT = 4


@dataclass(frozen=True, slots=True)
class Granular:
    """A mode plus how far up the cohort tree the quota comes from (0: no borrowing)."""

    mode: Mode
    borrow: int


_WORST = Granular(Mode.NO_FIT, 1 << 30)
_BEST = Granular(Mode.FIT, 0)
_ASK_ORACLE = Granular(Mode.PREEMPT, -1)
"""Marker: only preemption could make this resource fit; ask the oracle."""


class PreemptionOracle(Protocol):
    """What flavor assignment needs to know about preemption, without doing any."""

    def simulate(self, requests: dict[FlavorResource, int]) -> Granular:
        """Could preemption make ``requests`` fit, and at what borrowing level after it?"""
        ...


@dataclass(frozen=True, slots=True)
class FlavorChoice:
    flavor: FlavorName
    mode: Mode
    borrow: int


@dataclass(slots=True)
class PodSetFlavors:
    pod_set: PodSet
    requests: dict[ResourceName, int]
    """Totals for all pods of the pod set (including ``pods`` when the queue covers it)."""
    flavors: dict[ResourceName, FlavorChoice] = field(default_factory=dict)


@dataclass(slots=True)
class Assignment:
    pod_sets: list[PodSetFlavors]
    usage: dict[FlavorResource, int]
    borrowing: int
    mode: Mode
    """FIT: admit now; PREEMPT: needs victims first; NO_FIT: stays pending."""
    reason: PendingReason | None = None
    topology: dict[str, TopologyAssignment] = field(default_factory=dict)
    """Pod sets placed by topology (tas_admission.py), by name."""
    delayed_topology: set[str] = field(default_factory=set)
    """Pod sets a worker places by topology later (MultiKueue)."""

    def frs_needing_preemption(self) -> set[FlavorResource]:
        return {
            (choice.flavor, resource)
            for ps in self.pod_sets
            for resource, choice in ps.flavors.items()
            if choice.mode < Mode.FIT
        }

    def admission(self, cq: ClusterQueueState) -> Admission:
        return Admission(
            cluster_queue=cq.spec.name,
            pod_set_assignments=tuple(
                PodSetAssignment(
                    name=ps.pod_set.name,
                    flavors={r: c.flavor for r, c in ps.flavors.items()},
                    resource_usage={r: ps.requests[r] for r in ps.flavors},
                    count=ps.pod_set.count,
                    topology_assignment=self.topology.get(ps.pod_set.name),
                    delayed_topology=ps.pod_set.name in self.delayed_topology,
                )
                for ps in self.pod_sets
            ),
        )


def is_preferred(a: Granular, b: Granular, fungibility: FlavorFungibility) -> bool:
    """Is ``a`` a better way to serve a resource than ``b``, per flavorFungibility.preference?"""
    if a.mode is Mode.NO_FIT:
        return False
    if b.mode is Mode.NO_FIT:
        return True
    a_stuck, b_stuck = a.mode is Mode.NO_CANDIDATES, b.mode is Mode.NO_CANDIDATES
    if a_stuck != b_stuck:
        return not a_stuck
    if fungibility.preference is FungibilityPreference.PREEMPTION_OVER_BORROWING:
        if a.borrow != b.borrow:
            return a.borrow < b.borrow
        return a.mode > b.mode
    if a.mode != b.mode:
        return a.mode > b.mode
    return a.borrow < b.borrow


def should_try_next_flavor(mode: Granular, fungibility: FlavorFungibility) -> bool:
    if mode.mode in (Mode.NO_FIT, Mode.NO_CANDIDATES):
        return True
    if (
        mode.mode in (Mode.PREEMPT, Mode.RECLAIM)
        and fungibility.when_can_preempt is FungibilityPolicy.TRY_NEXT_FLAVOR
    ):
        return True
    return mode.borrow > 0 and fungibility.when_can_borrow is FungibilityPolicy.TRY_NEXT_FLAVOR


@dataclass(slots=True)
class _Notes:
    """Why flavors were turned down, sorted into what a person should read first."""

    quota: list[str] = field(default_factory=list)
    max_quota: list[str] = field(default_factory=list)
    mismatch: list[str] = field(default_factory=list)

    def reason(self, prefix: str) -> PendingReason:
        if self.quota:
            kind = PendingKind.WAITING_FOR_QUOTA
        elif self.max_quota:
            kind = PendingKind.EXCEEDS_MAX_QUOTA
        else:
            kind = PendingKind.NO_MATCHING_FLAVOR
        parts = list(dict.fromkeys(self.quota + self.max_quota + self.mismatch))
        text = "; ".join(parts)
        if kind is PendingKind.NO_MATCHING_FLAVOR:
            text = f"couldn't assign flavors: {text}"
        return PendingReason(kind, prefix + text)


class FlavorAssigner:
    """Assigns flavors for one workload in one ClusterQueue, against current usage."""

    def __init__(
        self,
        workload: Workload,
        cq: ClusterQueueState,
        flavors: Mapping[FlavorName, ResourceFlavor],
        oracle: PreemptionOracle,
        *,
        can_preempt_while_borrowing: bool,
        topologies: Mapping[str, Topology] | None = None,
    ) -> None:
        self.workload = workload
        self.cq = cq
        self.flavors = flavors
        self.oracle = oracle
        self.can_preempt_while_borrowing = can_preempt_while_borrowing
        self.allowed: frozenset[FlavorName] | None = None
        self.topologies = topologies or {}
        self.tas_implied = tas_admission.tas_only(cq.spec, flavors)

    def assign(self) -> Assignment:
        """Flavors for every pod set, or NO_FIT with the reason (gang: all or nothing).

        With ``colocated_flavors`` the flavors must all come from one of its sets: the
        ClusterQueue's own preference is kept when it already does; otherwise each set is
        tried in its order and the best way in wins (fits, then needs preemption; less
        borrowing; the earlier set)."""
        first = self._assign_within(None)
        sets = [s for s in dict.fromkeys(self.cq.spec.colocated_flavors) if s]
        if not sets or first.mode is Mode.NO_FIT or _within_one(first, sets):
            # Restricting flavors can only remove ways in: a NO_FIT stays one, and says why.
            return first
        best: Assignment | None = None
        notes: list[str] = []
        for allowed in sets:
            candidate = self._assign_within(allowed)
            if candidate.mode is Mode.NO_FIT:
                why = candidate.reason.message if candidate.reason else "no fit"
                notes.append(f"[{', '.join(sorted(allowed))}]: {why}")
            elif best is None or (candidate.mode, -candidate.borrowing) > (
                best.mode,
                -best.borrowing,
            ):
                best = candidate
        if best is not None:
            return best
        return Assignment([], {}, 0, Mode.NO_FIT, reasons.no_single_place(self.cq.spec.name, notes))

    def _assign_within(self, allowed: frozenset[FlavorName] | None) -> Assignment:
        """One assignment, using only the flavors in ``allowed`` (None: any)."""
        self.allowed = allowed
        usage: dict[FlavorResource, int] = {}  # pod sets see the usage of earlier ones
        pod_sets: list[PodSetFlavors] = []
        worst, borrowing = _BEST, 0
        quota_reasons: list[PendingReason] = []
        for ps in self.workload.pod_sets:
            prefix = f"pod set {ps.name}: " if len(self.workload.pod_sets) > 1 else ""
            notes = _Notes()
            psf = self._assign_pod_set(ps, usage, notes)
            if psf is None:
                return Assignment(pod_sets, usage, 0, Mode.NO_FIT, notes.reason(prefix))
            for resource, choice in psf.flavors.items():
                fr = (choice.flavor, resource)
                usage[fr] = usage.get(fr, 0) + psf.requests[resource]
                mode = Granular(choice.mode, choice.borrow)
                if is_preferred(worst, mode, self.cq.spec.flavor_fungibility):
                    worst = mode
                borrowing = max(borrowing, choice.borrow)
            if notes.quota or notes.max_quota:
                quota_reasons.append(notes.reason(prefix))
            pod_sets.append(psf)
        if worst.mode is Mode.FIT:
            return Assignment(pod_sets, usage, borrowing, Mode.FIT)
        reason = _join(quota_reasons) if quota_reasons else None
        return Assignment(pod_sets, usage, borrowing, Mode.PREEMPT, reason)

    def _assign_pod_set(
        self, ps: PodSet, usage: dict[FlavorResource, int], notes: _Notes
    ) -> PodSetFlavors | None:
        """One flavor per resource group the pod set touches; None if a group gets none."""
        cq = self.cq
        requests = {r: v * ps.count for r, v in ps.requests.items()}
        if PODS in cq.rg_by_resource:
            requests[PODS] = ps.count
        psf = PodSetFlavors(ps, requests)
        for resource in sorted(requests):
            if resource in psf.flavors:
                continue  # assigned with the rest of its resource group
            rg = cq.rg_by_resource.get(resource)
            if rg is None:
                if requests[resource] == 0:
                    continue
                notes.mismatch.append(reasons.resource_not_covered(resource, cq.spec.name))
                return None
            group = {r: requests[r] for r in rg.covered_resources if r in requests}
            chosen = self._find_flavor(rg, ps, group, usage, notes)
            if chosen is None:
                return None
            psf.flavors.update(chosen)
        return psf

    def _find_flavor(
        self,
        rg: ResourceGroup,
        ps: PodSet,
        group: dict[ResourceName, int],
        assumed: dict[FlavorResource, int],
        notes: _Notes,
    ) -> dict[ResourceName, FlavorChoice] | None:
        """Walk the group's flavors in order; flavorFungibility says when to stop."""
        fungibility = self.cq.spec.flavor_fungibility
        best: dict[ResourceName, FlavorChoice] | None = None
        best_mode = _WORST
        for flavor_quotas in rg.flavors:
            name = flavor_quotas.name
            if self.allowed is not None and name not in self.allowed:
                continue
            mismatch = self._flavor_mismatch(name, ps)
            if mismatch is not None:
                notes.mismatch.append(mismatch)
                continue
            modes = self._flavor_modes(name, group, assumed, notes)
            choices: dict[ResourceName, FlavorChoice] = {}
            representative = _BEST  # the worst of the resources' modes
            for resource in sorted(modes):
                mode = modes[resource]
                if is_preferred(representative, mode, fungibility):
                    representative = mode
                choices[resource] = FlavorChoice(name, mode.mode, mode.borrow)
            if not should_try_next_flavor(representative, fungibility):
                return choices
            if is_preferred(representative, best_mode, fungibility):
                best, best_mode = choices, representative
        return best

    def _flavor_modes(
        self,
        name: FlavorName,
        group: dict[ResourceName, int],
        assumed: dict[FlavorResource, int],
        notes: _Notes,
    ) -> dict[ResourceName, Granular]:
        """How this flavor could serve each resource of the group (stops at a NO_FIT)."""
        modes: dict[ResourceName, Granular] = {}
        needs_preemption: dict[FlavorResource, int] = {}
        for resource in sorted(group):
            fr = (name, resource)
            value = assumed.get(fr, 0) + group[resource]
            mode = self._fits_quota(fr, value, notes)
            if mode is _ASK_ORACLE:
                needs_preemption[fr] = value
                continue
            if mode.mode is Mode.NO_FIT:
                return {resource: mode}
            modes[resource] = mode
        if needs_preemption:
            # One what-if for all of the flavor's resources: they are preempted together.
            simulated = self.oracle.simulate(needs_preemption)
            for _, resource in needs_preemption:
                modes[resource] = simulated
        return modes

    def _flavor_mismatch(self, name: FlavorName, ps: PodSet) -> str | None:
        flavor = self.flavors.get(name)
        if flavor is None:
            return reasons.flavor_not_found(name)
        taint = first_untolerated_taint(flavor.node_taints, ps.tolerations + flavor.tolerations)
        if taint is not None:
            return reasons.untolerated_taint(name, str(taint))
        why = node_selection_mismatch(ps.node_selector, ps.node_affinity, flavor.node_labels)
        if why is not None:
            return reasons.flavor_mismatch(name, why)
        return tas_admission.flavor_mismatch(
            flavor, ps, self.cq.spec, implied=self.tas_implied, topologies=self.topologies
        )

    def _fits_quota(self, fr: FlavorResource, value: int, notes: _Notes) -> Granular:
        cq = self.cq
        maximum = quota.potential_available(cq, fr)
        if value > maximum:
            notes.max_quota.append(
                reasons.exceeds_max_quota(fr[1], fr[0], value, maximum, cq.spec.name)
            )
            return Granular(Mode.NO_FIT, 0)
        free = quota.available(cq, fr)
        borrow, may_reclaim = quota.borrowing_level(cq, fr, value)
        if value <= free:
            return Granular(Mode.FIT, borrow)
        notes.quota.append(reasons.insufficient_unused_quota(fr[1], fr[0], value, free))
        nominal = cq.quotas[fr].nominal if fr in cq.quotas else 0
        if nominal >= value or may_reclaim or self.can_preempt_while_borrowing:
            return _ASK_ORACLE
        return Granular(Mode.NO_FIT, borrow)


def _within_one(assignment: Assignment, sets: list[frozenset[FlavorName]]) -> bool:
    used = {c.flavor for ps in assignment.pod_sets for c in ps.flavors.values()}
    return any(used <= allowed for allowed in sets)


def _join(notes: list[PendingReason]) -> PendingReason:
    kinds = {n.kind for n in notes}
    kind = (
        PendingKind.WAITING_FOR_QUOTA if PendingKind.WAITING_FOR_QUOTA in kinds else notes[0].kind
    )
    return PendingReason(kind, "; ".join(n.message for n in notes))
