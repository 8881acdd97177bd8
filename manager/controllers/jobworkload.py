"""The Workload the job integration makes for a queued job: its kind's pod sets, its
priority, and what its device claims are charged (read once, recorded on the Workload).
The job controller creates it; ``kfed whatif`` builds the same one for a job not created
yet."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from manager.api import constants as C
from manager.api import dra, draannotations, draclaims
from manager.api.view import at, labels_of
from manager.controllers import devicecatalogue
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

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
        annotations[draannotations.REFUSED_ANNOTATION] = device_charge.message
        return body
    if device_charge.per_pod:
        annotations[draannotations.CHARGE_ANNOTATION] = device_charge.annotation()
    if device_charge.replaced:
        annotations[draannotations.REPLACED_ANNOTATION] = device_charge.replaced_annotation()
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
    claims = draclaims.has_claims(pod_sets)
    needs_catalogue = draclaims.needs_catalogue(pod_sets, mappings)
    if not claims and not needs_catalogue:
        return None
    templates: dict[str, Obj] = {}
    for template_name in draclaims.template_names(pod_sets):
        with contextlib.suppress(errors.NotFound):
            templates[template_name] = await api.get(
                R.RESOURCE_CLAIM_TEMPLATES, template_name, namespace
            )
    devices = await catalogue(claims and mappings.counter_based) if needs_catalogue else None
    return dra.charge(pod_sets, templates, mappings, devices)
