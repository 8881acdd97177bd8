"""The records the state gauges are set from (one per ClusterQueue, LocalQueue, worker), and
the label value types the metrics share. Plain data: the dashboard builds the same rows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Workload = Mapping[str, Any]
AdmissionResult = Literal["success", "inadmissible"]
FailoverReason = Literal["lost", "drain", "evicted", "retry"]
"""Why a workload left a worker: the worker was lost (and fenced), is draining, evicted the
copy (or the copy vanished), or did not admit it in time (the next candidate is tried)."""
QueueStatus = Literal["pending", "active", "terminating"]
Maintenance = Literal["", "cordon", "drain"]
ReplicaRole = Literal["leader", "follower", "standalone"]
"""Upstream's ``replica_role`` values (``pkg/util/roletracker``)."""
ACTIVE_STATUSES = ("True", "False", "Unknown")
"""The values of ``multikueue_cluster_status``'s and ``kueue_local_queue_status``'s ``active``
label, as upstream Kueue has them."""


@dataclass(frozen=True, slots=True)
class QuotaSample:
    """One (flavor, resource) of a ClusterQueue, in natural units (cores, bytes, devices)."""

    flavor: str
    resource: str
    nominal: float
    usage: float
    """Held by admitted workloads (Kueue's ``flavorsUsage``)."""
    borrowing_limit: float | None = None
    reserved: float = 0.0
    """Held by every workload with a reservation (Kueue's ``flavorsReservation``)."""
    lending_limit: float | None = None


@dataclass(frozen=True, slots=True)
class ClusterQueueSample:
    name: str
    cohort: str
    status: QueueStatus
    pending_active: int
    pending_inadmissible: int
    reserving: int
    admitted: int
    quotas: tuple[QuotaSample, ...] = ()
    finished: int = 0
    """Finished Workload objects of this queue that still exist (``kueue_finished_workloads``)."""
    weighted_share: float | None = None
    """With fair sharing on, the queue's weighted share; None: not reported."""
    cohorts: tuple[str, ...] = ()
    """Its cohort and that cohort's ancestors, nearest first (() : just ``cohort``)."""


@dataclass(frozen=True, slots=True)
class LocalQueueUsageSample:
    flavor: str
    resource: str
    reserved: float
    usage: float


@dataclass(frozen=True, slots=True)
class LocalQueueSample:
    namespace: str
    name: str
    active: str
    """Its Active condition's status: "True", "False" or "Unknown"."""
    pending_active: int
    pending_inadmissible: int
    reserving: int
    admitted: int
    finished: int = 0
    usage: tuple[LocalQueueUsageSample, ...] = ()


@dataclass(frozen=True, slots=True)
class WorkerClusterSample:
    name: str
    active: bool
    maintenance: str
    """The ``kfed.io/maintenance`` annotation: "", "cordon" or "drain"."""
    free: Mapping[tuple[str, str], float] = field(default_factory=dict)
    """(flavor, resource) -> free quota in natural units; empty while not connected."""
    credentials_expire_at: float | None = None
    """Unix time its kubeconfig's token or client certificate expires, when it can be read."""
