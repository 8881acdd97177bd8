"""The copies the manager creates on a worker: a Workload (created first, so the worker
admits it under its own quotas) and, once it is admitted, the Job that runs it.

Both carry the origin label (so watches and garbage collection find only ours, and several
managers can share a worker), the Job names its Workload in the prebuilt-workload label, and
the Job's ``managedBy`` is cleared so the worker's own Job controller runs it.
"""

from __future__ import annotations

import copy
from typing import Any

from manager.api import constants as C
from manager.federation.settings import JOB_NAME_ANNOTATION

Obj = dict[str, Any]

# Labels the Job controller and Kueue set themselves; a copy must not carry the manager's.
_GENERATED_LABELS = (
    "batch.kubernetes.io/controller-uid",
    "batch.kubernetes.io/job-name",
    "controller-uid",
    "job-name",
)


def _copy_meta(meta: Obj, origin: str, extra_annotations: dict[str, str]) -> Obj:
    labels = dict(meta.get("labels") or {})
    labels[C.MULTIKUEUE_ORIGIN_LABEL] = origin
    annotations = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
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
    job_name = (meta.get("annotations") or {}).get(JOB_NAME_ANNOTATION)
    if job_name is None:
        for ref in meta.get("ownerReferences") or []:
            if ref.get("kind") == "Job":
                job_name = ref.get("name")
    if job_name:
        out_meta["annotations"][JOB_NAME_ANNOTATION] = job_name
    spec = copy.deepcopy(manager_wl.get("spec") or {})
    spec.pop("active", None)
    return {"apiVersion": C.API_VERSION, "kind": "Workload", "metadata": out_meta, "spec": spec}


def remote_job(
    manager_job: Obj, *, workload_name: str, origin: str, annotations: dict[str, str] | None = None
) -> Obj:
    out_meta = _copy_meta(manager_job["metadata"], origin, annotations or {})
    out_meta["labels"][C.PREBUILT_WORKLOAD_LABEL] = workload_name
    for label in _GENERATED_LABELS:
        out_meta["labels"].pop(label, None)
    spec = copy.deepcopy(manager_job.get("spec") or {})
    spec.pop("selector", None)
    spec.pop("managedBy", None)
    spec["suspend"] = True
    template_meta = spec.get("template", {}).get("metadata") or {}
    template_labels = {
        k: v for k, v in (template_meta.get("labels") or {}).items() if k not in _GENERATED_LABELS
    }
    if template_meta:
        template_meta["labels"] = template_labels
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": out_meta, "spec": spec}


def job_status_for_manager(remote_job_obj: Obj) -> Obj:
    """The remote Job's status as the manager's Job should show it."""
    status = copy.deepcopy(remote_job_obj.get("status") or {})
    status.pop("uncountedTerminatedPods", None)
    return status
