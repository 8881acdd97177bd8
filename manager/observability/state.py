"""What the dashboard shows, and what the state gauges are set from: plain rows built from a
process's in-memory views (informer caches, the admission core, the worker registry).

Each row is derived by a pure function of the objects it reads (``queuerows.queue_row``,
``workloadrows.workload_row``), so the derivations can be checked on hand-made inputs;
``queue_rows``, ``workload_rows`` and ``cluster_rows`` walk the live views of a process.
This module holds what one refresh shows (``Snapshot``) and ``to_json``, the
``/dashboard/state.json`` document.

The rows live by what they show: ``queuerows`` (ClusterQueues, cohorts, LocalQueues),
``workloadrows``, ``clusterrows`` (workers); ``units`` formats their quantities.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from manager.federation.engine.workloadview import Role
from manager.observability.clusterrows import ClusterRow
from manager.observability.queuerows import QueueRow
from manager.observability.workloadrows import WorkloadList


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
