"""What kfed's controllers tell people through Kubernetes Events: upstream Kueue's reasons and
message shapes (read from Kueue v0.17.0's source) where kfed does what Kueue does, and kfed's
own where it does more (dispatch decisions, failover, fencing, its workers' state).

Each function records one Event through ``ClusterState.events``; none waits or fails (see
``manager.kube.events``). The objects are what the API returned, so the Event names the
version of the object that the step wrote.
"""

from __future__ import annotations

from manager.api import constants as C
from manager.api.view import at
from manager.controllers import workloadstatus as ws
from manager.kube.api import Obj
from manager.kube.events import EventRecorder, EventSink

# -- the Job (Kueue's jobframework reconciler) -----------------------------------------


def created_workload(events: EventRecorder, job: Obj, workload: Obj) -> None:
    events.normal(job, "CreatedWorkload", f"Created Workload: {ws.key_of(workload)}")


def started(events: EventRecorder, job: Obj, cluster_queue: str) -> None:
    # Kueue writes "clusterQueue" in lower camel case here, and only here.
    events.normal(job, "Started", f"Admitted by clusterQueue {cluster_queue}")


def stopped(events: EventRecorder, job: Obj, workload: Obj | None) -> None:
    """A running job suspended: why, as its Workload's Evicted condition says."""
    message = "Not admitted by cluster queue"
    if workload is None:
        message = "Workload is deleted"
    else:
        for cond in ws.status_of(workload).get("conditions") or []:
            if cond.get("type") == C.EVICTED and cond.get("status") == "True":
                message = str(cond.get("message") or message)
    events.normal(job, "Stopped", message)


def finished_workload(events: EventRecorder, job: Obj, workload: Obj) -> None:
    events.normal(job, "FinishedWorkload", f"Workload '{ws.key_of(workload)}' is declared finished")


def queue_change_ignored(events: EventRecorder, job: Obj, current: str, wanted: str) -> None:
    """kfed's own: the queue label of a suspended job changed while its Workload holds quota
    in the old queue; it stays there (its quota is not moved under it)."""
    events.warning(
        job,
        "QueueChangeIgnored",
        f"LocalQueue changed to {wanted}, but its Workload holds quota through LocalQueue "
        f"{current}: it stays there; to move it, delete and submit the job again",
    )


# -- the Workload (Kueue's scheduler, preemption and workload controller) ---------------


def quota_reserved(
    events: EventRecorder, workload: Obj, cluster_queue: str, waited: float, flavors: str = ""
) -> None:
    message = f"Quota reserved in ClusterQueue {cluster_queue}, wait time since queued was "
    message += f"{waited:.0f}s"
    if flavors:
        message += f"; Flavors considered: {flavors}"
    events.normal(workload, "QuotaReserved", message)


def admitted(events: EventRecorder, workload: Obj, cluster_queue: str, waited: float) -> None:
    """``waited``: since the quota reservation (0 when admitted in the same step)."""
    message = f"Admitted by ClusterQueue {cluster_queue}, wait time since reservation was "
    events.normal(workload, "Admitted", message + f"{waited:.0f}s")


def pending(
    events: EventRecorder, workload: Obj, message: str, fine_reason: str | None = None
) -> None:
    """Why it waits, as upstream's scheduler records it: reason ``Pending``, or with
    --unadmitted-workloads-observability the finer one written to QuotaReserved
    (``WaitingForQuota``, ``Misconfigured``, ...)."""
    events.warning(workload, fine_reason or C.REASON_PENDING, message)


def evicted(events: EventRecorder, workload: Obj, reason: str, message: str) -> None:
    """``EvictedDueTo<reason>``, as Kueue's workload.Evict records it."""
    events.normal(workload, f"EvictedDueTo{reason}", message)


def preemption_message(
    *,
    preemptor_uid: str,
    preemptor_job_uid: str,
    reason: str,
    preemptor_path: str,
    preemptee_path: str,
) -> str:
    """The message of a preempted workload's Evicted condition and Events, as Kueue's."""
    return (
        f"Preempted to accommodate a workload (UID: {preemptor_uid or 'UNKNOWN'}, "
        f"JobUID: {preemptor_job_uid or 'UNKNOWN'}) due to {reason or 'UNKNOWN'}; "
        f"preemptor path: {preemptor_path or 'UNKNOWN'}; "
        f"preemptee path: {preemptee_path or 'UNKNOWN'}"
    )


def priorities(preemptor: int, preemptee: int) -> str:
    """Kueue's suffix naming both priorities (kfed has no priority boost: 0)."""
    return (
        f"preemptor effective priority: {preemptor} (base: {preemptor}, boost: 0); "
        f"preemptee effective priority: {preemptee} (base: {preemptee}, boost: 0)"
    )


def preempted(
    events: EventRecorder,
    victim: Obj,
    preemptor: Obj | None,
    message: str,
    *,
    cluster_queue: str,
) -> None:
    """Kueue's three Events of one preemption: EvictedDueToPreempted and Preempted on the
    victim, PreemptedWorkload on the preemptor."""
    suffix = priorities(_priority(preemptor), _priority(victim))
    evicted(events, victim, C.REASON_EVICTED_BY_PREEMPTION, message)
    events.normal(victim, "Preempted", f"{message}; {suffix}")
    if preemptor is not None:
        uid = at(victim, "metadata").get("uid") or "UNKNOWN"
        events.normal(
            preemptor,
            "PreemptedWorkload",
            f"Preempted workload {ws.key_of(victim)} (UID: {uid}) in ClusterQueue "
            f"{cluster_queue}; {suffix}",
        )


def _priority(workload: Obj | None) -> int:
    value = at(workload, "spec").get("priority")
    return value if isinstance(value, int) else 0


def check_rejected(events: EventRecorder, workload: Obj, check: str, message: str) -> None:
    events.warning(
        workload,
        "AdmissionCheckRejected",
        f"Deactivating workload because AdmissionCheck for {check} was Rejected: {message}",
    )


# -- MultiKueue on the manager (Kueue's reason and message, then kfed's own) -------------


def admitted_on(events: EventRecorder, workload: Obj, cluster: str) -> None:
    """A worker admitted the copy: upstream v0.19's words (v0.17 said "got reservation on";
    the check's message says the same)."""
    events.normal(workload, "MultiKueue", f'The workload was admitted on "{cluster}"')


def dispatched(
    events: EventRecorder, workload: Obj, cluster: str, why: str, *, previously: str = ""
) -> None:
    """kfed's placement decision in one line: where, why, and where it was sent before (a
    failover's or a drain's destination names its origin)."""
    message = f'Sent to "{cluster}": {why}'
    if previously and previously != cluster:
        message += f' (previously sent to "{previously}")'
    events.normal(workload, "Dispatched", message)


def failover(events: EventRecorder, workload: Obj, cluster: str, why: str, message: str) -> None:
    """The workload leaves ``cluster`` to be placed again (lost, drained, evicted there)."""
    where = f'"{cluster}"' if cluster else "its worker"
    text = f"Leaving {where} ({why}): {message}"
    if why in ("drain", "unregistered"):
        events.normal(workload, "Failover", text)
    else:
        events.warning(workload, "Failover", text)


def dispatch_rejected(events: EventRecorder, workload: Obj, message: str) -> None:
    events.warning(workload, "DispatchRejected", message)


def fenced(events: EventRecorder, workload: Obj, origin: str, silence: float) -> None:
    """On a worker: the copy of a manager that went silent was deactivated and its pods
    stopped, so that the copy the manager may start elsewhere never runs beside it."""
    events.warning(
        workload,
        "Fenced",
        f"The manager lease of origin {origin} was not renewed for {silence:.0f}s: "
        "deactivated, its pods stopped",
    )


# -- the workers, on their MultiKueueCluster objects -----------------------------------


def cluster_condition_changed(
    events: EventSink,
    cluster: Obj,
    *,
    was_active: bool | None,
    active: bool,
    reason: str,
    message: str,
) -> None:
    """A worker connected, was lost (or never reached), recovered, or had its kubeconfig
    refused. The message is the condition's: no credential is ever in it."""
    if active:
        events.normal(
            cluster,
            "ClusterRecovered" if was_active is False else "ClusterConnected",
            message,
        )
    elif reason == C.REASON_CLIENT_CONNECTION_FAILED:
        events.warning(cluster, "ClusterLost" if was_active else "ClusterUnreachable", message)
    else:
        events.warning(cluster, "ClusterRefused", f"{reason}: {message}")


def credentials_expiring(events: EventSink, cluster: Obj, message: str) -> None:
    """A worker's kubeconfig credentials run out soon, or did (kfed's own reason)."""
    events.warning(cluster, C.REASON_CREDENTIALS_EXPIRING, message)


def maintenance_changed(events: EventSink, cluster: Obj, level: str) -> None:
    """cordon, drain, or back to normal (uncordon)."""
    if level == "drain":
        events.normal(cluster, "Draining", "No new workloads; running ones move elsewhere")
    elif level == "cordon":
        events.normal(cluster, "Cordoned", "No new workloads; running ones stay")
    else:
        events.normal(cluster, "Uncordoned", "Takes new workloads again")
