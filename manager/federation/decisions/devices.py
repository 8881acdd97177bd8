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

A worker's devices are read in deviceinventory.py, a workload's requests in deviceneed.py,
and the CEL selectors matched in devicematching.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from manager.federation.decisions.capacity import Candidate
from manager.federation.decisions.deviceinventory import CounterKey, Device, WorkerDevices
from manager.federation.decisions.devicematching import Matching
from manager.federation.decisions.deviceneed import DeviceRequest, Need, PodSetNeed

API_GROUP_VERSION = "resource.k8s.io/v1"


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
    matching: Matching,
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
    matching = Matching()
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


def _refusal(worker: WorkerDevices, ps: PodSetNeed, matching: Matching, placed: list[str]) -> Fit:
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
