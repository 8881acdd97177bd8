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
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from manager.api import constants as C
from manager.api import dra
from manager.api.view import annotations_of, at, items, labels_of
from manager.controllers import devicecatalogue, spans, taspods
from manager.controllers import eventreasons as told
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.base import JobKind, MissingReference, PodSetPlacement
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.state import ClusterState
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.informer import Event, Informer
from manager.kube.update import patch_guarded
from manager.kube.workqueue import WorkQueue
from manager.telemetry import tracing

log = logging.getLogger(__name__)

MISSING_REFERENCE_RETRY = 10.0
"""Seconds between tries to make the Workload of a job whose runtime (or other referenced
object) does not exist yet."""
Obj = dict[str, Any]


def queue_name(job: Obj) -> str | None:
    return labels_of(job).get(C.QUEUE_NAME_LABEL)


def workload_for_job(
    job: Obj,
    priority_class_value: Callable[[str], int | None],
    kind: JobKind = BATCH_JOB,
    device_charge: dra.Charge | dra.Refused | None = None,
) -> Obj:
    """The Workload the manager creates for a queued job (without its trace annotation): its
    kind's pod sets, the priority of its WorkloadPriorityClass label, else of its first pod
    template that sets one, and what its pods' device claims are charged (``device_charge``,
    from ``dra.charge``; see ``with_device_charge``). ``kfed whatif`` builds the same one to
    ask the admission core about a job not created yet."""
    meta = job["metadata"]
    namespace, name = kind.workload_key(job).split("/", 1)
    pod_sets = kind.workload_pod_sets(job)
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
                    "apiVersion": kind.resource.api_version,
                    "kind": kind.resource.kind,
                    "name": meta["name"],
                    "uid": meta.get("uid", ""),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"queueName": queue_name(job), "podSets": pod_sets},
    }
    wpc = labels_of(job).get(C.PRIORITY_CLASS_LABEL)
    value = priority_class_value(wpc) if wpc else None
    pod_priorities = [
        int(p) for ps in pod_sets if (p := at(ps, "template", "spec").get("priority")) is not None
    ]
    if wpc and value is not None:
        ref = {"group": C.GROUP, "kind": "WorkloadPriorityClass", "name": wpc}
        body["spec"]["priorityClassRef"] = ref
        body["spec"]["priority"] = value
    elif pod_priorities:
        body["spec"]["priority"] = pod_priorities[0]
    if device_charge is not None:
        with_device_charge(body, device_charge)
    return body


def with_device_charge(body: Obj, device_charge: dra.Charge | dra.Refused) -> Obj:
    """Record on a Workload being created what its device claims are charged, once: a
    template changed later changes nothing, and the worker that runs the copy charges the
    same. Claims that cannot be charged are recorded with the reason: the admission core
    keeps such a workload pending, Inadmissible, with that message (``convert.workload``)."""
    annotations = body["metadata"].setdefault("annotations", {})
    if isinstance(device_charge, dra.Refused):
        annotations[dra.REFUSED_ANNOTATION] = device_charge.message
        return body
    if device_charge.per_pod:
        annotations[dra.CHARGE_ANNOTATION] = device_charge.annotation()
    if device_charge.replaced:
        annotations[dra.REPLACED_ANNOTATION] = device_charge.replaced_annotation()
    return body


async def device_charge(
    api: KubeApi,
    pod_sets: list[Obj],
    namespace: str,
    mappings: dra.DeviceClassMappings,
    catalogue: devicecatalogue.CatalogueSource,
) -> dra.Charge | dra.Refused | dra.TemplateMissing | dra.DevicesUnknown | None:
    """What the pods of ``pod_sets`` are charged for their devices (``dra.charge``), from the
    namespace's ResourceClaimTemplates as they are now and, when a charge needs them, the
    DeviceClasses and ResourceSlices ``catalogue`` gives; None when they ask for no device
    and no extended resource. The job controller calls it once per Workload; ``kfed whatif``
    calls it for a job not created yet."""
    claims = dra.has_claims(pod_sets)
    needs_catalogue = dra.needs_catalogue(pod_sets, mappings)
    if not claims and not needs_catalogue:
        return None
    templates: dict[str, Obj] = {}
    for template_name in dra.template_names(pod_sets):
        with contextlib.suppress(errors.NotFound):
            templates[template_name] = await api.get(
                R.RESOURCE_CLAIM_TEMPLATES, template_name, namespace
            )
    devices = await catalogue(claims and mappings.counter_based) if needs_catalogue else None
    return dra.charge(pod_sets, templates, mappings, devices)


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
            if queue_name(event.obj) and not prebuilt:
                self.queue.add(f"deleted:{self._key(event.obj)}")
            elif prebuilt and self.kind.outcome(event.obj) is not None:
                # Deleted finished (a TTL controller, ttlSecondsAfterFinished: 0) maybe before
                # we recorded it: its prebuilt Workload must still end Finished, never wait
                # for a job that is gone (nor look, to a manager, like a copy to run again).
                key = self._key(event.obj)
                self.finished_deleted[key] = event.obj
                self.queue.add(f"finished-deleted:{key}")
            return
        if queue_name(event.obj) or self.state.workloads.get(self._key(event.obj)):
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
        if job is None or not queue_name(job):
            return None
        wl = self.state.workloads.get(self._key(job))
        with tracing.workload_context(wl):
            return await self._reconcile(job, wl)

    async def _reconcile(self, job: Obj, wl: Obj | None) -> float | None:
        outcome = self.kind.outcome(job)
        if wl is None:
            if outcome is None:
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
        suspended = self.kind.is_suspended(job)
        if suspended and not runnable and await self._follow_queue_label(job, wl):
            return None
        # A fenced job stays stopped even while this cache still holds its copy active:
        # another replica of the shim may have fenced it a moment ago (docs/operations.md).
        fenced = C.FENCED_ANNOTATION in annotations_of(job)
        if runnable and suspended and not fenced:
            await self._start(job, wl)
        elif not runnable and not suspended:
            # A running job's templates are immutable: suspend first, restore afterwards.
            if await self._patch_job(job, self.kind.suspend_fields(True)) is not None:
                told.stopped(self.state.events, job, wl)
        elif not runnable and self.kind.templates_mutable(job):
            await self._restore(job, wl)
        return None

    async def _follow_queue_label(self, job: Obj, wl: Obj) -> bool:
        """A suspended job moved to another queue (its queue-name label changed): its
        Workload follows while it holds no quota, as upstream Kueue's job reconciler does;
        holding quota, it stays where it was admitted, and the job is told. True when the
        Workload was moved (its event brings us back)."""
        wanted = queue_name(job)
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
            await self._patch_job(job, self.kind.suspend_fields(True))

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
        body = workload_for_job(resolved, self.state.priority_class_value, self.kind)
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
            with_device_charge(body, device_charge)
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

    async def _own_devices(self, slices: bool) -> dra.DeviceCatalogue:
        return await devicecatalogue.of_cluster(self.state.api, slices)

    async def _device_charge(
        self, pod_sets: list[Obj], namespace: str
    ) -> dra.Charge | dra.Refused | dra.TemplateMissing | dra.DevicesUnknown | None:
        """What its pods' devices are charged (``device_charge``); read here, once: the charge
        is recorded on the Workload."""
        return await device_charge(
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
            "kueue.local_queue": queue_name(job),
        }
        if annotations_of(job).get(tracing.TRACEPARENT_ANNOTATION):
            tracing.record(
                "submit", job, start=meta.get("creationTimestamp"), attributes=attributes
            )
            return tracing.traceparent_of(job)
        return tracing.start_root(
            "submit", start=meta.get("creationTimestamp"), attributes=attributes
        )

    def _placements(self, wl: Obj) -> dict[str, PodSetPlacement]:
        """Per pod set: the nodeSelector and tolerations it runs with under this admission
        (its submitted ones, plus its flavors' and its admission checks' podSetUpdates)."""
        submitted = _submitted(wl)
        admission = at(ws.status_of(wl), "admission")
        updates: dict[str, list[Obj]] = {}
        for check in items(ws.status_of(wl), "admissionChecks"):
            for update in items(check, "podSetUpdates"):
                updates.setdefault(str(update.get("name", "")), []).append(update)
        result = {}
        for psa in items(admission, "podSetAssignments"):
            name = str(psa.get("name", ""))
            base = submitted.get(name, PodSetPlacement({}, []))
            selector, tolerations = dict(base.node_selector), list(base.tolerations)
            sources = [
                at(self.state.flavors.get(f), "spec")
                for f in sorted(set(at(psa, "flavors").values()))
            ]
            for fspec in sources:
                selector.update(at(fspec, "nodeLabels"))
                tolerations += [t for t in fspec.get("tolerations") or [] if t not in tolerations]
            for update in updates.get(name, []):
                selector.update(at(update, "nodeSelector"))
                tolerations += [t for t in update.get("tolerations") or [] if t not in tolerations]
            placement = PodSetPlacement(selector, tolerations)
            if psa.get("topologyAssignment"):
                placement = _placed_by_topology(placement, base, name, wl)
            result[name] = placement
        return result

    async def _start(self, job: Obj, wl: Obj) -> None:
        current: Obj | None = job
        for patch in self.kind.run_patches(job, self._placements(wl)):
            if current is None:
                return  # gone meanwhile
            current = await self._patch_job(current, patch)
        if current is not None:
            told.started(self.state.events, current, ws.cluster_queue_of(wl))

    async def _restore(self, job: Obj, wl: Obj) -> None:
        """Put back the templates the job was submitted with (kept in its Workload), once its
        controller has stopped its pods after the suspension."""
        patch = self.kind.restore_patch(job, _submitted(wl))
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


def _submitted(wl: Obj) -> dict[str, PodSetPlacement]:
    """Each pod set's nodeSelector and tolerations as submitted (the Workload keeps them),
    and for a pod set placed by topology its labels, annotations and scheduling gates too
    (what ``_placed_by_topology`` adds is taken back on eviction)."""
    result = {}
    for ps in items(wl, "spec", "podSets"):
        spec, meta = at(ps, "template", "spec"), at(ps, "template", "metadata")
        placement = PodSetPlacement(
            dict(at(spec, "nodeSelector")), list(items(spec, "tolerations"))
        )
        if ps.get("topologyRequest") or _admitted_by_topology(wl, str(ps.get("name", ""))):
            placement = dataclasses.replace(
                placement,
                labels=dict(at(meta, "labels")),
                annotations=dict(at(meta, "annotations")),
                scheduling_gates=list(items(spec, "schedulingGates")),
            )
        result[str(ps.get("name", ""))] = placement
    return result


def _admitted_by_topology(wl: Obj, pod_set: str) -> bool:
    return any(
        psa.get("name") == pod_set and psa.get("topologyAssignment")
        for psa in items(ws.status_of(wl), "admission", "podSetAssignments")
    )


def _placed_by_topology(
    placement: PodSetPlacement, submitted: PodSetPlacement, pod_set: str, wl: Obj
) -> PodSetPlacement:
    """A pod set with a topology assignment: its pods are created behind the topology gate,
    labelled and named after their Workload, for the ungater (topologyungater.py) to give
    each one its domain's nodeSelector."""
    gates = [g for g in submitted.scheduling_gates or [] if g.get("name") != taspods.TOPOLOGY_GATE]
    return dataclasses.replace(
        placement,
        labels={
            **(submitted.labels or {}),
            taspods.TAS_LABEL: "true",
            taspods.PODSET_LABEL: pod_set,
        },
        annotations={
            **(submitted.annotations or {}),
            taspods.WORKLOAD_ANNOTATION: str(wl["metadata"]["name"]),
        },
        scheduling_gates=[*gates, {"name": taspods.TOPOLOGY_GATE}],
    )
