"""The job integration, for every kind of the job framework (``jobkinds``): a job labelled
with ``kueue.x-k8s.io/queue-name`` gets a Workload; the job runs only while its Workload is
admitted. One controller per kind; what differs between kinds is the kind's adapter.

- created: the job is kept suspended and a Workload is created for it (owner reference, one
  pod set per pod set of the job, priority from its WorkloadPriorityClass);
- admitted: each pod set's flavors' nodeLabels are merged into that pod set's template's
  nodeSelector, their tolerations added (and any admission check's podSetUpdates for that pod
  set applied), then the job is resumed: all its pod sets at once;
- evicted: the job is suspended and its templates restored from the Workload's copy;
- finished: the Workload becomes Finished (Succeeded or Failed).

A job created by a MultiKueue manager on a worker names its Workload in the
``kueue.x-k8s.io/prebuilt-workload-name`` label; that Workload is used, never a new one.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from manager.api import constants as C
from manager.api import dra
from manager.api.view import annotations_of, at, labels_of
from manager.controllers import devicecatalogue, jobplacement, jobworkload, spans
from manager.controllers import eventreasons as told
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.base import JobKind, MissingReference
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.state import ClusterState
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.informer import Event, Informer
from manager.kube.update import patch_guarded
from manager.kube.workqueue import WorkQueue
from manager.telemetry import tracing

log = logging.getLogger(__name__)

MISSING_REFERENCE_RETRY = 10.0
"""Seconds between tries to make the Workload of a job whose runtime (or other referenced
object) does not exist yet."""
Obj = dict[str, Any]


class JobController:
    def __init__(
        self,
        state: ClusterState,
        *,
        role: str = "manager",
        kind: JobKind = BATCH_JOB,
        jobs: Informer | None = None,
        device_class_mappings: dra.DeviceClassMappings | None = None,
        device_catalogue: devicecatalogue.CatalogueSource | None = None,
    ) -> None:
        self.state = state
        self.device_catalogue = device_catalogue or self._own_devices
        """Where a charge reads DeviceClasses and ResourceSlices (``devicecatalogue``)."""
        self.role = role
        """Whose spans this controller records: the manager's or a worker's (see spans)."""
        self.device_class_mappings = device_class_mappings or dra.DeviceClassMappings()
        """The quota resource of each DeviceClass (``--device-class-mappings``)."""
        self.kind = kind
        self.jobs = jobs if jobs is not None else state.jobs
        self.queue = WorkQueue(name=f"{kind.workload_prefix}s")
        self.finished_deleted: dict[str, Obj] = {}
        """Finished jobs with a prebuilt Workload, deleted before it was finished."""
        self.jobs.subscribe(self._on_job)
        state.workloads.subscribe(self._on_workload)

    def __repr__(self) -> str:
        return f"<JobController {self.kind.resource.kind}>"

    def _key(self, job: Obj) -> str:
        return self.kind.workload_key(job)

    def _on_job(self, event: Event) -> None:
        if event.type == "DELETED":
            prebuilt = labels_of(event.obj).get(C.PREBUILT_WORKLOAD_LABEL)
            if jobworkload.queue_name(event.obj) and not prebuilt:
                self.queue.add(f"deleted:{self._key(event.obj)}")
            elif prebuilt and self.kind.outcome(event.obj) is not None:
                # Deleted finished (a TTL controller, ttlSecondsAfterFinished: 0) maybe before
                # we recorded it: its prebuilt Workload must still end Finished, never wait
                # for a job that is gone (nor look, to a manager, like a copy to run again).
                key = self._key(event.obj)
                self.finished_deleted[key] = event.obj
                self.queue.add(f"finished-deleted:{key}")
            return
        if not self.kind.manages(event.obj):
            return
        if jobworkload.queue_name(event.obj) or self.state.workloads.get(self._key(event.obj)):
            self.queue.add(event.key)

    def _on_workload(self, event: Event) -> None:
        owner = self.kind.owner_of(event.obj)
        if owner is not None:
            self.queue.add(owner)

    async def reconcile(self, key: str) -> float | None:
        if key.startswith("deleted:"):
            await self._delete_workload(key.removeprefix("deleted:"))
            return None
        if key.startswith("finished-deleted:"):
            await self._finish_deleted(key.removeprefix("finished-deleted:"))
            return None
        job = self.jobs.get(key)
        if job is None or not jobworkload.queue_name(job) or not self.kind.manages(job):
            return None
        wl = self.state.workloads.get(self._key(job))
        with tracing.workload_context(wl):
            return await self._reconcile(job, wl)

    async def _reconcile(self, job: Obj, wl: Obj | None) -> float | None:
        outcome = self.kind.outcome(job)
        deleting = bool(job["metadata"].get("deletionTimestamp"))
        if wl is None:
            # A job being deleted gets no new Workload, as upstream's job reconciler only drops
            # finalizers then: under foreground deletion the garbage collector takes the
            # Workload first, and a new one would be admitted and placed once more.
            if outcome is None and not deleting:
                await self._keep_suspended(job)
                if not labels_of(job).get(C.PREBUILT_WORKLOAD_LABEL):
                    return await self._create_workload(job)
            return None
        if outcome is not None:
            written = await patch_guarded(
                self.state.api,
                R.WORKLOADS,
                wl,
                lambda o: ws.finish(o, outcome.succeeded, outcome.message),
                subresource="status",
            )
            if written is not None:
                self._trace_finish(job, written, outcome.succeeded, outcome.message)
                told.finished_workload(self.state.events, job, written)
            return None
        runnable = ws.is_admitted(wl) and not ws.is_evicted(wl) and ws.is_active(wl)
        runnable = runnable and not self.kind.held_for_worker(job)  # its worker runs it
        suspended = self.kind.is_suspended(job)
        if suspended and not runnable and await self._follow_queue_label(job, wl):
            return None
        # A fenced job stays stopped even while this cache still holds its copy active:
        # another replica of the shim may have fenced it a moment ago (docs/operations.md).
        fenced = C.FENCED_ANNOTATION in annotations_of(job)
        if runnable and suspended and not fenced and not deleting:
            await self._start(job, wl)
        elif not runnable and not suspended and self.kind.stopped_by_deletion:
            if self.kind.is_active(job) and await self._delete_job(job):
                told.stopped(self.state.events, job, wl)
        elif not runnable and not suspended:
            # A running job's templates are immutable: suspend first, restore afterwards.
            if await self._patch_job(job, self.kind.suspend_fields(True, job)) is not None:
                told.stopped(self.state.events, job, wl)
        elif not runnable and self.kind.templates_mutable(job):
            await self._restore(job, wl)
        return None

    async def _follow_queue_label(self, job: Obj, wl: Obj) -> bool:
        """A suspended job moved to another queue (its queue-name label changed): its
        Workload follows while it holds no quota, as upstream Kueue's job reconciler does;
        holding quota, it stays where it was admitted, and the job is told. True when the
        Workload was moved (its event brings us back)."""
        wanted = jobworkload.queue_name(job)
        current = at(wl, "spec").get("queueName")
        if not wanted or wanted == current:
            return False
        meta = job["metadata"]
        if ws.has_reservation(wl):
            told.queue_change_ignored(self.state.events, job, str(current), wanted)
            return False
        try:
            await patch_guarded(
                self.state.api,
                R.WORKLOADS,
                wl,
                lambda _: {"spec": {"queueName": wanted}},
            )
        except errors.NotFound:
            return False
        log.info(
            "%s %s/%s moved from LocalQueue %s to %s; its Workload follows",
            self.kind.resource.kind,
            meta.get("namespace"),
            meta["name"],
            current,
            wanted,
        )
        return True

    def _trace_finish(self, job: Obj, wl: Obj, succeeded: bool, message: str) -> None:
        """A worker records how its copy ran; the manager records the end of the story."""
        role, status = self.role, at(job, "status")
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
        if not self.kind.is_suspended(job):
            patch = self.kind.suspend_fields(True, job)
            if patch:
                await self._patch_job(job, patch)

    async def _delete_job(self, job: Obj) -> bool:
        """Stop a job that cannot be suspended again (a started Pod) by deleting it."""
        meta = job["metadata"]
        try:
            return await self.state.api.delete(
                self.kind.resource, meta["name"], meta.get("namespace"), uid=meta.get("uid")
            )
        except (errors.NotFound, errors.Conflict):
            return False

    async def _patch_job(self, job: Obj, patch: Obj) -> Obj | None:
        """The job as written (None: it is gone)."""
        try:
            return await patch_guarded(self.state.api, self.kind.resource, job, lambda _: patch)
        except errors.NotFound:
            return None

    async def _create_workload(self, job: Obj) -> float | None:
        """Create its Workload; seconds until the next try when what its pod sets depend on
        is missing (a TrainJob's runtime created after it)."""
        meta = job["metadata"]
        try:
            resolved = await self.kind.with_references(job, self.state.api)
        except MissingReference as err:
            log.warning(
                "no Workload for %s %s/%s yet: %s",
                self.kind.resource.kind,
                meta.get("namespace"),
                meta["name"],
                err,
            )
            return MISSING_REFERENCE_RETRY
        body = jobworkload.workload_for_job(resolved, self.state.priority_class_value, self.kind)
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        device_charge = await self._device_charge(body["spec"]["podSets"], namespace)
        if isinstance(device_charge, dra.TemplateMissing | dra.DevicesUnknown):
            log.warning(
                "no Workload for %s %s/%s yet: %s",
                self.kind.resource.kind,
                namespace,
                meta["name"],
                device_charge.message,
            )
            return MISSING_REFERENCE_RETRY
        if device_charge is not None:
            jobworkload.with_device_charge(body, device_charge)
        body["metadata"]["annotations"][tracing.TRACEPARENT_ANNOTATION] = self._start_trace(job)
        wpc = labels_of(job).get(C.PRIORITY_CLASS_LABEL)
        if wpc and "priorityClassRef" not in body["spec"]:
            log.warning(
                "%s %s/%s names WorkloadPriorityClass %s, which does not exist; "
                "its workload gets priority 0",
                self.kind.resource.kind,
                namespace,
                meta["name"],
                wpc,
            )
        try:
            created = await self.state.api.create(R.WORKLOADS, body, namespace)
            self.state.workloads.remember_written(f"{namespace}/{name}", None, created)
            self._record_creation_latency(job, created)
            told.created_workload(self.state.events, job, created)
            if isinstance(device_charge, dra.Refused):
                self._refuse(job, device_charge)
        except errors.AlreadyExists:
            pass
        except errors.Invalid as err:
            log.warning(
                "cannot create a Workload for %s %s/%s: %s",
                self.kind.resource.kind,
                namespace,
                meta["name"],
                err.message,
            )
        return None

    def _record_creation_latency(self, job: Obj, created: Obj) -> None:
        """``kueue_workload_creation_latency_seconds``: the job's creation to its Workload's
        (both as the API server stamped them), as upstream records it: only for a job not
        edited since it was created (generation 1), whose wait is the Workload's alone."""
        if int(job["metadata"].get("generation") or 1) > 1:
            return
        job_created = ws.parse_time(job["metadata"].get("creationTimestamp"))
        workload_created = ws.parse_time(created["metadata"].get("creationTimestamp"))
        if job_created is None or workload_created is None:
            return
        self.state.metrics.workload_created(
            self.kind.resource.kind, seconds=workload_created - job_created
        )

    async def _own_devices(self, slices: bool) -> dra.DeviceCatalogue:
        return await devicecatalogue.of_cluster(self.state.api, slices)

    async def _device_charge(
        self, pod_sets: list[Obj], namespace: str
    ) -> dra.Charge | dra.Refused | dra.TemplateMissing | dra.DevicesUnknown | None:
        """What its pods' devices are charged (``device_charge``); read here, once: the charge
        is recorded on the Workload."""
        return await jobworkload.device_charge(
            self.state.api, pod_sets, namespace, self.device_class_mappings, self.device_catalogue
        )

    def _refuse(self, job: Obj, refused: dra.Refused) -> None:
        """Its device claims cannot be charged: logged here; the admission core keeps its
        Workload pending with the reason, where Kueue shows it (QuotaReserved, Inadmissible)."""
        meta = job["metadata"]
        log.warning(
            "%s %s/%s cannot be admitted: %s",
            self.kind.resource.kind,
            meta.get("namespace"),
            meta["name"],
            refused.message,
        )

    def _start_trace(self, job: Obj) -> str:
        """The workload's trace starts with its submission (or joins the submitter's trace,
        when the job carries a traceparent of its own)."""
        meta = job["metadata"]
        attributes = {
            tracing.ROLE_ATTRIBUTE: self.role,
            "k8s.namespace.name": meta.get("namespace"),
            "k8s.job.name": meta.get("name"),
            "kfed.job.kind": self.kind.resource.kind,
            "kueue.local_queue": jobworkload.queue_name(job),
        }
        if annotations_of(job).get(tracing.TRACEPARENT_ANNOTATION):
            tracing.record(
                "submit", job, start=meta.get("creationTimestamp"), attributes=attributes
            )
            return tracing.traceparent_of(job)
        return tracing.start_root(
            "submit", start=meta.get("creationTimestamp"), attributes=attributes
        )

    async def _start(self, job: Obj, wl: Obj) -> None:
        current: Obj | None = job
        placements = jobplacement.placements(wl, self.state.flavors.get)
        kind = await self.kind.on_cluster(self.state.api)
        for patch in kind.run_patches(job, placements):
            if current is None:
                return  # gone meanwhile
            current = await self._patch_job(current, patch)
        if current is not None:
            told.started(self.state.events, current, ws.cluster_queue_of(wl))

    async def _restore(self, job: Obj, wl: Obj) -> None:
        """Put back the templates the job was submitted with (kept in its Workload), once its
        controller has stopped its pods after the suspension."""
        kind = await self.kind.on_cluster(self.state.api)
        patch = kind.restore_patch(job, jobplacement.submitted(wl))
        if patch is not None:
            await self._patch_job(job, patch)

    async def _finish_deleted(self, key: str) -> None:
        job = self.finished_deleted.pop(key, None)
        wl = self.state.workloads.get(key)
        outcome = self.kind.outcome(job) if job is not None else None
        if wl is None or outcome is None or ws.is_finished(wl):
            return
        with contextlib.suppress(errors.NotFound):
            await patch_guarded(
                self.state.api,
                R.WORKLOADS,
                wl,
                lambda o: ws.finish(o, outcome.succeeded, outcome.message),
                subresource="status",
            )

    async def _delete_workload(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        await self.state.api.delete(R.WORKLOADS, name, namespace)
