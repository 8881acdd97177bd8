"""The batch/v1 Job integration: a Job labelled with ``kueue.x-k8s.io/queue-name`` gets a
Workload; the Job runs only while its Workload is admitted.

- created: the Job is kept suspended and a Workload is created for it (owner reference, pod
  set from the template, priority from its WorkloadPriorityClass);
- admitted: the flavors' nodeLabels are merged into the template's nodeSelector, their
  tolerations added (and any admission check's podSetUpdates applied), then the Job is
  unsuspended;
- evicted: the Job is suspended and its template restored from the Workload's copy;
- finished: the Workload becomes Finished (Succeeded or Failed).

A Job created by a MultiKueue manager on a worker names its Workload in the
``kueue.x-k8s.io/prebuilt-workload-name`` label; that Workload is used, never a new one.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from manager.api import constants as C
from manager.controllers import spans
from manager.controllers import workloadstatus as ws
from manager.controllers.state import ClusterState
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.informer import Event
from manager.kube.update import patch_guarded
from manager.kube.workqueue import WorkQueue
from manager.telemetry import tracing

log = logging.getLogger(__name__)
Obj = dict[str, Any]


def queue_name(job: Obj) -> str | None:
    return ((job.get("metadata") or {}).get("labels") or {}).get(C.QUEUE_NAME_LABEL)


workload_key_for = ws.workload_key_for_job


def workload_for_job(job: Obj, priority_class_value: Callable[[str], int | None]) -> Obj:
    """The Workload the manager creates for a queued Job (without its trace annotation): one
    pod set ``main`` of ``min(parallelism, completions)`` pods from the Job's template, the
    priority of its WorkloadPriorityClass label, else of its pod template. ``kfed whatif``
    builds the same one to ask the admission core about a Job not created yet."""
    meta, spec = job["metadata"], job.get("spec") or {}
    parallelism = spec.get("parallelism")
    completions = spec.get("completions")
    count = 1 if parallelism is None else int(parallelism)
    if completions is not None:
        count = min(count, int(completions))
    namespace, name = workload_key_for(job).split("/", 1)
    body: Obj = {
        "apiVersion": C.API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {C.JOB_UID_LABEL: meta.get("uid", "")},
            "annotations": {C.JOB_NAME_ANNOTATION: meta["name"]},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": meta["name"],
                    "uid": meta.get("uid", ""),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "queueName": queue_name(job),
            "podSets": [
                {"name": "main", "count": max(count, 1), "template": spec.get("template") or {}}
            ],
        },
    }
    wpc = (meta.get("labels") or {}).get(C.PRIORITY_CLASS_LABEL)
    value = priority_class_value(wpc) if wpc else None
    if wpc and value is not None:
        ref = {"group": C.GROUP, "kind": "WorkloadPriorityClass", "name": wpc}
        body["spec"]["priorityClassRef"] = ref
        body["spec"]["priority"] = value
    elif (
        pod_priority := ((spec.get("template") or {}).get("spec") or {}).get("priority")
    ) is not None:
        body["spec"]["priority"] = int(pod_priority)
    return body


def job_finished(job: Obj) -> tuple[bool, bool, str] | None:
    """(finished, succeeded, message) from the Job's Complete/Failed conditions, or None."""
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("status") == "True" and c.get("type") in ("Complete", "Failed"):
            ok = c["type"] == "Complete"
            return (
                True,
                ok,
                str(c.get("message") or ("Job finished successfully" if ok else "Job failed")),
            )
    return None


class JobController:
    def __init__(self, state: ClusterState, *, role: str = "manager") -> None:
        self.state = state
        self.role = role
        """Whose spans this controller records: the manager's or a worker's (see spans)."""
        self.queue = WorkQueue(name="jobs")
        self.finished_deleted: dict[str, Obj] = {}
        """Finished Jobs with a prebuilt Workload, deleted before it was finished."""
        state.jobs.subscribe(self._on_job)
        state.workloads.subscribe(self._on_workload)

    def _on_job(self, event: Event) -> None:
        if event.type == "DELETED":
            prebuilt = (event.obj["metadata"].get("labels") or {}).get(C.PREBUILT_WORKLOAD_LABEL)
            if queue_name(event.obj) and not prebuilt:
                self.queue.add(f"deleted:{workload_key_for(event.obj)}")
            elif prebuilt and job_finished(event.obj) is not None:
                # Deleted finished (a TTL controller, ttlSecondsAfterFinished: 0) maybe before
                # we recorded it: its prebuilt Workload must still end Finished, never wait
                # for a Job that is gone (nor look, to a manager, like a copy to run again).
                key = workload_key_for(event.obj)
                self.finished_deleted[key] = event.obj
                self.queue.add(f"finished-deleted:{key}")
            return
        if queue_name(event.obj) or self.state.workloads.get(workload_key_for(event.obj)):
            self.queue.add(event.key)

    def _on_workload(self, event: Event) -> None:
        owner = ws.owner_job(event.obj)
        if owner is not None:
            self.queue.add(owner)

    async def reconcile(self, key: str) -> float | None:
        if key.startswith("deleted:"):
            await self._delete_workload(key.removeprefix("deleted:"))
            return None
        if key.startswith("finished-deleted:"):
            await self._finish_deleted(key.removeprefix("finished-deleted:"))
            return None
        job = self.state.jobs.get(key)
        if job is None or not queue_name(job):
            return None
        wl = self.state.workloads.get(workload_key_for(job))
        with tracing.workload_context(wl):
            return await self._reconcile(job, wl)

    async def _reconcile(self, job: Obj, wl: Obj | None) -> float | None:
        finished = job_finished(job)
        if wl is None:
            if finished is None:
                await self._keep_suspended(job)
                if not (job["metadata"].get("labels") or {}).get(C.PREBUILT_WORKLOAD_LABEL):
                    await self._create_workload(job)
            return None
        if finished is not None:
            _, succeeded, message = finished
            written = await patch_guarded(
                self.state.api,
                R.WORKLOADS,
                wl,
                lambda o: ws.finish(o, succeeded, message),
                subresource="status",
            )
            if written is not None:
                self._trace_finish(job, written, succeeded, message)
            return None
        runnable = ws.is_admitted(wl) and not ws.is_evicted(wl) and ws.is_active(wl)
        suspended = bool((job.get("spec") or {}).get("suspend"))
        if runnable and suspended:
            await self._start(job, wl)
        elif not runnable and not suspended:
            # A running Job's template is immutable: suspend first, restore afterwards.
            await self._patch_job(job, {"spec": {"suspend": True}})
        elif not runnable and not (job.get("status") or {}).get("startTime"):
            await self._restore(job, wl)
        return None

    def _trace_finish(self, job: Obj, wl: Obj, succeeded: bool, message: str) -> None:
        """A worker records how its copy ran; the manager records the end of the story."""
        role, status = self.role, job.get("status") or {}
        outcome = {"kfed.succeeded": succeeded, "kfed.message": message}
        error = None if succeeded else message
        if role == "manager":
            cluster = ws.status_of(wl).get("clusterName")
            spans.record(
                role, "finish", wl, error=error, attributes={"kfed.cluster": cluster, **outcome}
            )
        else:
            spans.record(
                role,
                "running",
                wl,
                start=status.get("startTime"),
                end=status.get("completionTime"),
                error=error,
                attributes={"k8s.job.name": job["metadata"]["name"], **outcome},
            )

    async def _keep_suspended(self, job: Obj) -> None:
        if not (job.get("spec") or {}).get("suspend"):
            await self._patch_job(job, {"spec": {"suspend": True}})

    async def _patch_job(self, job: Obj, patch: Obj) -> None:
        with contextlib.suppress(errors.NotFound):
            await patch_guarded(self.state.api, R.JOBS, job, lambda _: patch)

    async def _create_workload(self, job: Obj) -> None:
        meta = job["metadata"]
        body = workload_for_job(job, self.state.priority_class_value)
        body["metadata"]["annotations"][tracing.TRACEPARENT_ANNOTATION] = self._start_trace(job)
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        wpc = (meta.get("labels") or {}).get(C.PRIORITY_CLASS_LABEL)
        if wpc and "priorityClassRef" not in body["spec"]:
            log.warning(
                "Job %s/%s names WorkloadPriorityClass %s, which does not exist; "
                "its workload gets priority 0",
                namespace,
                meta["name"],
                wpc,
            )
        try:
            created = await self.state.api.create(R.WORKLOADS, body, namespace)
            self.state.workloads.cache.setdefault(f"{namespace}/{name}", created)
        except errors.AlreadyExists:
            pass
        except errors.Invalid as err:
            log.warning(
                "cannot create a Workload for Job %s/%s: %s", namespace, meta["name"], err.message
            )

    def _start_trace(self, job: Obj) -> str:
        """The workload's trace starts with its submission (or joins the submitter's trace,
        when the Job carries a traceparent of its own)."""
        meta = job["metadata"]
        attributes = {
            tracing.ROLE_ATTRIBUTE: self.role,
            "k8s.namespace.name": meta.get("namespace"),
            "k8s.job.name": meta.get("name"),
            "kueue.local_queue": queue_name(job),
        }
        if (meta.get("annotations") or {}).get(tracing.TRACEPARENT_ANNOTATION):
            tracing.record(
                "submit", job, start=meta.get("creationTimestamp"), attributes=attributes
            )
            return tracing.traceparent_of(job)
        return tracing.start_root(
            "submit", start=meta.get("creationTimestamp"), attributes=attributes
        )

    def _injected_template(self, job: Obj, wl: Obj) -> tuple[dict[str, Any], list[Any]]:
        """nodeSelector and tolerations the Job runs with under this admission."""
        template_spec = (
            ((wl.get("spec") or {}).get("podSets") or [{}])[0].get("template", {}).get("spec", {})
        )
        selector = dict(template_spec.get("nodeSelector") or {})
        tolerations = list(template_spec.get("tolerations") or [])
        admission = ws.status_of(wl).get("admission") or {}
        for psa in admission.get("podSetAssignments") or []:
            for flavor_name in sorted(set((psa.get("flavors") or {}).values())):
                flavor = self.state.flavors.get(flavor_name) or {}
                fspec = flavor.get("spec") or {}
                selector.update(fspec.get("nodeLabels") or {})
                for t in fspec.get("tolerations") or []:
                    if t not in tolerations:
                        tolerations.append(t)
        for check in ws.status_of(wl).get("admissionChecks") or []:
            for update in check.get("podSetUpdates") or []:
                selector.update(update.get("nodeSelector") or {})
                for t in update.get("tolerations") or []:
                    if t not in tolerations:
                        tolerations.append(t)
        return selector, tolerations

    async def _start(self, job: Obj, wl: Obj) -> None:
        selector, tolerations = self._injected_template(job, wl)
        await self._patch_job(job, _template_patch(job, selector, tolerations, suspend=False))

    async def _restore(self, job: Obj, wl: Obj) -> None:
        """Put back the template the Job was submitted with (kept in its Workload), once the
        Job controller has cleared startTime after the suspension."""
        original = (
            ((wl.get("spec") or {}).get("podSets") or [{}])[0].get("template", {}).get("spec", {})
        )
        selector = dict(original.get("nodeSelector") or {})
        tolerations = list(original.get("tolerations") or [])
        current = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
        if (current.get("nodeSelector") or {}) == selector and (
            current.get("tolerations") or []
        ) == tolerations:
            return
        await self._patch_job(job, _template_patch(job, selector, tolerations, suspend=True))

    async def _finish_deleted(self, key: str) -> None:
        job = self.finished_deleted.pop(key, None)
        wl = self.state.workloads.get(key)
        finished = job_finished(job) if job is not None else None
        if wl is None or finished is None or ws.is_finished(wl):
            return
        _, succeeded, message = finished
        with contextlib.suppress(errors.NotFound):
            await patch_guarded(
                self.state.api,
                R.WORKLOADS,
                wl,
                lambda o: ws.finish(o, succeeded, message),
                subresource="status",
            )

    async def _delete_workload(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        await self.state.api.delete(R.WORKLOADS, name, namespace)


def _template_patch(
    job: Obj, selector: dict[str, Any], tolerations: list[Any], *, suspend: bool
) -> Obj:
    """A merge patch that leaves exactly ``selector`` as the template's nodeSelector (keys
    that must go are set to null) and ``tolerations`` as its tolerations."""
    current = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    node_selector: dict[str, Any] = {
        k: None for k in current.get("nodeSelector") or {} if k not in selector
    }
    node_selector.update(selector)
    template_spec: Obj = {"nodeSelector": node_selector or None, "tolerations": tolerations or None}
    return {"spec": {"suspend": suspend, "template": {"spec": template_spec}}}
