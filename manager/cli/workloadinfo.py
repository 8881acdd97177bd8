"""Reading manager Workloads for people: one row per workload (queue, flavors, cluster,
state, age) and, for one workload, the answer to "why is it pending?" or "why does it run
there?" from its conditions, admission checks and the recorded dispatch decision
(``kfed.io/placement``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from manager.api import constants as C
from manager.api.view import ObjectView, annotations_of, at, items, labels_of
from manager.cli.common import CliError
from manager.cli.tables import age
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds import registry
from manager.controllers.jobkinds.base import JobKind
from manager.federation.engine import topologyback
from manager.federation.engine.retaining import ran_on
from manager.federation.engine.workloadview import (
    FINISHED,
    Placement,
    cluster_of,
    flavors_of,
    placement_of,
    state_of,
    why,
)
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class WorkloadRow:
    namespace: str
    name: str
    kind: str
    """The kind of job it was made for (JobSet, RayCluster...; "" for a Workload alone)."""
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
                kind=ws.owner_kind(wl),
                queue=str(at(wl, "spec").get("queueName") or ""),
                flavors=",".join(flavors_of(wl)),
                cluster=cluster_of(wl),
                state=state_of(wl),
                age=age(now - ws.creation_time(wl)) if meta.get("creationTimestamp") else "",
            )
        )
    return rows


async def list_workloads(
    api: KubeApi, namespace: str | None, *, now: float, selector: str | None = None
) -> list[WorkloadRow]:
    return workload_rows(await list_workload_objects(api, namespace, selector), now=now)


async def list_workload_objects(
    api: KubeApi, namespace: str | None, selector: str | None = None
) -> list[Obj]:
    """The manager's Workloads (None: every namespace), filtered by a label selector by the
    API server."""
    if selector:
        return list((await api.list(R.WORKLOADS, namespace, label_selector=selector))["items"])
    return list((await api.list(R.WORKLOADS, namespace))["items"])


STATES = ("pending", "reserved", "admitted", "running", "finished", "evicted")
"""``kfed workloads --state``: the STATE column, lower-case; ``running`` is ``admitted``
(admitted by the manager and placed on a worker, where its job runs)."""


def state_matches(row: WorkloadRow, states: tuple[str, ...]) -> bool:
    """Whether a row's state is one of ``states`` (--state values; none: every row)."""
    if not states:
        return True
    wanted = {"admitted" if s.lower() == "running" else s.lower() for s in states}
    return row.state.lower() in wanted


def wide_columns(wl: Obj) -> tuple[str, str, str]:
    """``-o wide``'s extra columns: the ClusterQueue of its admission, its priority, and the
    job it was made for (Kind/name)."""
    view = ObjectView(wl)
    cluster_queue = ws.cluster_queue_of(wl)
    priority = view.spec.get("priority")
    owners = view.owner_references
    owner = next((o for o in owners if o.get("controller")), owners[0] if owners else None)
    job = f"{owner.get('kind')}/{owner.get('name')}" if owner else ""
    return cluster_queue, "" if priority is None else str(priority), job


# -- explain ---------------------------------------------------------------------------------


async def find_job(api: KubeApi, namespace: str, name: str) -> tuple[JobKind, Obj] | None:
    """The job ``namespace/name`` of the first kind kfed queues that has one (a Job first);
    a kind whose CRD the manager does not serve has none."""
    for kind in registry.KINDS.values():
        try:
            return kind, await api.get(kind.resource, name, namespace)
        except errors.NotFound:
            continue
    return None


async def resolve(api: KubeApi, namespace: str, name: str) -> tuple[Obj, Obj | None]:
    """The Workload ``namespace/name``, or the Workload of the job ``namespace/name`` of any
    kind kfed queues (with the job)."""
    try:
        return await api.get(R.WORKLOADS, name, namespace), None
    except errors.NotFound:
        pass
    found = await find_job(api, namespace, name)
    if found is None:
        kinds = ", ".join(k.resource.kind for k in registry.KINDS.values())
        raise CliError(
            f"no Workload or job ({kinds}) {namespace}/{name} on the manager; see `kfed "
            f"workloads -n {namespace}`"
        )
    kind, job = found
    wl_namespace, wl_name = kind.workload_key(job).split("/", 1)
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
    labels = labels_of(job)
    queue = labels.get(C.QUEUE_NAME_LABEL) or ""
    prebuilt = labels.get(C.PREBUILT_WORKLOAD_LABEL)
    if not queue:
        why = f"it has no {C.QUEUE_NAME_LABEL} label, so kfed does not manage it"
    elif prebuilt:
        why = (
            f"its label {C.PREBUILT_WORKLOAD_LABEL} names the Workload {namespace}/{prebuilt}, "
            "which does not exist; kfed waits for that Workload and creates none of its own: "
            "create it, or remove the label"
        )
    else:
        why = "is the kfed manager running on the manager cluster?"
    raise CliError(f"{kind.resource.kind} {namespace}/{name} has no Workload yet: {why}")


@dataclass(frozen=True, slots=True)
class Explanation:
    workload: str
    job: str
    kind: str
    """The job's kind (Job, JobSet, RayCluster...)."""
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
    decision: Placement | None = None
    notes: list[str] = field(default_factory=list)
    topology: list[str] = field(default_factory=list)
    """TAS: per pod set, where the worker placed its pods: ``trainers: block-1 / rack-2 /
    host-0 x4`` (``topologyback.lines``)."""
    result: str = ""
    """Finished: how its job ended, from the manager's job (its status was copied from the
    worker, so it outlives the objects there): ``Complete at ... (succeeded: 1)``."""


def _assignments(workload: Obj) -> list[str]:
    lines = []
    for psa in items(ws.status_of(workload), "admission", "podSetAssignments"):
        usage = at(psa, "resourceUsage")
        parts = [
            f"{resource}={flavor}" + (f" ({usage[resource]})" if resource in usage else "")
            for resource, flavor in sorted(at(psa, "flavors").items())
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


async def owner_job(api: KubeApi, workload: Obj) -> Obj | None:
    """The job that owns ``workload`` on the manager, if it still exists."""
    found = registry.owner_of(workload)
    if found is None:
        return None
    kind, key = found
    namespace, name = key.split("/", 1)
    try:
        return await api.get(kind.resource, name, namespace)
    except errors.KubeError:
        return None


_FINAL_CONDITIONS = ("Complete", "Completed", "Succeeded", "Failed")
_COUNTS = ("succeeded", "failed")


def result_of(job: Obj | None) -> str:
    """How a job ended, as its final condition says (``Complete``, ``Failed``...), when,
    and its pod counts; "" while it has not ended."""
    status = at(job, "status")
    for condition in items(status, "conditions"):
        if condition.get("status") == "True" and condition.get("type") in _FINAL_CONDITIONS:
            text = str(condition["type"])
            when = status.get("completionTime") or condition.get("lastTransitionTime")
            if when:
                text += f" at {when}"
            counts = [f"{k}: {status[k]}" for k in _COUNTS if status.get(k)]
            if counts:
                text += f" ({', '.join(counts)})"
            if condition.get("message"):
                text += f": {condition['message']}"
            return text
    return ""


def explain(workload: Obj, job: Obj | None = None) -> Explanation:
    meta = workload["metadata"]
    status = ws.status_of(workload)
    current = state_of(workload)
    decision, note = placement_of(workload)
    job_name = (
        at(job, "metadata").get("name")
        or annotations_of(workload).get(C.JOB_NAME_ANNOTATION)
        or ((registry.owner_of(workload) or (None, "/"))[1]).split("/", 1)[1]
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
        kind=ws.owner_kind(workload),
        state=current,
        summary=why(workload, placement=decision),
        queue=str(at(workload, "spec").get("queueName") or ""),
        cluster_queue=ws.cluster_queue_of(workload),
        # Finished: where it ran, kept on the Workload after its worker's objects are gone.
        cluster=(ran_on(workload) if current == FINISHED else "") or cluster_of(workload),
        assignments=_assignments(workload),
        topology=topologyback.lines(workload),
        checks=[
            f"{c.get('name')}: {c.get('state', 'Pending')}"
            + (f": {c['message']}" if c.get("message") else "")
            for c in status.get("admissionChecks") or []
        ],
        conditions=[_condition_line(c) for c in status.get("conditions") or []],
        decision=decision,
        notes=notes,
        result=result_of(job) if current == FINISHED else "",
    )
