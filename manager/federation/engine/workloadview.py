"""A Workload as people read it: its state, its flavors, where it runs, the dispatch decision
recorded on it, and one sentence on why it waits or why it runs where it runs.

The dashboard, ``kfed workloads`` and ``kfed explain`` all show these, so they say the same
thing in the same words. Pure: Workload dicts in, strings and small records out.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from manager.api import constants as C
from manager.api.view import annotations_of, items, labels_of
from manager.controllers import conditions
from manager.controllers import workloadstatus as ws
from manager.federation.settings import PLACEMENT_ANNOTATION

Obj = Mapping[str, Any]
Role = Literal["manager", "worker"]
"""Whose Workload it is: the manager's own, or a worker's copy (read by the worker shim)."""

PENDING, RESERVED, ADMITTED, FINISHED, EVICTED = (
    "Pending",
    "Reserved",
    "Admitted",
    "Finished",
    "Evicted",
)


def state_of(obj: Obj) -> str:
    """Finished, Evicted (and not back yet), Admitted, Reserved (quota held, checks pending)
    or Pending."""
    # One pass over the conditions (as ws.is_finished & co. decide): the dashboard runs it
    # for every workload on each refresh.
    status = ws.status_of(obj)
    true = {c.get("type") for c in status.get("conditions") or () if c.get("status") == "True"}
    if C.FINISHED in true:
        return FINISHED
    if C.EVICTED in true:
        return EVICTED
    if status.get("admission") and C.QUOTA_RESERVED in true:
        return ADMITTED if C.ADMITTED in true else RESERVED
    return PENDING


def flavors_of(obj: Obj) -> tuple[str, ...]:
    """The flavors of the admission, in order of first appearance."""
    found: list[str] = []
    for psa in items(obj, "status", "admission", "podSetAssignments"):
        for flavor in (psa.get("flavors") or {}).values():
            if str(flavor) not in found:
                found.append(str(flavor))
    return tuple(found)


def cluster_of(obj: Obj) -> str:
    """Where it runs (``status.clusterName``), else "X (nominated)" while it is being tried."""
    status = ws.status_of(obj)
    if status.get("clusterName"):
        return str(status["clusterName"])
    nominated = status.get("nominatedClusterNames") or []
    return f"{','.join(nominated)} (nominated)" if nominated else ""


@dataclass(frozen=True, slots=True)
class Placement:
    """The dispatch decision recorded on a manager Workload (``kfed.io/placement``)."""

    cluster: str
    reason: str
    rule: str
    candidates: tuple[str, ...]
    """Every worker considered, each as "name: why" (fits, or why not)."""
    at: str


def placement_of(obj: Obj) -> tuple[Placement | None, str | None]:
    """The recorded decision, or None with a note saying why it cannot be read (None when
    there is no decision at all)."""
    raw = annotations_of(obj).get(PLACEMENT_ANNOTATION)
    if not raw:
        return None, None
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except ValueError as err:
        return None, f"{PLACEMENT_ANNOTATION} is not readable JSON ({err})"
    at = data.get("at")
    when = (
        dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if isinstance(at, int | float)
        else str(at or "")
    )
    placement = Placement(
        cluster=str(data.get("cluster") or ""),
        reason=str(data.get("reason") or ""),
        rule=str(data.get("rule") or ""),
        candidates=tuple(str(c) for c in data.get("candidates") or []),
        at=when,
    )
    return placement, None


def why(
    obj: Obj,
    *,
    pending_reason: str | None = None,
    placement: Placement | None = None,
    role: Role = "manager",
) -> str:
    """One sentence: why it waits, or where it runs and why. ``pending_reason`` is the
    admission core's live answer when the caller has one; else the QuotaReserved message
    the controllers last wrote is used."""
    status = ws.status_of(obj)
    conds = status.get("conditions")
    where = str(status.get("clusterName") or "")
    current = state_of(obj)
    if current == FINISHED:
        finished = conditions.find(conds, C.FINISHED) or {}
        on = f" on {where}" if where else ""
        return f"finished{on} ({finished.get('reason', '')}): {finished.get('message', '')}"
    if current == EVICTED:
        evicted = conditions.find(conds, C.EVICTED) or {}
        return (
            f"evicted ({evicted.get('reason', '')}): {evicted.get('message', '')}; "
            "it goes back to its queue to be admitted and placed again"
        )
    if current == PENDING:
        if not ws.is_active(obj):
            return "deactivated (spec.active is false)"
        reserved = conditions.find(conds, C.QUOTA_RESERVED) or {}
        message = pending_reason or reserved.get("message")
        if message:
            return f"pending in its queue: {message}"
        return "pending in its queue: not considered by the admission loop yet"
    if current == RESERVED:
        for check in status.get("admissionChecks") or []:
            if check.get("state") != "Ready":
                return (
                    f"quota reserved; admission check {check.get('name')} is "
                    f"{check.get('state', 'Pending')}: {check.get('message') or 'no message yet'}"
                )
        return "quota reserved, being admitted"
    if where:
        if placement is not None and placement.cluster == where and placement.reason:
            return f"runs on {where}: {placement.reason}"
        return f"runs on {where}"
    if role == "worker":
        origin = labels_of(obj).get(C.MULTIKUEUE_ORIGIN_LABEL)
        return f"admitted here; placed by the manager of origin {origin}" if origin else "admitted"
    return "admitted on the manager (its queue has no MultiKueue check)"
