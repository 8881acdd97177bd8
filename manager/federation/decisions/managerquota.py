"""Manager quota that follows the workers: upstream's ``quotaManagement: Automated`` on a
MultiKueueConfig (its alpha ``MultiKueueManagerQuotaAutomation`` gate, issue #9988).

For a manager ClusterQueue whose MultiKueue check names a MultiKueueConfig with
``quotaManagement: Automated``, the nominal quota of each resource of its one flavor is the
sum, over the config's workers, of the nominal quotas that worker's ClusterQueues give that
resource. Which ClusterQueues of a worker: those its LocalQueues point to, for every
LocalQueue there of the same namespace and name as a manager LocalQueue of this ClusterQueue
(each worker ClusterQueue counted once, however many LocalQueues lead to it), all their
flavors and resource groups added up by resource name. A worker that is not connected, or
that the config lists but is not registered, gives nothing (upstream's rule). A cordoned or
draining worker (kfed's ``kfed.io/maintenance``; upstream has no such state) gives only what
its ClusterQueues have reserved now, never more than their quota: no new work goes there, but
the work still running there keeps its share until it ends or moves.

The verdict is written as the ClusterQueue's ``MultiKueueManagerQuotaAutomation`` condition,
with upstream's reasons: ``QuotaAutomated`` (True), ``NotRequested`` (False: the config is
``Manual``), ``UnsupportedConfiguration`` (False: the config is missing, the ClusterQueue
has more than one flavor, or a worker's quota names a resource it does not cover; nothing is
changed then). A ClusterQueue that is not federated loses the condition.

Pure: objects in, a decision out (``decide``); ``engine/managerquota.py`` reads the informers
and writes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from manager.api.quantity import Quantity, QuantityError
from manager.api.view import at, items

Obj = Mapping[str, Any]

CONDITION = "MultiKueueManagerQuotaAutomation"
"""The ClusterQueue status condition type, upstream's name."""
REASON_AUTOMATED = "QuotaAutomated"
REASON_NOT_REQUESTED = "NotRequested"
REASON_UNSUPPORTED = "UnsupportedConfiguration"

# Upstream's condition messages, word for word, so that what reads them keeps working.
MESSAGE_AUTOMATED = "ClusterQueue quota is automatically managed based on MultiKueue workers."
MESSAGE_NOT_REQUESTED = "MultiKueue manager quota automation has not been requested."
MESSAGE_CONFIG_NOT_FOUND = "The referenced MultiKueueConfig was not found."
MESSAGE_ONE_FLAVOR = (
    "Quota automation requires that the manager-side ClusterQueue has exactly one ResourceFlavor"
)
MESSAGE_MISSING_RESOURCES = (
    "manager-side coveredResources is missing resources configured on workers: [{}]"
)

AUTOMATED = "Automated"
"""``spec.quotaManagement`` asking for it (``Manual``, the default, does not)."""


@dataclass(frozen=True, slots=True)
class WorkerQueues:
    """One worker of the config as the manager's informers hold it."""

    name: str
    connected: bool
    """Registered and connected now: only then does it count (upstream's rule)."""
    maintenance: str = ""
    """``kfed.io/maintenance``: "" (none), ``cordon`` or ``drain``."""
    local_queues: Mapping[str, str] = field(default_factory=dict)
    """``namespace/name`` of each of its LocalQueues -> the ClusterQueue it points to."""
    cluster_queues: Mapping[str, Obj] = field(default_factory=dict)
    """Its ClusterQueues by name."""


@dataclass(frozen=True, slots=True)
class Condition:
    status: bool
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Decision:
    condition: Condition | None
    """The ``MultiKueueManagerQuotaAutomation`` condition to hold; None: remove it."""
    resource_groups: list[dict[str, Any]] | None = None
    """The ClusterQueue's new ``spec.resourceGroups``; None: leave the spec as it is."""
    totals: Mapping[str, Quantity] = field(default_factory=dict)
    """What the counted workers give, by resource (for logs and tests)."""
    counted: tuple[str, ...] = ()
    """The workers whose quota was counted, in the config's order."""


def _quantity(raw: object) -> Quantity | None:
    if raw is None or not isinstance(raw, (str, int)):
        return None
    try:
        return Quantity.parse(raw)
    except QuantityError:
        return None


def _add(total: dict[str, Quantity], name: str, amount: Quantity) -> None:
    """Add as Kubernetes adds: the sum keeps the first form, unless that was a zero (then
    the form of what is added: 0 + 8Gi is 8Gi, not 8589934592)."""
    before = total.get(name)
    total[name] = amount if before is None else (before + amount if before else amount + before)


def worker_cluster_queues(worker: WorkerQueues, local_queues: Iterable[str]) -> list[str]:
    """The worker's ClusterQueues that count for a manager ClusterQueue whose LocalQueues are
    ``local_queues`` (``namespace/name``): those the worker's LocalQueues of the same keys
    point to, each once, in name order."""
    wanted = set(local_queues)
    return sorted({cq for key, cq in worker.local_queues.items() if key in wanted and cq})


def nominal_of(cluster_queue: Obj) -> dict[str, Quantity]:
    """A ClusterQueue's nominal quota by resource: every flavor of every group added up."""
    total: dict[str, Quantity] = {}
    for group in items(cluster_queue, "spec", "resourceGroups"):
        for flavor in group.get("flavors") or ():
            for res in flavor.get("resources") or ():
                amount = _quantity(res.get("nominalQuota"))
                if res.get("name") and amount is not None:
                    _add(total, str(res["name"]), amount)
    return total


def reserved_of(cluster_queue: Obj) -> dict[str, Quantity]:
    """What a ClusterQueue has reserved now, by resource (``status.flavorsReservation``)."""
    total: dict[str, Quantity] = {}
    for flavor in items(cluster_queue, "status", "flavorsReservation"):
        for res in flavor.get("resources") or ():
            amount = _quantity(res.get("total"))
            if res.get("name") and amount is not None:
                _add(total, str(res["name"]), amount)
    return total


def worker_share(worker: WorkerQueues, local_queues: Iterable[str]) -> dict[str, Quantity] | None:
    """What one worker gives the manager ClusterQueue, by resource; None when it does not
    count (not connected). A worker in maintenance gives what it has reserved, capped by its
    quota: its running work keeps its share, nothing new is promised there."""
    if not worker.connected:
        return None
    nominal: dict[str, Quantity] = {}
    reserved: dict[str, Quantity] = {}
    for name in worker_cluster_queues(worker, local_queues):
        cq = worker.cluster_queues.get(name)
        if cq is None:
            continue
        for res, amount in nominal_of(cq).items():
            _add(nominal, res, amount)
        for res, amount in reserved_of(cq).items():
            _add(reserved, res, amount)
    if not worker.maintenance:
        return nominal
    zero = Quantity.parse(0)
    return {res: min(amount, reserved.get(res, zero)) for res, amount in nominal.items()}


def sum_shares(shares: Iterable[Mapping[str, Quantity]]) -> dict[str, Quantity]:
    total: dict[str, Quantity] = {}
    for share in shares:
        for res, amount in share.items():
            _add(total, res, amount)
    return total


def _same_quota(current: Sequence[Any], wanted: Sequence[Mapping[str, Any]]) -> bool:
    """Is ``current`` (a flavor's ``resources``) already ``wanted``: the same names in the same
    order, the same quantities, and nothing else (no borrowing or lending limit)?"""
    if len(current) != len(wanted):
        return False
    for have, want in zip(current, wanted, strict=True):
        if not isinstance(have, Mapping) or set(have) != set(want):
            return False
        if have.get("name") != want["name"]:
            return False
        if _quantity(have.get("nominalQuota")) != _quantity(want["nominalQuota"]):
            return False
    return True


def decide(
    cluster_queue: Obj,
    *,
    federated: bool,
    config: Obj | None,
    local_queues: Iterable[str],
    workers: Sequence[WorkerQueues],
) -> Decision:
    """The decision for one manager ClusterQueue.

    ``federated``: it has a MultiKueue AdmissionCheck; ``config``: the MultiKueueConfig that
    check names (None: missing); ``local_queues``: ``namespace/name`` of the manager's
    LocalQueues pointing to it; ``workers``: the config's workers in its order (those the
    registry does not know given as not connected)."""
    if not federated:
        return Decision(None)
    if config is None:
        return Decision(Condition(False, REASON_UNSUPPORTED, MESSAGE_CONFIG_NOT_FOUND))
    if at(config, "spec").get("quotaManagement") != AUTOMATED:
        return Decision(Condition(False, REASON_NOT_REQUESTED, MESSAGE_NOT_REQUESTED))
    groups = items(cluster_queue, "spec", "resourceGroups")
    if len(groups) != 1 or len(groups[0].get("flavors") or ()) != 1:
        return Decision(Condition(False, REASON_UNSUPPORTED, MESSAGE_ONE_FLAVOR))
    group = groups[0]
    flavor = group["flavors"][0]
    keys = list(local_queues)
    shares = [(w.name, worker_share(w, keys)) for w in workers]
    counted = tuple(name for name, share in shares if share is not None)
    totals = sum_shares(share for _, share in shares if share is not None)
    covered = [str(r) for r in group.get("coveredResources") or ()]
    missing = sorted(set(totals) - set(covered))
    if missing:
        message = MESSAGE_MISSING_RESOURCES.format(" ".join(missing))
        return Decision(Condition(False, REASON_UNSUPPORTED, message), None, totals, counted)
    zero = Quantity.parse(0)
    wanted = [
        {"name": res, "nominalQuota": str(totals.get(res, zero).canonical())} for res in covered
    ]
    automated = Condition(True, REASON_AUTOMATED, MESSAGE_AUTOMATED)
    if _same_quota(flavor.get("resources") or (), wanted):
        return Decision(automated, None, totals, counted)
    new_flavor = {**flavor, "resources": wanted}
    new_group = {**group, "flavors": [new_flavor]}
    return Decision(automated, [new_group], totals, counted)
