"""Reading manager Workloads for people: one row per workload (queue, flavors, cluster,
state, age) and, for one workload, the answer to "why is it pending?" or "why does it run
there?" from its conditions, admission checks and the recorded dispatch decision
(``kfed.io/placement``)."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

from manager.api import constants as C
from manager.cli.common import CliError
from manager.cli.tables import age
from manager.controllers import conditions, jobs
from manager.controllers import workloadstatus as ws
from manager.federation.settings import PLACEMENT_ANNOTATION
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]

PENDING, RESERVED, ADMITTED, FINISHED, EVICTED = (
    "Pending",
    "Reserved",
    "Admitted",
    "Finished",
    "Evicted",
)


def state(workload: Obj) -> str:
    """Finished, Evicted (and not yet back), Admitted, Reserved (quota held, checks pending)
    or Pending."""
    if ws.is_finished(workload):
        return FINISHED
    if ws.is_evicted(workload):
        return EVICTED
    if ws.is_admitted(workload) and ws.has_reservation(workload):
        return ADMITTED
    if ws.has_reservation(workload):
        return RESERVED
    return PENDING


def flavors(workload: Obj) -> list[str]:
    """The flavors of the admission, in order of first appearance."""
    found: list[str] = []
    admission = ws.status_of(workload).get("admission") or {}
    for psa in admission.get("podSetAssignments") or []:
        for flavor in (psa.get("flavors") or {}).values():
            if flavor not in found:
                found.append(str(flavor))
    return found


def cluster(workload: Obj) -> str:
    """Where it runs (``status.clusterName``), else where it is being tried (nominated)."""
    status = ws.status_of(workload)
    if status.get("clusterName"):
        return str(status["clusterName"])
    nominated = status.get("nominatedClusterNames") or []
    return f"{','.join(nominated)} (nominated)" if nominated else ""


@dataclass(frozen=True, slots=True)
class WorkloadRow:
    namespace: str
    name: str
    queue: str
    flavors: str
    cluster: str
    state: str
    age: str


def workload_rows(items: list[Obj], *, now: float) -> list[WorkloadRow]:
    rows = []
    for wl in sorted(items, key=lambda w: (w["metadata"]["namespace"], w["metadata"]["name"])):
        meta = wl["metadata"]
        rows.append(
            WorkloadRow(
                namespace=str(meta["namespace"]),
                name=str(meta["name"]),
                queue=str((wl.get("spec") or {}).get("queueName") or ""),
                flavors=",".join(flavors(wl)),
                cluster=cluster(wl),
                state=state(wl),
                age=age(now - ws.creation_time(wl)) if meta.get("creationTimestamp") else "",
            )
        )
    return rows


async def list_workloads(api: KubeApi, namespace: str | None, *, now: float) -> list[WorkloadRow]:
    return workload_rows((await api.list(R.WORKLOADS, namespace))["items"], now=now)


# -- explain ---------------------------------------------------------------------------------


async def resolve(api: KubeApi, namespace: str, name: str) -> tuple[Obj, Obj | None]:
    """The Workload ``namespace/name``, or the Workload of the Job ``namespace/name`` (with
    the Job)."""
    try:
        return await api.get(R.WORKLOADS, name, namespace), None
    except errors.NotFound:
        pass
    try:
        job = await api.get(R.JOBS, name, namespace)
    except errors.NotFound:
        raise CliError(
            f"no Workload or Job {namespace}/{name} on the manager; see `kfed workloads -n "
            f"{namespace}`"
        ) from None
    wl_namespace, wl_name = jobs.workload_key_for(job).split("/", 1)
    try:
        return await api.get(R.WORKLOADS, wl_name, wl_namespace), job
    except errors.NotFound:
        pass
    uid = job["metadata"].get("uid", "")
    found = (await api.list(R.WORKLOADS, namespace, label_selector=f"{C.JOB_UID_LABEL}={uid}"))[
        "items"
    ]
    if found:
        return found[0], job
    queue = ((job["metadata"].get("labels") or {}).get(C.QUEUE_NAME_LABEL)) or ""
    why = (
        f"it has no {C.QUEUE_NAME_LABEL} label, so kfed does not manage it"
        if not queue
        else "is the kfed manager running on the manager cluster?"
    )
    raise CliError(f"Job {namespace}/{name} has no Workload yet: {why}")


@dataclass(frozen=True, slots=True)
class Decision:
    """The recorded dispatch decision (``kfed.io/placement``)."""

    cluster: str
    reason: str
    rule: str
    candidates: list[str]
    at: str


@dataclass(frozen=True, slots=True)
class Explanation:
    workload: str
    job: str
    state: str
    summary: str
    """The answer, in one sentence: why it waits, or where it runs and why."""
    queue: str
    cluster_queue: str
    cluster: str
    assignments: list[str] = field(default_factory=list)
    """Per pod set: ``main: nvidia.com/gpu=h100 (8), cpu=h100 (16)``."""
    checks: list[str] = field(default_factory=list)
    """Per admission check: ``multikueue: Ready: ...``."""
    conditions: list[str] = field(default_factory=list)
    decision: Decision | None = None
    notes: list[str] = field(default_factory=list)


def decision_of(workload: Obj) -> tuple[Decision | None, str | None]:
    """The parsed placement annotation, or a note saying why it cannot be read."""
    raw = ((workload.get("metadata") or {}).get("annotations") or {}).get(PLACEMENT_ANNOTATION)
    if not raw:
        return None, None
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except ValueError as err:
        return None, f"{PLACEMENT_ANNOTATION} is not readable JSON ({err})"
    at = data.get("at")
    when = ""
    if isinstance(at, int | float):
        when = dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    elif isinstance(at, str):
        when = at
    return (
        Decision(
            cluster=str(data.get("cluster") or ""),
            reason=str(data.get("reason") or ""),
            rule=str(data.get("rule") or ""),
            candidates=[str(c) for c in data.get("candidates") or []],
            at=when,
        ),
        None,
    )


def _assignments(workload: Obj) -> list[str]:
    lines = []
    for psa in (ws.status_of(workload).get("admission") or {}).get("podSetAssignments") or []:
        usage = psa.get("resourceUsage") or {}
        parts = [
            f"{resource}={flavor}" + (f" ({usage[resource]})" if resource in usage else "")
            for resource, flavor in sorted((psa.get("flavors") or {}).items())
        ]
        lines.append(f"{psa.get('name', 'main')}: {', '.join(parts)}")
    return lines


def _condition_line(condition: Obj) -> str:
    text = f"{condition.get('type')}={condition.get('status')}"
    if condition.get("reason"):
        text += f" {condition['reason']}"
    if condition.get("message"):
        text += f": {condition['message']}"
    return text


def _summary(workload: Obj, current: str, decision: Decision | None) -> str:
    status = ws.status_of(workload)
    conds = status.get("conditions")
    checks = status.get("admissionChecks") or []
    where = status.get("clusterName") or ""
    if current == FINISHED:
        finished = conditions.find(conds, C.FINISHED) or {}
        on = f" on {where}" if where else ""
        return f"finished{on} ({finished.get('reason', '')}): {finished.get('message', '')}"
    if current == EVICTED:
        evicted = conditions.find(conds, C.EVICTED) or {}
        return (
            f"evicted ({evicted.get('reason', '')}): {evicted.get('message', '')}; "
            "it is requeued and will be admitted and placed again"
        )
    if current == PENDING:
        if not ws.is_active(workload):
            return "pending: the workload is deactivated (spec.active=false)"
        reserved = conditions.find(conds, C.QUOTA_RESERVED)
        if reserved is not None and reserved.get("message"):
            return f"pending in its queue: {reserved['message']}"
        return "pending in its queue: not considered yet (is the kfed manager running?)"
    if current == RESERVED:
        waiting = [c for c in checks if c.get("state") != "Ready"]
        if waiting:
            check = waiting[0]
            return (
                f"quota reserved, waiting for admission check {check.get('name')} "
                f"({check.get('state', 'Pending')}): {check.get('message') or 'no message yet'}"
            )
        return "quota reserved, waiting to be admitted"
    if where:
        why = f": {decision.reason}" if decision is not None and decision.cluster == where else ""
        return f"runs on {where}{why}"
    return "admitted on the manager (no MultiKueue admission check: it is not federated)"


def explain(workload: Obj, job: Obj | None = None) -> Explanation:
    meta = workload["metadata"]
    status = ws.status_of(workload)
    current = state(workload)
    decision, note = decision_of(workload)
    job_name = (
        (job or {}).get("metadata", {}).get("name")
        or (meta.get("annotations") or {}).get(C.JOB_NAME_ANNOTATION)
        or (ws.owner_job(workload) or "/").split("/", 1)[1]
    )
    notes = [note] if note else []
    placed = status.get("clusterName")
    if decision is not None and placed and decision.cluster and decision.cluster != placed:
        notes.append(
            f"the last recorded decision chose {decision.cluster}, but it runs on "
            f"{status['clusterName']} (placed by another dispatch mode or an earlier try)"
        )
    return Explanation(
        workload=f"{meta['namespace']}/{meta['name']}",
        job=str(job_name or ""),
        state=current,
        summary=_summary(workload, current, decision),
        queue=str((workload.get("spec") or {}).get("queueName") or ""),
        cluster_queue=str((status.get("admission") or {}).get("clusterQueue") or ""),
        cluster=cluster(workload),
        assignments=_assignments(workload),
        checks=[
            f"{c.get('name')}: {c.get('state', 'Pending')}"
            + (f": {c['message']}" if c.get("message") else "")
            for c in status.get("admissionChecks") or []
        ],
        conditions=[_condition_line(c) for c in status.get("conditions") or []],
        decision=decision,
        notes=notes,
    )
