"""Job manifests as users write them: read, validate as ``batch/v1`` Job, and prepare for the
manager's queue (queue label, ``suspend: true``). Pure: no cluster is contacted."""

from __future__ import annotations

import copy
from typing import Any

import pydantic

from manager.api import constants as C
from manager.api.batch import Job
from manager.cli.common import load_yaml_documents, usage_error

Obj = dict[str, Any]
DEFAULT_JOB_NAMESPACE = "default"


def _where(source: str, index: int, doc: Any) -> str:
    name = ((doc.get("metadata") or {}) if isinstance(doc, dict) else {}).get("name")
    return f"{source}: document {index}" + (f" (Job {name})" if name else "")


def _validation_message(err: pydantic.ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(document)"
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"


def parse_jobs(text: str, source: str) -> list[Obj]:
    """Every YAML document of ``text`` as a Job dict; anything that is not a valid
    ``batch/v1`` Job is a usage error naming the document and the field."""
    docs = load_yaml_documents(text, source)
    if not docs:
        raise usage_error(f"{source} has no YAML documents")
    jobs = []
    for index, doc in enumerate(docs, start=1):
        where = _where(source, index, doc)
        if not isinstance(doc, dict):
            raise usage_error(f"{where} is not a YAML mapping")
        kind, api_version = doc.get("kind"), doc.get("apiVersion")
        if (kind, api_version) != ("Job", "batch/v1"):
            raise usage_error(
                f"{where} is a {kind or '(no kind)'} ({api_version or 'no apiVersion'}), "
                "not a batch/v1 Job"
            )
        meta = doc.get("metadata") or {}
        if not meta.get("name") and not meta.get("generateName"):
            raise usage_error(f"{where} has no metadata.name")
        try:
            Job.model_validate(doc)
        except pydantic.ValidationError as err:
            raise usage_error(f"{where} is not a valid Job: {_validation_message(err)}") from None
        jobs.append(doc)
    return jobs


def queue_of(job: Obj) -> str | None:
    return ((job.get("metadata") or {}).get("labels") or {}).get(C.QUEUE_NAME_LABEL)


def namespace_of(job: Obj) -> str:
    return str((job.get("metadata") or {}).get("namespace") or DEFAULT_JOB_NAMESPACE)


def display_name(job: Obj) -> str:
    meta = job.get("metadata") or {}
    return f"{namespace_of(job)}/{meta.get('name') or str(meta.get('generateName', '')) + '*'}"


def prepare(job: Obj, *, queue: str | None) -> tuple[Obj, list[str]]:
    """A copy of the Job ready for the manager: the queue label (``queue`` overrides the
    manifest's), ``spec.suspend: true`` when missing, and a namespace. Also returns warnings."""
    prepared = copy.deepcopy(job)
    meta = prepared.setdefault("metadata", {})
    meta["namespace"] = namespace_of(prepared)
    labels = meta.get("labels") or {}
    if queue:
        labels[C.QUEUE_NAME_LABEL] = queue
    if not labels.get(C.QUEUE_NAME_LABEL):
        raise usage_error(
            f"Job {display_name(prepared)} has no {C.QUEUE_NAME_LABEL} label: pass --queue "
            "with the LocalQueue to submit it to"
        )
    meta["labels"] = labels
    spec = prepared["spec"]
    warnings = []
    if "suspend" not in spec or spec["suspend"] is None:
        spec["suspend"] = True
    elif spec["suspend"] is False:
        warnings.append(
            f"Job {display_name(prepared)} sets spec.suspend: false; kfed keeps it suspended "
            "until it is admitted, so it is submitted suspended"
        )
        spec["suspend"] = True
    return prepared, warnings
