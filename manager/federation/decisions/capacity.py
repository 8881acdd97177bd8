"""Where a workload fits: free quota per worker, flavor and resource, from the workers' own
ClusterQueues as the manager watches them, and the scoring rule that picks one.

A worker is a candidate for a workload admitted on the manager in flavor F when:
it is connected and not cordoned; the job's allow-list (if any) names it; it has the
LocalQueue the job was submitted to (same namespace and name) and that LocalQueue's
ClusterQueue offers a flavor matching F (same name, or same nodeLabels); and that flavor's
nominal quota, minus what the worker has reserved and what the manager has just sent there
but the worker has not admitted yet, covers every resource the workload uses.

Among candidates, a worker that would have to **grow** for the workload (a flavor it uses
there gets its nodes from an autoscaler on demand: ``growth.py``) comes after every one that
would not; then the rule is **best fit**: the worker left with the smallest share of free
quota in the scarcest requested resource after placing the job (so large holes stay
available for large jobs), then the one with the fewest of our workloads still waiting to be
admitted there, then MultiKueueConfig order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from manager.api import quantity
from manager.api.view import at, items

Obj = dict[str, Any]
ResourceUsage = Mapping[str, int]
RULE = "growing workers last, then best fit, then fewest waiting, then config order"
"""``choose``'s rule in words: what placements record and ``kfed whatif`` prints."""


@dataclass(frozen=True, slots=True)
class Candidate:
    cluster: str
    fits: bool
    reason: str
    """Why it does not fit, or a summary of the fit (shown in `kfed explain`)."""
    worker_cluster_queue: str = ""
    flavors: Mapping[str, str] = field(default_factory=dict)
    """Manager flavor -> worker flavor."""
    free: Mapping[str, int] = field(default_factory=dict)
    """Free units per resource before placing, in the matched worker flavors."""
    score: tuple[float, int, int] = (1.0, 0, 0)
    never: bool = False
    """It cannot hold the workload as the worker is configured now (no such queue or flavor,
    or less nominal quota than requested), as opposed to not now (full, unreachable)."""
    grows: str = ""
    """What must make nodes there for it (``NodePool h100-cloud``): it would have to grow,
    so it comes after every fitting worker that would not ("": it runs on nodes it has)."""

    def describe(self) -> str:
        return f"{self.cluster}: {self.reason}"


@dataclass(frozen=True, slots=True)
class Request:
    """What a manager workload needs: its admission's usage per (manager flavor, resource)."""

    namespace: str
    queue: str
    usage: Mapping[tuple[str, str], int]


@dataclass(frozen=True, slots=True)
class WorkerView:
    """The objects of one worker the evaluation reads (informer caches)."""

    name: str
    local_queues: Mapping[str, Obj]
    cluster_queues: Mapping[str, Obj]
    flavors: Mapping[str, Obj]
    in_flight: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
    """(worker ClusterQueue, worker flavor, resource) -> usage sent but not admitted yet."""
    waiting: int = 0
    order: int = 0
    grows: Mapping[str, str] = field(default_factory=dict)
    """Worker flavor -> the NodePool that makes its nodes on demand (``growth.py``)."""


def _quotas(cq: Obj) -> dict[str, dict[str, int]]:
    result: dict[str, dict[str, int]] = {}
    for rg in items(cq, "spec", "resourceGroups"):
        for fq in rg.get("flavors") or []:
            result[fq["name"]] = {
                r["name"]: quantity.to_core_units(r["name"], r.get("nominalQuota", 0))
                for r in fq.get("resources") or []
            }
    return result


def offered_flavors(cq: Obj) -> list[str]:
    """The flavors a ClusterQueue lists, in its order."""
    return list(_quotas(cq))


def _reserved(cq: Obj) -> dict[tuple[str, str], int]:
    result = {}
    for fu in items(cq, "status", "flavorsReservation"):
        for r in fu.get("resources") or []:
            result[(fu["name"], r["name"])] = quantity.to_core_units(r["name"], r.get("total") or 0)
    return result


@dataclass(frozen=True, slots=True)
class QuotaLine:
    """One (flavor, resource) quota of a worker ClusterQueue and what is left of it: the one
    free-quota formula of the dispatcher, the dashboard, the metrics and the CLI."""

    cluster_queue: str
    flavor: str
    resource: str
    nominal: int
    reserved: int
    """``status.flavorsReservation`` as the worker reports it."""
    in_flight: int = 0
    """Sent there by us and not admitted yet (the worker's status cannot show it)."""

    @property
    def available(self) -> int:
        """May be below zero (the queue borrows, or its quota shrank under running work)."""
        return self.nominal - self.reserved - self.in_flight


def quota_lines(
    cq_name: str, cq: Obj, in_flight: Mapping[tuple[str, str, str], int] | None = None
) -> list[QuotaLine]:
    reserved = _reserved(cq)
    return [
        QuotaLine(
            cq_name,
            flavor,
            resource,
            nominal,
            reserved.get((flavor, resource), 0),
            (in_flight or {}).get((cq_name, flavor, resource), 0),
        )
        for flavor, resources in _quotas(cq).items()
        for resource, nominal in resources.items()
    ]


def free_quota(worker: WorkerView) -> dict[tuple[str, str], int]:
    """Free quota per (flavor, resource) summed over the worker's ClusterQueues, never below
    zero. What the dashboard and the ``kfed_cluster_free_capacity`` gauge show."""
    free: dict[tuple[str, str], int] = {}
    for cq_name, cq in worker.cluster_queues.items():
        for line in quota_lines(cq_name, cq, worker.in_flight):
            key = (line.flavor, line.resource)
            free[key] = free.get(key, 0) + max(0, line.available)
    return free


def match_flavor(
    manager_flavor: str, manager_flavors: Mapping[str, Obj], worker: WorkerView, offered: list[str]
) -> str | None:
    """A worker flavor of ``offered`` for a manager flavor: same name, else same nodeLabels."""
    if manager_flavor in offered:
        return manager_flavor
    labels = at(manager_flavors.get(manager_flavor), "spec", "nodeLabels")
    if not labels:
        return None
    for name in offered:
        worker_labels = at(worker.flavors.get(name), "spec", "nodeLabels")
        if worker_labels == labels:
            return name
    return None


def evaluate(worker: WorkerView, request: Request, manager_flavors: Mapping[str, Obj]) -> Candidate:
    lq = worker.local_queues.get(f"{request.namespace}/{request.queue}")
    if lq is None:
        return Candidate(
            worker.name, False, f"no LocalQueue {request.namespace}/{request.queue}", never=True
        )
    cq_name = str(at(lq, "spec").get("clusterQueue", ""))
    cq = worker.cluster_queues.get(cq_name)
    if cq is None:
        return Candidate(
            worker.name,
            False,
            f"LocalQueue {request.queue} points to missing ClusterQueue {cq_name}",
            never=True,
        )
    quotas = _quotas(cq)
    lines = {(q.flavor, q.resource): q for q in quota_lines(cq_name, cq, worker.in_flight)}
    mapping: dict[str, str] = {}
    free: dict[str, int] = {}
    tightest = 1.0
    for (flavor, resource), amount in sorted(request.usage.items()):
        worker_flavor = mapping.get(flavor) or match_flavor(
            flavor, manager_flavors, worker, list(quotas)
        )
        if worker_flavor is None:
            return Candidate(
                worker.name,
                False,
                f"ClusterQueue {cq_name} has no flavor matching {flavor}",
                never=True,
            )
        mapping[flavor] = worker_flavor
        line = lines.get((worker_flavor, resource))
        if line is None:
            return Candidate(
                worker.name,
                False,
                f"flavor {worker_flavor} of ClusterQueue {cq_name} has no quota for {resource}",
                never=True,
            )
        nominal, available = line.nominal, line.available
        free[resource] = available
        if nominal < amount:
            return Candidate(
                worker.name,
                False,
                f"too small: flavor {worker_flavor} of ClusterQueue {cq_name} has "
                f"{_fmt(resource, nominal)} {resource} in all, {_fmt(resource, amount)} requested",
                cq_name,
                mapping,
                free,
                never=True,
            )
        if available < amount:
            return Candidate(
                worker.name,
                False,
                f"insufficient {resource} in flavor {worker_flavor}: "
                f"{_fmt(resource, amount)} requested, {_fmt(resource, max(available, 0))} free",
                cq_name,
                mapping,
                free,
            )
        if nominal > 0:
            tightest = min(tightest, (available - amount) / nominal)
    summary = ", ".join(f"{_fmt(r, v)} {r} free" for r, v in sorted(free.items()))
    pools = sorted({worker.grows[f] for f in mapping.values() if f in worker.grows})
    grows = ", ".join(f"NodePool {p}" for p in pools)
    return Candidate(
        worker.name,
        True,
        f"fits in {cq_name} ({summary})" + (f", nodes on demand from {grows}" if grows else ""),
        cq_name,
        mapping,
        free,
        (tightest, worker.waiting, worker.order),
        grows=grows,
    )


def never_placeable(candidates: list[Candidate]) -> bool:
    """No worker of the config can ever hold it as they are configured: each one that was
    evaluated said never (an unreachable or cordoned worker might, so it does not count)."""
    return all(c.never for c in candidates)


def choose(candidates: list[Candidate]) -> Candidate | None:
    fitting = [c for c in candidates if c.fits]
    return min(fitting, key=lambda c: (bool(c.grows), c.score, c.cluster)) if fitting else None


def _fmt(resource: str, units: int) -> str:
    return quantity.from_core_units(resource, units).canonical()
