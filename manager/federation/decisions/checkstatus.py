"""The MultiKueue admission check on a manager Workload: its state (Pending, Ready, Retry),
message, and the placement fields ``clusterName`` and ``nominatedClusterNames``."""

from __future__ import annotations

from typing import Any

from manager.controllers import conditions
from manager.controllers import workloadstatus as ws

Obj = dict[str, Any]


def check_state(obj: Obj, check: str) -> tuple[str, str]:
    for entry in ws.status_of(obj).get("admissionChecks") or []:
        if entry.get("name") == check:
            return str(entry.get("state", "Pending")), str(entry.get("message", ""))
    return "Pending", ""


def set_check(
    obj: Obj,
    check: str,
    state: str,
    message: str,
    *,
    cluster_name: str | None = None,
    nominated: list[str] | None = None,
) -> Obj | None:
    """Status patch setting the check (and placement fields), or None if nothing changes or
    the workload no longer holds quota."""
    if not ws.has_reservation(obj) or ws.is_finished(obj):
        return None
    status = ws.status_of(obj)
    entries = [dict(e) for e in status.get("admissionChecks") or []]
    entry = next((e for e in entries if e.get("name") == check), None)
    if entry is None:
        entry = {
            "name": check,
            "state": "Pending",
            "message": "",
            "lastTransitionTime": conditions.now_rfc3339(),
        }
        entries.append(entry)
    message = message[:32768]
    patch: Obj = {}
    if entry.get("state") != state or entry.get("message") != message:
        if entry.get("state") != state:
            entry["lastTransitionTime"] = conditions.now_rfc3339()
        entry.update(state=state, message=message)
        patch["admissionChecks"] = entries
    if cluster_name is not None and status.get("clusterName") != cluster_name:
        patch["clusterName"] = cluster_name
        if status.get("nominatedClusterNames"):
            patch["nominatedClusterNames"] = None  # the API forbids both at once
    if nominated is not None and (status.get("nominatedClusterNames") or []) != nominated:
        patch["nominatedClusterNames"] = nominated or None
    return {"status": patch} if patch else None


def ready_and_admitted(obj: Obj, check: str, message: str, *, cluster_name: str) -> Obj | None:
    """Status patch setting the check Ready on ``cluster_name`` and, when that makes every
    check Ready, ``Admitted`` too: one write where Kueue's controllers make two (the check's
    controller, then the Workload controller admitting), the Workload controller then finding
    nothing left to write."""
    patch = set_check(obj, check, "Ready", message, cluster_name=cluster_name)
    if patch is None:
        return None
    after = dict(ws.status_of(obj))
    after.update({k: v for k, v in patch["status"].items() if v is not None})
    admitted = ws.admit({**obj, "status": after})
    if admitted is not None:
        patch["status"]["conditions"] = admitted["status"]["conditions"]
    return patch


def check_active(
    config: str, config_found: bool, clusters: list[str], up: set[str], registered: set[str]
) -> tuple[bool, str, str]:
    """An AdmissionCheck's Active condition, as upstream reports it: (status, reason,
    message) from its MultiKueueConfig ``config`` (found or not), the config's ``clusters``,
    those connected (``up``) and those with a MultiKueueCluster (``registered``)."""
    if not config or not config_found:
        return False, "BadConfig", f"MultiKueueConfig {config!r} not found"
    missing = [n for n in clusters if n not in registered]
    down = [n for n in clusters if n not in up and n not in missing]
    if not [n for n in clusters if n in up]:
        active, reason = False, "NoUsableClusters"
    elif down or missing:
        active, reason = True, "SomeActiveClusters"
    else:
        active, reason = True, "Active"
    parts = []
    if missing:
        parts.append(f"Missing clusters: {missing}")
    if down:
        parts.append(f"Inactive clusters: {down}")
    return active, reason, ", ".join(parts) or "The admission check is active"
