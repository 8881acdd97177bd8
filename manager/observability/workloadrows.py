"""The dashboard's workload rows. A workload's *reason* answers the question a person has
about it: why it waits (the core's pending reason, the one ``kfed explain`` shows, live
rather than as last written), why it is not admitted yet (its waiting admission check), or
why it runs where it runs (the dispatch decision recorded in ``kfed.io/placement``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from manager import core
from manager.api.view import at
from manager.controllers import workloadstatus as ws
from manager.controllers.state import ClusterState
from manager.federation import visibility
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
from manager.observability.units import human_age

Obj = Mapping[str, Any]
MAX_WORKLOADS = 500
"""Rows sent to the page: unfinished workloads first; the counts always cover every one."""


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
