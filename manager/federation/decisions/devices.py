"""Placement by devices (pure): can every pod of a workload get its DRA devices on one node of
a worker, as the worker's kube-scheduler would allocate them?

The manager's live view of a worker holds its ``resource.k8s.io/v1`` objects: the
ResourceSlices (what devices each node has: driver, pool, name, attributes, counters they
consume), the ResourceClaims (``status.allocation``: which devices are taken) and the
DeviceClasses (their CEL selectors). A workload's per-pod device requests come from its pod
sets' ResourceClaimTemplates: per request a DeviceClass, a count and the request's own CEL
selectors. Quota (``capacity.py``) says whether the worker's ClusterQueue can hold the
devices' charge; this says whether its nodes can: a pod asking for 2 devices needs ONE node
with 2 free matching ones, and six free devices spread one per node do not do.

The check, per pod set and per pod, places the pod on the node with the fewest free devices
that can hold all of the pod's requests (best fit, so larger holes stay for larger pods),
picking for each request the first free devices that match it. It is greedy, and honest about
what that misses:

- across pods: best-fit packing may fail where another assignment of pods to nodes would have
  succeeded (bin packing); it never says "fits" where nothing fits, since every device it
  hands out is free and matching;
- within a pod: requests are served in order, each taking the first free devices it matches;
  two requests with overlapping selectors can be refused where a matching exists;
- what it does not model: devices of slices without a ``nodeName`` (``allNodes`` or a node
  selector: network-attached devices) are not counted; pools are read at their newest
  generation without checking that all of its slices arrived; ``firstAvailable`` and
  ``allocationMode: All`` requests (refused by the charge already); consumable capacity;
  claims made by the manager's placements that the worker has not allocated yet (two jobs
  placed at once may both be shown the same free node; the worker's scheduler then keeps one
  pending until devices free up). Shared counters (partitionable devices) are honoured.

CEL: the selectors are evaluated with the ``cel`` package (``common-expression-language``),
with ``device`` bound as Kubernetes binds it (``driver``, ``attributes[domain][name]``,
``capacity[domain][name]`` as a string). The selectors kfed's and most drivers' classes use
(``device.driver``, ``device.attributes["domain"].name``, ``==``, ``&&``, ``||``) evaluate as
the scheduler does; a selector that cannot be compiled or evaluated for a device (a missing
attribute, a function it lacks) makes that device not match, and the reason says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from manager.api import dracel
from manager.federation.decisions.capacity import Candidate

Obj = dict[str, Any]
DeviceId = tuple[str, str, str]
"""(driver, pool, device name): how a claim's allocation names a device."""
CounterKey = tuple[str, str, str, str]
"""(driver, pool, counter set, counter)."""

API_GROUP_VERSION = "resource.k8s.io/v1"


# --- a worker's devices ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Device:
    id: DeviceId
    node: str
    attributes: dracel.Domains
    """Per domain, (name, value): hashable, so that a selector's verdict is remembered for
    every device that looks the same (the same model on a thousand nodes)."""
    capacity: dracel.Domains = ()
    consumes: tuple[tuple[str, str, int], ...] = ()
    """(counter set, counter, amount) it takes from its pool's shared counters."""

    @property
    def driver(self) -> str:
        return self.id[0]


@dataclass(frozen=True, slots=True)
class Inventory:
    """The devices of a worker's nodes, from its ResourceSlices."""

    nodes: Mapping[str, tuple[Device, ...]]
    counters: Mapping[CounterKey, int] = field(default_factory=dict)
    """Shared counters per pool (partitionable devices): their capacity."""
    not_counted: int = 0
    """Devices of slices without a node (``allNodes``, a node selector): not used here."""


@dataclass(frozen=True, slots=True)
class Taken:
    """What the worker's ResourceClaims hold (``status.allocation``)."""

    devices: frozenset[DeviceId] = frozenset()


@dataclass(frozen=True, slots=True)
class WorkerDevices:
    """One worker's devices as the check reads them."""

    inventory: Inventory
    taken: Taken
    classes: Mapping[str, tuple[str, ...]]
    """DeviceClass name -> its CEL selector expressions."""


def inventory(slices: Iterable[Obj]) -> Inventory:
    """The devices per node of these ResourceSlices, each pool at its newest generation."""
    newest: dict[tuple[str, str], int] = {}
    slices = list(slices)
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        key = (str(spec.get("driver", "")), str(pool.get("name", "")))
        newest[key] = max(newest.get(key, 0), int(pool.get("generation") or 0))
    nodes: dict[str, list[Device]] = {}
    counters: dict[CounterKey, int] = {}
    not_counted = 0
    for s in slices:
        spec = s.get("spec") or {}
        driver = str(spec.get("driver", ""))
        pool = spec.get("pool") or {}
        pool_name = str(pool.get("name", ""))
        if int(pool.get("generation") or 0) < newest[(driver, pool_name)]:
            continue
        for counter_set in spec.get("sharedCounters") or []:
            for counter, amount in (counter_set.get("counters") or {}).items():
                ckey = (driver, pool_name, str(counter_set.get("name", "")), str(counter))
                counters[ckey] = _units((amount or {}).get("value", 0))
        node = spec.get("nodeName")
        items = spec.get("devices") or []
        if not node:
            not_counted += len(items)
            continue
        for d in items:
            consumes = tuple(
                (str(c.get("counterSet", "")), str(name), _units((v or {}).get("value", 0)))
                for c in d.get("consumesCounters") or []
                for name, v in (c.get("counters") or {}).items()
            )
            nodes.setdefault(str(node), []).append(
                Device(
                    (driver, pool_name, str(d.get("name", ""))),
                    str(node),
                    dracel.attributes_of(d, driver),
                    dracel.capacity_of(d, driver),
                    consumes,
                )
            )
    return Inventory(
        {n: tuple(sorted(ds, key=lambda d: d.id)) for n, ds in sorted(nodes.items())},
        counters,
        not_counted,
    )


def _units(value: object) -> int:
    """A counter's quantity as a whole number (kfed's bed and most drivers count slices or
    bytes; a fractional quantity is rounded down)."""
    text = str(value).strip()
    suffixes = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6}
    for suffix, factor in suffixes.items():
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * factor)
    try:
        return int(float(text))
    except ValueError:
        return 0


def taken(claims: Iterable[Obj]) -> Taken:
    """The devices the claims' allocations hold (an ``adminAccess`` result holds nothing)."""
    held: set[DeviceId] = set()
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            if result.get("adminAccess"):
                continue
            held.add(
                (str(result.get("driver", "")), str(result.get("pool", "")), str(result["device"]))
            )
    return Taken(frozenset(held))


def device_classes(objects: Iterable[Obj]) -> dict[str, tuple[str, ...]]:
    return {
        str(c["metadata"]["name"]): dracel.selector_expressions(
            (c.get("spec") or {}).get("selectors")
        )
        for c in objects
    }


def worker_devices(
    slices: Iterable[Obj], claims: Iterable[Obj], classes: Iterable[Obj]
) -> WorkerDevices:
    return WorkerDevices(inventory(slices), taken(claims), device_classes(classes))


# --- what a workload asks for ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    where: str
    """``<template>/<request>``, for messages."""
    device_class: str
    count: int
    selectors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PodSetNeed:
    name: str
    pods: int
    requests: tuple[DeviceRequest, ...]
    """What ONE pod of the pod set asks for, every claim of it together."""


@dataclass(frozen=True, slots=True)
class Need:
    pod_sets: tuple[PodSetNeed, ...] = ()

    def __bool__(self) -> bool:
        return any(r.count for ps in self.pod_sets for r in ps.requests)


def template_requests(name: str, template: Mapping[str, Any]) -> list[DeviceRequest]:
    """The device requests of one claim made from ``template`` (``adminAccess`` requests
    take nothing; ``firstAvailable`` and ``allocationMode: All`` are refused by the charge
    before any placement, so they are not modelled)."""
    spec = (template.get("spec") or {}).get("spec") or {}
    out: list[DeviceRequest] = []
    for request in (spec.get("devices") or {}).get("requests") or []:
        exactly = request.get("exactly")
        if not exactly or exactly.get("adminAccess"):
            continue
        if (exactly.get("allocationMode") or "ExactCount") != "ExactCount":
            continue
        count = exactly.get("count")
        out.append(
            DeviceRequest(
                f"{name}/{request.get('name', '')}",
                str(exactly.get("deviceClassName", "")),
                1 if count is None else int(count),
                dracel.selector_expressions(exactly.get("selectors")),
            )
        )
    return out


def need_of(
    pod_sets: Sequence[Mapping[str, Any]],
    templates: Mapping[str, Mapping[str, Any]],
    pods: Mapping[str, int] | None = None,
) -> Need:
    """Per pod set, what one pod asks for (every ``resourceClaimTemplateName`` entry of its
    pod spec, each a claim of its own), and how many pods (``pods`` by pod set name, e.g. the
    admitted counts; else the pod set's ``count``). A template absent from ``templates``
    contributes nothing (the caller reads them; a missing one already kept the workload from
    being created)."""
    out: list[PodSetNeed] = []
    for ps in pod_sets:
        name = str(ps.get("name", "main"))
        spec = (ps.get("template") or {}).get("spec") or {}
        requests: list[DeviceRequest] = []
        for claim in spec.get("resourceClaims") or []:
            template_name = claim.get("resourceClaimTemplateName")
            template = templates.get(str(template_name)) if template_name else None
            if template is not None:
                requests.extend(template_requests(str(template_name), template))
        count = (pods or {}).get(name, int(ps.get("count", 1) or 0))
        out.append(PodSetNeed(name, count, tuple(requests)))
    return Need(tuple(out))


# --- matching: CEL -----------------------------------------------------------------------


@dataclass
class _Matching:
    """Which devices a request matches, and the first reason a selector could not be
    evaluated (for the message)."""

    problems: list[str] = field(default_factory=list)
    seen: dict[tuple[DeviceRequest, DeviceId], bool] = field(default_factory=dict)

    def match(
        self, device: Device, request: DeviceRequest, classes: Mapping[str, tuple[str, ...]]
    ) -> bool:
        key = (request, device.id)
        found = self.seen.get(key)
        if found is None:
            found = self.seen[key] = self._match(device, request, classes)
        return found

    def _match(
        self, device: Device, request: DeviceRequest, classes: Mapping[str, tuple[str, ...]]
    ) -> bool:
        for expression in (*classes.get(request.device_class, ()), *request.selectors):
            verdict = dracel.matches(expression, device.driver, device.attributes, device.capacity)
            if verdict is True:
                continue
            if verdict is not False and verdict not in self.problems:
                self.problems.append(verdict)
            return False
        return True


# --- the check ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fit:
    fits: bool
    reason: str
    never: bool = False
    """No node of the worker could hold a pod even with every device free."""
    nodes: tuple[str, ...] = ()
    """Where the check put the pods, in order (when it fits)."""


@dataclass
class _NodeState:
    free: list[Device]
    counters: dict[CounterKey, int]


def _usable(device: Device, counters: Mapping[CounterKey, int]) -> bool:
    driver, pool, _ = device.id
    return all(
        counters.get((driver, pool, cset, name), 0) >= amount
        for cset, name, amount in device.consumes
    )


def _take(device: Device, counters: dict[CounterKey, int]) -> None:
    driver, pool, _ = device.id
    for cset, name, amount in device.consumes:
        key = (driver, pool, cset, name)
        counters[key] = counters.get(key, 0) - amount


def _remaining_counters(worker: WorkerDevices) -> dict[CounterKey, int]:
    left = dict(worker.inventory.counters)
    for devices in worker.inventory.nodes.values():
        for d in devices:
            if d.id in worker.taken.devices:
                _take(d, left)
    return left


def _try_pod(
    state: _NodeState,
    requests: Sequence[DeviceRequest],
    matching: _Matching,
    classes: Mapping[str, tuple[str, ...]],
) -> list[Device] | None:
    """The devices one pod would get on this node (None: it does not fit there)."""
    counters = dict(state.counters)
    chosen: list[Device] = []
    for request in requests:
        got = 0
        for device in state.free:
            if got == request.count:
                break
            if device in chosen or not _usable(device, counters):
                continue
            if matching.match(device, request, classes):
                chosen.append(device)
                _take(device, counters)
                got += 1
        if got < request.count:
            return None
    return chosen


def check(worker: WorkerDevices | None, need: Need, *, serves: bool = True) -> Fit:
    """Whether every pod of ``need`` gets its devices on one node of ``worker`` (pods packed
    best fit, pod set by pod set), else the reason, with counts."""
    if not need:
        return Fit(True, "")
    if worker is None or not serves:
        return Fit(
            False, f"does not serve {API_GROUP_VERSION} (DRA): no devices to claim", never=True
        )
    for ps in need.pod_sets:
        for request in ps.requests:
            if request.device_class not in worker.classes:
                return Fit(
                    False, f"no DeviceClass {request.device_class} on this worker", never=True
                )
    matching = _Matching()
    counters = _remaining_counters(worker)
    # Counters are per pool, and each pool counted here is one node's (its slices name it).
    by_pool: dict[tuple[str, str], dict[CounterKey, int]] = {}
    for k, v in counters.items():
        by_pool.setdefault((k[0], k[1]), {})[k] = v
    states: dict[str, _NodeState] = {}
    for node, devices in worker.inventory.nodes.items():
        own: dict[CounterKey, int] = {}
        for pool in {(d.id[0], d.id[1]) for d in devices}:
            own.update(by_pool.get(pool, {}))
        states[node] = _NodeState([d for d in devices if d.id not in worker.taken.devices], own)
    placed: list[str] = []
    for ps in need.pod_sets:
        if not ps.requests:
            continue
        for _ in range(ps.pods):
            best: tuple[int, str, list[Device]] | None = None
            for node, state in states.items():
                got = _try_pod(state, ps.requests, matching, worker.classes)
                if got is not None and (best is None or len(state.free) < best[0]):
                    best = (len(state.free), node, got)
            if best is None:
                return _refusal(worker, ps, matching, placed)
            _, node, got = best
            state = states[node]
            state.free = [d for d in state.free if d not in got]
            for d in got:
                _take(d, state.counters)
            placed.append(node)
    return Fit(True, _placed_summary(need, placed), nodes=tuple(placed))


def _placed_summary(need: Need, placed: list[str]) -> str:
    per_pod = sum(r.count for ps in need.pod_sets for r in ps.requests)
    nodes = sorted(set(placed))
    shown = ", ".join(nodes[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
    pods = len(placed)
    return (
        f"devices: {pods} pod{'s' if pods != 1 else ''} on {shown}"
        if per_pod
        else "devices: none asked"
    )


def _refusal(worker: WorkerDevices, ps: PodSetNeed, matching: _Matching, placed: list[str]) -> Fit:
    """Why a pod of ``ps`` fits on no node: too few free devices in all, or fragmentation
    (enough free, but no node with enough), or none that could ever do (never)."""
    per_class: dict[str, int] = {}
    for request in ps.requests:
        per_class[request.device_class] = per_class.get(request.device_class, 0) + request.count
    pods_left = ps.pods
    for request in ps.requests:
        wanted = per_class[request.device_class]
        free_total = 0
        all_total = 0
        free_best = 0
        all_best = 0
        for devices in worker.inventory.nodes.values():
            matched = [d for d in devices if matching.match(d, request, worker.classes)]
            free = [d for d in matched if d.id not in worker.taken.devices]
            all_total += len(matched)
            free_total += len(free)
            all_best = max(all_best, len(matched))
            free_best = max(free_best, len(free))
        where = f"pod set {ps.name}: {ps.pods} pod(s) x {wanted} {request.device_class}"
        why = f" ({matching.problems[0]})" if matching.problems else ""
        if all_best < wanted:
            if all_total == 0:
                return Fit(
                    False, f"no {request.device_class} device matches{why} [{where}]", never=True
                )
            return Fit(
                False,
                f"no node with {wanted} {request.device_class} devices (at most {all_best} "
                f"on one node){why} [{where}]",
                never=True,
            )
        if free_best < wanted:
            return Fit(
                False,
                f"{free_total} free {request.device_class} devices, no node with {wanted} "
                f"free [{where}]",
            )
    done = len(placed)
    return Fit(
        False,
        f"devices for {done} pod(s) found, not for all {pods_left} of pod set {ps.name}: no "
        "node left with every device one pod asks for free (fragmented, or shared counters "
        "in use)",
    )


def with_devices(candidate: Candidate, fit: Fit) -> Candidate:
    """The candidate as quota judged it, and devices now: refused with the device reason, or
    its summary extended with where the pods' devices are."""
    if not candidate.fits:
        return candidate
    if not fit.fits:
        return replace(candidate, fits=False, reason=fit.reason, never=fit.never)
    if not fit.reason:
        return candidate
    return replace(candidate, reason=f"{candidate.reason}; {fit.reason}")


def evaluate(
    candidate: Candidate, worker: WorkerDevices | None, need: Need, *, serves: bool = True
) -> Candidate:
    """``with_devices`` of ``check``: the device check, only where quota fits (its reason
    comes first) and only for a workload that asks for devices."""
    if not candidate.fits or not need:
        return candidate
    return with_devices(candidate, check(worker, need, serves=serves))
