"""The dashboard's and the queue gauges' rows for ClusterQueues, cohorts and LocalQueues:
each derived by a pure function of the objects it reads and the admission core's view.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from manager import core
from manager.api import constants as C
from manager.api import quantity
from manager.api.view import at, items
from manager.controllers import conditions
from manager.controllers import workloadstatus as ws
from manager.controllers.state import ClusterState, cohort_path
from manager.observability.units import human, natural
from manager.telemetry.metrics import (
    ClusterQueueSample,
    LocalQueueSample,
    LocalQueueUsageSample,
    QueueStatus,
    QuotaSample,
)

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Quota:
    """One (flavor, resource) of a ClusterQueue, in core units."""

    flavor: str
    resource: str
    nominal: int
    reserved: int
    """Held by every workload with a reservation (``flavorsReservation``)."""
    usage: int
    """Held by admitted workloads only (``flavorsUsage``)."""
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class QueueRow:
    name: str
    cohort: str
    status: QueueStatus
    message: str
    pending_active: int
    pending_inadmissible: int
    reserving: int
    admitted: int
    quotas: tuple[Quota, ...] = ()
    finished: int = 0
    """Finished Workload objects of the queue that still exist (for the metrics)."""
    weighted_share: float | None = None
    """With fair sharing on, the core's weighted share of the queue (for the metrics)."""
    cohorts: tuple[str, ...] = ()
    """Its cohort and that cohort's ancestors, nearest first (for the metrics)."""

    def sample(self) -> ClusterQueueSample:
        return ClusterQueueSample(
            name=self.name,
            cohort=self.cohort,
            status=self.status,
            pending_active=self.pending_active,
            pending_inadmissible=self.pending_inadmissible,
            reserving=self.reserving,
            admitted=self.admitted,
            quotas=tuple(
                QuotaSample(
                    q.flavor,
                    q.resource,
                    nominal=natural(q.resource, q.nominal),
                    usage=natural(q.resource, q.usage),
                    borrowing_limit=None
                    if q.borrowing_limit is None
                    else natural(q.resource, q.borrowing_limit),
                    reserved=natural(q.resource, q.reserved),
                    lending_limit=None
                    if q.lending_limit is None
                    else natural(q.resource, q.lending_limit),
                )
                for q in self.quotas
            ),
            finished=self.finished,
            weighted_share=self.weighted_share,
            cohorts=self.cohorts,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "cohort": self.cohort,
            "status": self.status,
            "message": self.message,
            "pending_active": self.pending_active,
            "pending_inadmissible": self.pending_inadmissible,
            "reserving": self.reserving,
            "admitted": self.admitted,
            "quotas": [
                {
                    "flavor": q.flavor,
                    "resource": q.resource,
                    "nominal": human(q.resource, q.nominal),
                    "reserved": human(q.resource, q.reserved),
                    "usage": human(q.resource, q.usage),
                    "borrowing_limit": None
                    if q.borrowing_limit is None
                    else human(q.resource, q.borrowing_limit),
                }
                for q in self.quotas
            ],
        }


def _units(resource: str, raw: Any) -> int:
    """A quantity of a spec in core units; 0 for one the apiserver should not have let in
    (the queue is then reported invalid anyway): one bad spec never breaks a scrape."""
    try:
        return quantity.to_core_units(resource, raw)
    except ValueError:
        return 0


def _totals(flavors: tuple[core.FlavorUsage, ...]) -> dict[tuple[str, str], int]:
    return {(f.name, r.name): r.total for f in flavors for r in f.resources}


def queue_row(
    obj: Obj,
    view: core.ClusterQueueStatus | None,
    *,
    pending: tuple[int, int] = (0, 0),
    invalid: str | None = None,
) -> QueueRow:
    """A ClusterQueue as the dashboard and the gauges show it: its spec (cohort, quotas),
    the core's view of it (counts, usage) and whether it can admit."""
    meta, spec = at(obj, "metadata"), at(obj, "spec")
    active_condition = conditions.find(at(obj, "status").get("conditions"), C.ACTIVE)
    status: QueueStatus
    if meta.get("deletionTimestamp"):
        status, message = "terminating", "being deleted"
    elif invalid:
        status, message = "pending", invalid
    elif view is None:
        status, message = "pending", "not known to the admission core yet"
    elif not view.active:
        status, message = "pending", view.message
    elif active_condition is not None and active_condition.get("status") == "False":
        status, message = "pending", str(active_condition.get("message") or "")
    else:
        status, message = "active", view.message
    reserved = _totals(view.flavors_reservation) if view else {}
    used = _totals(view.flavors_usage) if view else {}
    quotas = []
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for r in flavor.get("resources") or []:
                name, key = str(r["name"]), (str(flavor["name"]), str(r["name"]))
                limit = r.get("borrowingLimit")
                lending = r.get("lendingLimit")
                quotas.append(
                    Quota(
                        flavor=key[0],
                        resource=name,
                        nominal=_units(name, r.get("nominalQuota", 0)),
                        reserved=reserved.get(key, 0),
                        usage=used.get(key, 0),
                        borrowing_limit=None if limit is None else _units(name, limit),
                        lending_limit=None if lending is None else _units(name, lending),
                    )
                )
    return QueueRow(
        name=str(meta.get("name", "")),
        cohort=str(spec.get("cohortName") or ""),
        status=status,
        message=message,
        pending_active=pending[0],
        pending_inadmissible=pending[1],
        reserving=view.reserving if view else 0,
        admitted=view.admitted if view else 0,
        quotas=tuple(quotas),
    )


def queue_rows(state: ClusterState) -> list[QueueRow]:
    rows = []
    finished, _ = finished_counts(state)
    parents = state.cohort_parents()
    fair = state.core.fair_sharing is not None
    for obj in state.cluster_queues.items():
        name = core.ClusterQueueName(str(obj["metadata"]["name"]))
        view = state.core.cluster_queue_status(name)
        row = queue_row(
            obj,
            view,
            pending=state.core.pending_counts(name),
            invalid=state.invalid.get(f"ClusterQueue/{name}"),
        )
        rows.append(
            dataclasses.replace(
                row,
                finished=finished.get(name, 0),
                weighted_share=view.weighted_share if fair and view is not None else None,
                cohorts=cohort_path(row.cohort, parents),
            )
        )
    return sorted(rows, key=lambda r: r.name)


def finished_counts(state: ClusterState) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
    """Finished Workload objects that still exist, per ClusterQueue (the one that held their
    quota) and per (LocalQueue, namespace): upstream's ``kueue_finished_workloads`` and
    ``kueue_local_queue_finished_workloads``."""
    by_cq: dict[str, int] = {}
    by_lq: dict[tuple[str, str], int] = {}
    for obj in state.workloads.items():
        if not ws.is_finished(obj):
            continue
        if cq := ws.cluster_queue_of(obj):
            by_cq[cq] = by_cq.get(cq, 0) + 1
        queue = at(obj, "spec").get("queueName")
        namespace = at(obj, "metadata").get("namespace")
        if queue and namespace:
            key = (str(queue), str(namespace))
            by_lq[key] = by_lq.get(key, 0) + 1
    return by_cq, by_lq


def cohort_quotas(state: ClusterState) -> dict[str, dict[tuple[str, str], float]]:
    """The nominal quotas a Cohort object holds itself (its ``resourceGroups``), per
    (flavor, resource), natural units, added to every ancestor's subtree as well."""
    parents = state.cohort_parents()
    result: dict[str, dict[tuple[str, str], float]] = {}
    for obj in state.cohorts.items():
        own: dict[tuple[str, str], float] = {}
        for group in items(obj, "spec", "resourceGroups"):
            for flavor in items(group, "flavors"):
                for r in items(flavor, "resources"):
                    name = str(r["name"])
                    units = _units(name, r.get("nominalQuota", 0))
                    own[(str(flavor["name"]), name)] = natural(name, units)
        for cohort in cohort_path(str(obj["metadata"]["name"]), parents):
            into = result.setdefault(cohort, {})
            for key, value in own.items():
                into[key] = into.get(key, 0.0) + value
    return result


def local_queue_samples(state: ClusterState) -> list[LocalQueueSample]:
    """Every LocalQueue as upstream's ``kueue_local_queue_*`` gauges report it. Its pending
    workloads count as inadmissible while it cannot admit (stopped, its ClusterQueue missing
    or inactive), else as active."""
    _, finished = finished_counts(state)
    samples = []
    for obj in state.local_queues.items():
        meta = at(obj, "metadata")
        name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
        view = state.core.local_queue_status(core.local_queue_key(namespace, name))
        if view is None:
            samples.append(LocalQueueSample(namespace, name, "Unknown", 0, 0, 0, 0))
            continue
        reserved = _totals(view.flavors_reservation)
        used = _totals(view.flavors_usage)
        samples.append(
            LocalQueueSample(
                namespace=namespace,
                name=name,
                active="True" if view.active else "False",
                pending_active=view.pending if view.active else 0,
                pending_inadmissible=0 if view.active else view.pending,
                reserving=view.reserving,
                admitted=view.admitted,
                finished=finished.get((name, namespace), 0),
                usage=tuple(
                    LocalQueueUsageSample(
                        flavor,
                        resource,
                        reserved=natural(resource, reserved.get((flavor, resource), 0)),
                        usage=natural(resource, used.get((flavor, resource), 0)),
                    )
                    for flavor, resource in sorted(set(reserved) | set(used))
                ),
            )
        )
    return sorted(samples, key=lambda s: (s.namespace, s.name))
