"""What the dashboard shows, and what the state gauges are set from: plain rows built from a
process's in-memory views (informer caches, the admission core, the worker registry).

Each row is derived by a pure function of the objects it reads (``queue_row``,
``workload_row``), so the derivations can be checked on hand-made inputs; ``queue_rows``,
``workload_rows`` and ``cluster_rows`` walk the live views of a process; ``to_json`` is the
``/dashboard/state.json`` document.

A workload's *reason* answers the question a person has about it: why it waits (the core's
pending reason, the one ``kfed explain`` shows, live rather than as last written), why it is
not admitted yet (its waiting admission check, e.g. "no worker can admit it now: ..."), or
why it runs where it runs (the dispatch decision recorded in ``kfed.io/placement``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from manager import core
from manager.api import constants as C
from manager.api import federated, quantity
from manager.api.view import at, items
from manager.controllers import conditions
from manager.controllers import workloadstatus as ws
from manager.controllers.state import ClusterState
from manager.federation import visibility
from manager.federation.decisions import capacity
from manager.federation.engine.workloadview import (
    FINISHED,
    Placement,
    Role,
    cluster_of,
    flavors_of,
    placement_of,
    state_of,
    why,
)
from manager.federation.runtime import FederationController
from manager.federation.workers import credentials, kubeconfig
from manager.telemetry.metrics import (
    ClusterQueueSample,
    LocalQueueSample,
    LocalQueueUsageSample,
    QueueStatus,
    QuotaSample,
    WorkerClusterSample,
)

Obj = Mapping[str, Any]
MAX_WORKLOADS = 500
"""Rows sent to the page: unfinished workloads first; the counts always cover every one."""


def natural(resource: str, units: int) -> float:
    """Core units (milli-cores, bytes, devices) as Prometheus wants them: cores, bytes, devices."""
    return float(quantity.from_core_units(resource, units).value)


def human(resource: str, units: int) -> str:
    return quantity.from_core_units(resource, units).canonical()


def human_age(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 2 * 86400:
        return f"{s // 3600}h{(s % 3600) // 60}m"
    return f"{s // 86400}d"


# -- queues ---------------------------------------------------------------------------------


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
    parents = cohort_parents(state)
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


def cohort_parents(state: ClusterState) -> dict[str, str]:
    """Cohort -> its parent cohort (``spec.parentName``), for the cohorts that name one."""
    parents = {}
    for obj in state.cohorts.items():
        parent = at(obj, "spec").get("parentName")
        if parent:
            parents[str(obj["metadata"]["name"])] = str(parent)
    return parents


def cohort_path(cohort: str, parents: Mapping[str, str]) -> tuple[str, ...]:
    """A cohort and its ancestors, nearest first (a cycle, which the core reports as
    invalid, is cut where it closes)."""
    path: list[str] = []
    node = cohort
    while node and node not in path:
        path.append(node)
        node = parents.get(node, "")
    return tuple(path)


def cohort_quotas(state: ClusterState) -> dict[str, dict[tuple[str, str], float]]:
    """The nominal quotas a Cohort object holds itself (its ``resourceGroups``), per
    (flavor, resource), natural units, added to every ancestor's subtree as well."""
    parents = cohort_parents(state)
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


# -- workloads ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkloadRow:
    namespace: str
    name: str
    kind: str
    """The kind of job it was made for (``workloadview.kind_of``)."""
    queue: str
    cluster_queue: str
    flavors: tuple[str, ...]
    cluster: str
    """Where it runs (``status.clusterName``), or "X (nominated)" while being placed."""
    state: str
    created: float
    reason: str
    placement: Placement | None = None
    position_in_cluster_queue: int | None = None
    position_in_local_queue: int | None = None
    """A pending workload's place in line, from 0, as Kueue's visibility API counts it."""
    in_line: str = ""
    """The same for people: "in line: 3rd in gpu-cq, 1st in gpu-lq"."""

    def to_json(self, now: float) -> dict[str, Any]:
        data = asdict(self)
        data["flavors"] = list(self.flavors)
        data["age"] = human_age(now - self.created) if self.created else ""
        if self.placement is not None:
            data["placement"]["candidates"] = list(self.placement.candidates)
        return data


def workload_row(
    obj: Obj,
    *,
    pending_reason: str | None = None,
    role: Role = "manager",
    position: tuple[str, int, int] | None = None,
) -> WorkloadRow:
    """A Workload as the dashboard lists it; ``pending_reason`` is the core's live answer to
    "why does it wait?" (None when the core has none)."""
    meta, spec = at(obj, "metadata"), at(obj, "spec")
    placement, _ = placement_of(obj)  # an unreadable decision is left out
    return WorkloadRow(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        kind=ws.owner_kind(obj),
        queue=str(spec.get("queueName") or ""),
        cluster_queue=ws.cluster_queue_of(obj),
        flavors=flavors_of(obj),
        cluster=cluster_of(obj),
        state=state_of(obj),
        created=ws.creation_time(obj),
        reason=why(obj, pending_reason=pending_reason, placement=placement, role=role),
        placement=placement,
        position_in_cluster_queue=position[1] if position else None,
        position_in_local_queue=position[2] if position else None,
        in_line=(
            f"in line: {visibility.ordinal(position[1] + 1)} in {position[0]}, "
            f"{visibility.ordinal(position[2] + 1)} in {spec.get('queueName') or ''}"
            if position
            else ""
        ),
    )


@dataclass(frozen=True, slots=True)
class WorkloadList:
    rows: list[WorkloadRow]
    total: int
    by_state: dict[str, int]


def workload_rows(state: ClusterState, *, role: Role, limit: int = MAX_WORKLOADS) -> WorkloadList:
    """The first ``limit`` workloads (unfinished first, then by namespace/name) as rows,
    and counts by state over all of them. Only the rows shown are derived in full, so a
    refresh stays cheap with tens of thousands of workloads."""
    by_state: dict[str, int] = {}
    order: list[tuple[bool, str]] = []  # (finished, "namespace/name"): atoms only, cheap to sort
    cache = state.workloads.cache
    for key, obj in cache.items():
        current = state_of(obj)
        by_state[current] = by_state.get(current, 0) + 1
        order.append((current == FINISHED, key))
    order.sort()
    rows = []
    lines: dict[str, dict[str, tuple[int, int]]] = {}  # ClusterQueue -> its positions
    for _, key in order[:limit]:
        reason = state.core.pending_reason(core.WorkloadKey(key))
        unusable = state.invalid.get(f"Workload/{key}")
        position = None
        if reason is not None:
            cluster_queue = state.queued_cluster_queue(cache[key])
            if cluster_queue not in lines:
                lines[cluster_queue] = visibility.positions(state, cluster_queue)
            found = lines[cluster_queue].get(key)
            position = (cluster_queue, *found) if found else None
        rows.append(
            workload_row(
                cache[key],
                pending_reason=f"not usable: {unusable}"
                if unusable
                else reason.message
                if reason
                else None,
                role=role,
                position=position,
            )
        )
    return WorkloadList(rows, len(order), by_state)


# -- worker clusters ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClusterRow:
    name: str
    active: bool
    reason: str
    message: str
    maintenance: str
    """The ``kfed.io/maintenance`` annotation: "", "cordon" or "drain"."""
    can_fence: bool
    free: Mapping[tuple[str, str], int] | None
    """(flavor, resource) -> free quota in core units; None while not connected."""
    placing: int = 0
    """Copies sent there and not admitted yet."""
    running: int = 0
    """Manager workloads placed there and not finished."""
    credentials_expire_at: float | None = None
    """Unix time its kubeconfig's token or client certificate expires, when known."""
    credentials: str = ""
    """That, for a person (with the time left); "" when unknown."""
    credentials_expiring: bool = False
    """Within the manager's ``--credentials-warning`` (or past it)."""
    shim_mode: str | None = None
    """The shim's mode there: "admit", "fence-only" (upstream Kueue admits), None: none seen."""

    def sample(self) -> WorkerClusterSample:
        return WorkerClusterSample(
            name=self.name,
            active=self.active,
            maintenance=self.maintenance,
            free={k: natural(k[1], v) for k, v in (self.free or {}).items()},
            credentials_expire_at=self.credentials_expire_at,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "active": self.active,
            "reason": self.reason,
            "message": self.message,
            "maintenance": self.maintenance,
            "can_fence": self.can_fence,
            "shim_mode": self.shim_mode,
            "free": None
            if self.free is None
            else [
                {"flavor": f, "resource": r, "free": human(r, v)}
                for (f, r), v in sorted(self.free.items())
            ],
            "placing": self.placing,
            "running": self.running,
            "credentials": self.credentials,
            "credentials_expiring": self.credentials_expiring,
        }


def multikueue_cluster_samples(federation: FederationController) -> list[tuple[str, str, str]]:
    """(manager ClusterQueue, worker, its MultiKueueCluster's Active status) for every worker
    the ClusterQueue's MultiKueue check lists, as upstream's ``multikueue_cluster_status``
    reports them: "Unknown" before the condition is set; a listed cluster without a
    MultiKueueCluster object is left out (the AdmissionCheck reports it missing)."""
    registry = federation.registry
    samples = []
    for cq in federation.manager.state.cluster_queues.items():
        name = cq["metadata"]["name"]
        federated = federation.dispatcher.federation_of(name)
        for cluster in federated[1] if federated else []:
            mk = registry.mk_clusters.get(cluster)
            if mk is None:
                continue
            condition = conditions.find(at(mk, "status").get("conditions"), C.ACTIVE)
            samples.append((name, cluster, str((condition or {}).get("status") or "Unknown")))
    return samples


def cluster_rows(federation: FederationController) -> list[ClusterRow]:
    registry, dispatcher = federation.registry, federation.dispatcher
    running: dict[str, int] = {}
    for obj in federation.manager.state.workloads.items():
        where = ws.status_of(obj).get("clusterName")
        if where and not ws.is_finished(obj):
            running[str(where)] = running.get(str(where), 0) + 1
    rows = []
    names = sorted(
        {*registry.clusters, *(o["metadata"]["name"] for o in registry.mk_clusters.items())}
    )
    for name in names:
        entry = registry.clusters.get(name)
        if entry is None:
            active, reason, message = False, C.REASON_CLIENT_CONNECTION_FAILED, "Not started yet"
        else:
            active, reason, message = entry.condition()
        remote = entry.remote if entry is not None else None
        mk = registry.mk_clusters.get(name) or {}
        expiry = entry.expiry if entry is not None else None
        now = dt.datetime.now(dt.UTC)
        warn = dt.timedelta(seconds=federation.settings.credentials_warning)
        rows.append(
            ClusterRow(
                name=name,
                active=active,
                reason=reason,
                message=kubeconfig.redact_text(message),
                maintenance=federated.maintenance_of(mk),
                can_fence=remote.can_fence if remote is not None else False,
                shim_mode=remote.shim_mode if remote is not None else None,
                free=capacity.free_quota(dispatcher.worker_view(remote, 0))
                if remote is not None and remote.connected
                else None,
                placing=sum(1 for _, p in dispatcher.records.placements() if p.cluster == name),
                running=running.get(name, 0),
                credentials_expire_at=expiry.at.timestamp() if expiry else None,
                credentials=credentials.describe(name, expiry, now) if expiry else "",
                credentials_expiring=credentials.expiring(expiry, now, warn),
            )
        )
    return rows


def is_gpu(resource: str) -> bool:
    """nvidia.com/gpu, amd.com/gpu, gpu.intel.com/i915 and the like."""
    return "gpu" in resource.split("/")[-1] or resource.startswith("gpu.")


def gpus_reserved(federation: FederationController) -> dict[str, float]:
    """ "worker / flavor" -> GPUs reserved in the ClusterQueues of each connected worker, as
    the worker reports them (``status.flavorsReservation``)."""
    reserved: dict[str, float] = {}
    dispatcher = federation.dispatcher
    for remote in federation.registry.active():
        view = dispatcher.worker_view(remote, 0)
        for cq_name, cq in view.cluster_queues.items():
            for line in capacity.quota_lines(cq_name, cq):
                if is_gpu(line.resource):
                    key = f"{remote.name} / {line.flavor}"
                    reserved[key] = reserved.get(key, 0.0) + natural(line.resource, line.reserved)
    return reserved


# -- the document ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one refresh of the dashboard shows."""

    role: Role
    identity: str
    ready: bool
    ready_reason: str
    is_leader: bool
    leader: str | None
    """Who leads (manager replicas), when known."""
    clusters: list[ClusterRow] = field(default_factory=list)
    queues: list[QueueRow] = field(default_factory=list)
    workloads: WorkloadList = field(default_factory=lambda: WorkloadList([], 0, {}))


def to_json(snapshot: Snapshot, *, now: float) -> dict[str, Any]:
    return {
        "role": snapshot.role,
        "identity": snapshot.identity,
        "ready": snapshot.ready,
        "ready_reason": snapshot.ready_reason,
        "is_leader": snapshot.is_leader,
        "leader": snapshot.leader,
        "generated_at": dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "clusters": [c.to_json() for c in snapshot.clusters],
        "queues": [q.to_json() for q in snapshot.queues],
        "workloads": [w.to_json(now) for w in snapshot.workloads.rows],
        "workloads_total": snapshot.workloads.total,
        "workloads_by_state": snapshot.workloads.by_state,
    }
