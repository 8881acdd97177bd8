"""metav1.Condition lists, edited the way Kubernetes controllers edit them: the transition
time moves only when the status flips, and a condition is replaced by type."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

Conditions = list[dict[str, Any]]


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def find(conditions: Conditions | None, kind: str) -> dict[str, Any] | None:
    for condition in conditions or ():
        if condition.get("type") == kind:
            return condition
    return None


def is_true(obj_or_status: Mapping[str, Any] | None, kind: str) -> bool:
    status = obj_or_status or {}
    if "status" in status and isinstance(status.get("status"), Mapping):
        status = status["status"]
    condition = find(status.get("conditions"), kind)
    return condition is not None and condition.get("status") == "True"


def set_condition(
    conditions: Conditions,
    kind: str,
    status: bool,
    reason: str,
    message: str,
    *,
    generation: int | None = None,
    now: str | None = None,
) -> bool:
    """Set a condition in ``conditions`` (the list is changed); returns False when nothing
    changed. The condition dicts themselves are never edited, only replaced: callers pass a
    copy of a list read from an informer cache, whose dicts are the cache's own, and an edit
    in place would change the cache and hide the change from the comparison that decides
    whether to write it."""
    value = "True" if status else "False"
    message = message[:32768]
    existing = find(conditions, kind)
    if existing is not None:
        if (
            existing.get("status") == value
            and existing.get("reason") == reason
            and existing.get("message") == message
            and (generation is None or existing.get("observedGeneration") == generation)
        ):
            return False
        updated = {**existing, "status": value, "reason": reason, "message": message}
        if existing.get("status") != value:
            updated["lastTransitionTime"] = now or now_rfc3339()
        if generation is not None:
            updated["observedGeneration"] = generation
        conditions[conditions.index(existing)] = updated
        return True
    condition: dict[str, Any] = {
        "type": kind,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now or now_rfc3339(),
    }
    if generation is not None:
        condition["observedGeneration"] = generation
    conditions.append(condition)
    return True


def remove(conditions: Conditions, kind: str) -> bool:
    before = len(conditions)
    conditions[:] = [c for c in conditions if c.get("type") != kind]
    return len(conditions) != before
