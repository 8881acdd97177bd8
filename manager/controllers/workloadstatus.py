"""Reading and writing Workload status the way Kueue does: the admission, the conditions
(QuotaReserved, Admitted, Evicted, Preempted, Requeued, Finished), admission check states and
the requeue state. Pure functions on JSON dicts; the controllers send what they return."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from manager import core
from manager.api import constants as C
from manager.api.view import annotations_of, at, items, labels_of
from manager.controllers import conditions, convert

Obj = dict[str, Any]


def key_of(obj: Mapping[str, Any]) -> str:
    meta = at(obj, "metadata")
    return f"{meta.get('namespace')}/{meta.get('name')}"


def status_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def has_reservation(obj: Mapping[str, Any]) -> bool:
    return bool(status_of(obj).get("admission")) and conditions.is_true(obj, C.QUOTA_RESERVED)


def cluster_queue_of(obj: Mapping[str, Any]) -> str:
    """The ClusterQueue holding the workload's reservation; empty while it holds none."""
    return str(at(status_of(obj), "admission").get("clusterQueue") or "")


def is_finished(obj: Mapping[str, Any]) -> bool:
    return conditions.is_true(obj, C.FINISHED)


def is_evicted(obj: Mapping[str, Any]) -> bool:
    return conditions.is_true(obj, C.EVICTED)


def is_admitted(obj: Mapping[str, Any]) -> bool:
    return conditions.is_true(obj, C.ADMITTED)


def is_active(obj: Mapping[str, Any]) -> bool:
    return at(obj, "spec").get("active", True) is not False


def parse_time(value: str | None) -> float | None:
    if not value:
        return None
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def format_time(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def creation_time(obj: Mapping[str, Any]) -> float:
    return parse_time(at(obj, "metadata").get("creationTimestamp")) or 0.0


def requeue_at(obj: Mapping[str, Any]) -> float | None:
    return parse_time(at(status_of(obj), "requeueState").get("requeueAt"))


def reservation_time(obj: Mapping[str, Any]) -> float | None:
    """When its quota was last reserved (or its QuotaReserved condition last changed)."""
    condition = conditions.find(status_of(obj).get("conditions"), C.QUOTA_RESERVED)
    return parse_time(condition.get("lastTransitionTime")) if condition else None


def eviction_time(obj: Mapping[str, Any]) -> float | None:
    """When it was last evicted (Kueue orders requeued workloads by it)."""
    condition = conditions.find(status_of(obj).get("conditions"), C.EVICTED)
    return parse_time(condition.get("lastTransitionTime")) if condition else None


def check_states(obj: Mapping[str, Any]) -> dict[str, str]:
    return {
        c["name"]: c.get("state", "Pending") for c in status_of(obj).get("admissionChecks") or []
    }


def workload_name_for(prefix: str, job_name: str, job_uid: str) -> str:
    """The Workload a job's controller creates for it: ``<prefix>-<name>-<uid[:5]>``, the
    prefix being upstream's lowercase kind; stable, unique per job incarnation."""
    return f"{prefix}-{job_name}"[:246] + f"-{job_uid[:5]}"


def workload_name_for_job(job_name: str, job_uid: str) -> str:
    """The Workload of a ``batch/v1`` Job."""
    return workload_name_for("job", job_name, job_uid)


def workload_key_for(job: Mapping[str, Any], prefix: str = "job") -> str:
    """The Workload of a job: the prebuilt one a MultiKueue manager named, else its own."""
    meta = at(job, "metadata")
    prebuilt = labels_of(job).get(C.PREBUILT_WORKLOAD_LABEL)
    name = prebuilt or workload_name_for(prefix, meta.get("name", ""), meta.get("uid", ""))
    return f"{meta.get('namespace')}/{name}"


def owner_kind(obj: Mapping[str, Any]) -> str:
    """The kind of job the workload was made for (its controller owner's kind: Job, JobSet,
    RayCluster...; "" for a Workload that no job owns)."""
    for ref in items(obj, "metadata", "ownerReferences"):
        if ref.get("controller"):
            return str(ref.get("kind") or "")
    return ""


def owner_job(obj: Mapping[str, Any]) -> str | None:
    """``namespace/name`` of the Job that owns this Workload, if one does."""
    meta = at(obj, "metadata")
    for ref in items(obj, "metadata", "ownerReferences"):
        if (
            ref.get("kind") == "Job"
            and ref.get("apiVersion") == "batch/v1"
            and ref.get("controller")
        ):
            return f"{meta.get('namespace')}/{ref.get('name')}"
    # A copy made by a MultiKueue manager: the Job (created later) names it, not the reverse.
    job_name = annotations_of(obj).get(C.JOB_NAME_ANNOTATION)
    if job_name and labels_of(obj).get(C.MULTIKUEUE_ORIGIN_LABEL):
        return f"{meta.get('namespace')}/{job_name}"
    return None


def _check_entries(names: list[str], previous: Mapping[str, Any] | None, now: str) -> list[Obj]:
    old = {c["name"]: c for c in (previous or {}).get("admissionChecks") or []}
    entries = []
    for name in names:
        entry = dict(
            old.get(name)
            or {"name": name, "state": "Pending", "message": "", "lastTransitionTime": now}
        )
        entries.append(entry)
    return entries


# -- the changes ---------------------------------------------------------------------------


def reserve(obj: Obj, admission: core.Admission, checks: list[str]) -> Obj | None:
    """Status patch for a quota reservation, or None if it no longer applies."""
    if (
        has_reservation(obj)
        or is_finished(obj)
        or not is_active(obj)
        or obj["metadata"].get("deletionTimestamp")
    ):
        return None
    now = conditions.now_rfc3339()
    status = status_of(obj)
    conds: conditions.Conditions = list(status.get("conditions") or [])
    cq = admission.cluster_queue
    conditions.set_condition(
        conds,
        C.QUOTA_RESERVED,
        True,
        C.REASON_QUOTA_RESERVED,
        f"Quota reserved in ClusterQueue {cq}",
        now=now,
    )
    for kind in (C.EVICTED, C.PREEMPTED):
        previous = conditions.find(conds, kind)
        if previous is not None and previous.get("status") == "True":
            conditions.set_condition(
                conds,
                kind,
                False,
                C.REASON_QUOTA_RESERVED,
                f"Previously: {previous.get('message', '')}",
                now=now,
            )
    entries = _check_entries(checks, status, now)
    if all(e.get("state") == "Ready" for e in entries):
        conditions.set_condition(
            conds, C.ADMITTED, True, C.REASON_ADMITTED, "The workload is admitted", now=now
        )
    patch: Obj = {
        "status": {"admission": convert.admission_to_status(admission), "conditions": conds}
    }
    if checks:
        patch["status"]["admissionChecks"] = entries
    return patch


def pending(obj: Obj, reason: core.PendingReason, *, fine: bool = False) -> Obj | None:
    """Why it waits, in QuotaReserved=False: upstream's default reasons (Pending,
    Inadmissible), or with ``fine`` v0.19's (WaitingForQuota, Misconfigured, ...)."""
    if has_reservation(obj) or is_finished(obj):
        return None
    conds: conditions.Conditions = list(status_of(obj).get("conditions") or [])
    if not conditions.set_condition(
        conds, C.QUOTA_RESERVED, False, reason.quota_reserved_reason(fine), reason.message
    ):
        return None
    return {"status": {"conditions": conds}}


def evict(
    obj: Obj, reason: str, message: str, *, preempted_reason: str | None = None
) -> Obj | None:
    if not has_reservation(obj) or is_finished(obj):
        return None
    conds: conditions.Conditions = list(status_of(obj).get("conditions") or [])
    changed = conditions.set_condition(conds, C.EVICTED, True, reason, message)
    if preempted_reason is not None:
        changed |= conditions.set_condition(conds, C.PREEMPTED, True, preempted_reason, message)
    return {"status": {"conditions": conds}} if changed else None


def release(obj: Obj, *, requeue_at: float | None, now: float, fine: bool = False) -> Obj | None:
    """After an eviction, once the job stopped: give the quota back and requeue. QuotaReserved
    goes False with upstream's reason for it: Pending, or with ``fine`` v0.19's
    PendingEvaluation."""
    if not has_reservation(obj):
        return None
    status = status_of(obj)
    conds: conditions.Conditions = list(status.get("conditions") or [])
    evicted = conditions.find(conds, C.EVICTED) or {}
    message = str(evicted.get("message") or "The workload was evicted")
    reason = str(evicted.get("reason") or C.REASON_EVICTED_BY_PREEMPTION)
    quota_reason = C.REASON_PENDING_EVALUATION if fine else C.REASON_PENDING
    conditions.set_condition(conds, C.QUOTA_RESERVED, False, quota_reason, message)
    conditions.set_condition(
        conds, C.ADMITTED, False, C.REASON_NO_RESERVATION, "The workload has no reservation"
    )
    if requeue_at is not None and requeue_at > now:
        conditions.set_condition(
            conds, C.REQUEUED, False, reason, f"Requeued after backoff at {format_time(requeue_at)}"
        )
    else:
        conditions.set_condition(
            conds, C.REQUEUED, True, reason, "The workload is back in its queue"
        )
    count = int(at(status, "requeueState").get("count") or 0) + 1
    requeue_state: Obj = {"count": count}
    if requeue_at is not None and requeue_at > now:
        requeue_state["requeueAt"] = format_time(requeue_at)
    now_s = format_time(now)
    checks = [
        {
            **c,
            "state": "Pending",
            "message": "Reset to Pending after eviction",
            "lastTransitionTime": now_s,
        }
        for c in status.get("admissionChecks") or []
    ]
    patch: Obj = {
        "status": {
            "admission": None,
            "conditions": conds,
            "requeueState": requeue_state,
            "clusterName": None,
            "nominatedClusterNames": None,
        }
    }
    if checks:
        patch["status"]["admissionChecks"] = checks
    return patch


def backoff_finished(obj: Obj) -> Obj | None:
    conds: conditions.Conditions = list(status_of(obj).get("conditions") or [])
    requeued = conditions.find(conds, C.REQUEUED)
    if requeued is None or requeued.get("status") == "True":
        return None
    conditions.set_condition(
        conds, C.REQUEUED, True, C.REASON_BACKOFF_FINISHED, "The workload backoff was finished"
    )
    return {"status": {"conditions": conds}}


def admit(obj: Obj) -> Obj | None:
    """Quota reserved and every check Ready: Admitted=True."""
    if not has_reservation(obj) or is_admitted(obj) or is_evicted(obj):
        return None
    if any(state != "Ready" for state in check_states(obj).values()):
        return None
    conds: conditions.Conditions = list(status_of(obj).get("conditions") or [])
    conditions.set_condition(conds, C.ADMITTED, True, C.REASON_ADMITTED, "The workload is admitted")
    return {"status": {"conditions": conds}}


def sync_checks(obj: Obj, checks: list[str]) -> Obj | None:
    """Make status.admissionChecks list exactly the ClusterQueue's checks (new ones Pending)."""
    if not has_reservation(obj):
        return None
    status = status_of(obj)
    entries = _check_entries(checks, status, conditions.now_rfc3339())
    if [e["name"] for e in entries] == [c["name"] for c in status.get("admissionChecks") or []]:
        return None
    return {"status": {"admissionChecks": entries}}


def finish(obj: Obj, succeeded: bool, message: str) -> Obj | None:
    if is_finished(obj):
        return None
    conds: conditions.Conditions = list(status_of(obj).get("conditions") or [])
    conditions.set_condition(
        conds, C.FINISHED, True, C.REASON_SUCCEEDED if succeeded else C.REASON_FAILED, message
    )
    return {"status": {"conditions": conds}}
