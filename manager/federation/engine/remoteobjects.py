"""The copies the manager creates on a worker: a Workload (created first, so the worker
admits it under its own quotas) and, once it is admitted, the job that runs it, with the
ResourceClaimTemplates its pods claim devices from (created just before the job).

Both carry the origin label (so watches and garbage collection find only ours, and several
managers can share a worker), the job names its Workload in the prebuilt-workload label, and
its kind's adapter gives its spec (``JobKind.spec_for_worker``: suspended, ``managedBy``
cleared so the worker's own controller runs it).
"""

from __future__ import annotations

from typing import Any

from manager.api import constants as C
from manager.api.view import annotations_of, at
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.batchjob import BATCH_JOB, GENERATED_LABELS
from manager.federation.settings import JOB_NAME_ANNOTATION
from manager.kube.jsoncopy import copy_json

Obj = dict[str, Any]


def _copy_meta(meta: Obj, origin: str, extra_annotations: dict[str, str]) -> Obj:
    labels = dict(at(meta, "labels"))
    labels[C.MULTIKUEUE_ORIGIN_LABEL] = origin
    annotations = {
        k: v
        for k, v in at(meta, "annotations").items()
        if not k.startswith("kubectl.kubernetes.io/")
    }
    annotations.update(extra_annotations)
    return {
        "name": meta["name"],
        "namespace": meta["namespace"],
        "labels": labels,
        "annotations": annotations,
    }


def remote_workload(
    manager_wl: Obj, *, origin: str, annotations: dict[str, str] | None = None
) -> Obj:
    meta = manager_wl["metadata"]
    out_meta = _copy_meta(meta, origin, annotations or {})
    out_meta["labels"].pop(C.JOB_UID_LABEL, None)
    job_name = annotations_of(manager_wl).get(JOB_NAME_ANNOTATION)
    if job_name is None:
        for ref in meta.get("ownerReferences") or []:
            if ref.get("kind") == "Job":
                job_name = ref.get("name")
    if job_name:
        out_meta["annotations"][JOB_NAME_ANNOTATION] = job_name
    spec = copy_json(dict(at(manager_wl, "spec")))
    spec.pop("active", None)
    return {"apiVersion": C.API_VERSION, "kind": "Workload", "metadata": out_meta, "spec": spec}


def remote_job(
    manager_job: Obj,
    *,
    workload_name: str,
    origin: str,
    annotations: dict[str, str] | None = None,
    kind: JobKind = BATCH_JOB,
) -> Obj:
    out_meta = _copy_meta(manager_job["metadata"], origin, annotations or {})
    out_meta["labels"][C.PREBUILT_WORKLOAD_LABEL] = workload_name
    for label in GENERATED_LABELS:
        out_meta["labels"].pop(label, None)
    return {
        "apiVersion": kind.resource.api_version,
        "kind": kind.resource.kind,
        "metadata": kind.metadata_for_worker(manager_job, out_meta),
        "spec": kind.spec_for_worker(manager_job),
    }


def remote_claim_template(manager_template: Obj, *, workload_name: str, origin: str) -> Obj:
    """A ResourceClaimTemplate of the job, for the worker that runs its copy: same name and
    namespace (the pods name it), its spec as it is on the manager, labelled as ours and as
    made for this workload (so it is removed with the copy, and a same-named one that is
    not ours is never taken for ours)."""
    out_meta = _copy_meta(manager_template["metadata"], origin, {})
    out_meta["labels"][C.PREBUILT_WORKLOAD_LABEL] = workload_name
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": out_meta,
        "spec": copy_json(dict(at(manager_template, "spec"))),
    }
