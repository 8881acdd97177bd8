"""Job manifests as users write them: read, validate as a kind of job kfed queues (a
``batch/v1`` Job, a JobSet, a TrainJob, a RayCluster, a PyTorchJob (or TFJob,
XGBoostJob, PaddleJob, JAXJob), an MPIJob, a
LeaderWorkerSet, an AppWrapper: ``jobkinds/registry.py``), and prepare for the manager's
queue (queue label,
``suspend: true`` where the kind keeps it, a LeaderWorkerSet held at zero replicas). Pure: no
cluster is contacted."""

from __future__ import annotations

import copy
from typing import Any

import pydantic

from manager.api import constants as C
from manager.api.batch import Job
from manager.api.view import MalformedObject, at, labels_of
from manager.cli.common import load_yaml_documents, usage_error
from manager.controllers.jobkinds import registry
from manager.controllers.jobkinds.base import JobKind, merge_fields
from manager.controllers.jobkinds.batchjob import BATCH_JOB

Obj = dict[str, Any]
DEFAULT_JOB_NAMESPACE = "default"


def _where(source: str, index: int, doc: Any) -> str:
    # Says where a document is, so it reads what it can of a malformed one and fails on none.
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    kind = doc.get("kind") if isinstance(doc, dict) else None
    return f"{source}: document {index}" + (f" ({kind or 'Job'} {name})" if name else "")


def kind_of(doc: Obj) -> JobKind | None:
    """The adapter of a manifest's apiVersion and kind (None: not a kind kfed queues)."""
    group, _, version = str(doc.get("apiVersion") or "").rpartition("/")
    return registry.by_group_version_kind(group, version, str(doc.get("kind") or ""))


def _kinds() -> str:
    return ", ".join(f"{k.resource.api_version} {k.resource.kind}" for k in registry.KINDS.values())


def _check_pod_sets(kind: JobKind, doc: Obj, where: str) -> None:
    """A kind whose pod sets are in the manifest itself must have at least one, readable."""
    if type(kind).with_references is not JobKind.with_references:
        return  # in another object (a TrainJob's runtime): the manager reads them
    try:
        pod_sets = kind.pod_sets(doc)
    except (AttributeError, KeyError, TypeError, ValueError) as err:
        raise usage_error(f"{where} has no readable pod sets: {err}") from None
    if not pod_sets:
        raise usage_error(f"{where} has no pods to run (no pod sets)")


def _validation_message(err: pydantic.ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(document)"
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"


def parse_jobs(text: str, source: str) -> list[Obj]:
    """Every YAML document of ``text`` as a job dict; anything that is not a valid job of a
    kind kfed queues is a usage error naming the document and the field."""
    docs = load_yaml_documents(text, source)
    if not docs:
        raise usage_error(f"{source} has no YAML documents")
    jobs = []
    for index, doc in enumerate(docs, start=1):
        where = _where(source, index, doc)
        if not isinstance(doc, dict):
            raise usage_error(f"{where} is not a YAML mapping")
        job_kind = kind_of(doc)
        if job_kind is None:
            kind, api_version = doc.get("kind"), doc.get("apiVersion")
            raise usage_error(
                f"{where} is a {kind or '(no kind)'} ({api_version or 'no apiVersion'}), not a "
                f"kind of job kfed queues ({_kinds()})"
            )
        try:
            meta = at(doc, "metadata")
        except MalformedObject as err:
            raise usage_error(f"{where}: {err}") from None
        if not meta.get("name") and not meta.get("generateName"):
            raise usage_error(f"{where} has no metadata.name")
        if job_kind is BATCH_JOB:
            try:
                Job.model_validate(doc)
            except pydantic.ValidationError as err:
                message = _validation_message(err)
                raise usage_error(f"{where} is not a valid Job: {message}") from None
        elif not isinstance(doc.get("spec"), dict):
            raise usage_error(f"{where} has no spec")
        else:
            _check_pod_sets(job_kind, doc, where)
        jobs.append(doc)
    return jobs


def queue_of(job: Obj) -> str | None:
    return labels_of(job).get(C.QUEUE_NAME_LABEL)


def namespace_of(job: Obj) -> str:
    return str(at(job, "metadata").get("namespace") or DEFAULT_JOB_NAMESPACE)


def display_name(job: Obj) -> str:
    """``Kind namespace/name``, as messages name a job."""
    meta = at(job, "metadata")
    name = meta.get("name") or str(meta.get("generateName", "")) + "*"
    return f"{job.get('kind') or 'Job'} {namespace_of(job)}/{name}"


def prepare(job: Obj, *, queue: str | None) -> tuple[Obj, list[str]]:
    """A copy of the Job ready for the manager: the queue label (``queue`` overrides the
    manifest's), ``spec.suspend: true`` when missing, and a namespace. Also returns warnings."""
    prepared = copy.deepcopy(job)
    meta = prepared.setdefault("metadata", {})
    meta["namespace"] = namespace_of(prepared)
    # Written into (the queue label), so the manifest's own dict, not a read-only view.
    labels = meta.get("labels") or {}
    if queue:
        labels[C.QUEUE_NAME_LABEL] = queue
    if not labels.get(C.QUEUE_NAME_LABEL):
        raise usage_error(
            f"{display_name(prepared)} has no {C.QUEUE_NAME_LABEL} label: pass --queue "
            "with the LocalQueue to submit it to"
        )
    meta["labels"] = labels
    # Where the kind keeps it: spec.suspend, a Kubeflow job's spec.runPolicy.suspend; a
    # LeaderWorkerSet is held at zero replicas instead (jobkinds/leaderworkerset.py).
    kind = kind_of(prepared) or BATCH_JOB
    path = kind.suspend_path
    warnings = []
    if at(prepared, *path[:-1]).get(path[-1]) is False:
        warnings.append(
            f"{display_name(prepared)} sets {'.'.join(path)}: false; kfed keeps it suspended "
            "until it is admitted, so it is submitted suspended"
        )
    if not kind.is_suspended(prepared):
        prepared = merge_fields(prepared, kind.suspend_fields(True, prepared))
    return prepared, warnings
