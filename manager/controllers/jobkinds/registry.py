"""Every kind of job kfed knows, by upstream Kueue's integration names (its configuration's
``integrations.frameworks``)."""

from __future__ import annotations

from manager.controllers.jobkinds.base import JobKind, Obj
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.jobkinds.jobset import JOBSET
from manager.controllers.jobkinds.leaderworkerset import LEADERWORKERSET
from manager.controllers.jobkinds.mpijob import MPIJOB
from manager.controllers.jobkinds.pytorchjob import PYTORCHJOB
from manager.controllers.jobkinds.raycluster import RAYCLUSTER
from manager.controllers.jobkinds.serving import DEPLOYMENT, STATEFULSET
from manager.controllers.jobkinds.trainjob import TRAINJOB

KINDS: dict[str, JobKind] = {
    "batch/job": BATCH_JOB,
    "jobset.x-k8s.io/jobset": JOBSET,
    "ray.io/raycluster": RAYCLUSTER,
    "trainer.kubeflow.org/trainjob": TRAINJOB,
    "kubeflow.org/pytorchjob": PYTORCHJOB,
    "kubeflow.org/mpijob": MPIJOB,
    "leaderworkerset.x-k8s.io/leaderworkerset": LEADERWORKERSET,
    "statefulset": STATEFULSET,
    "deployment": DEPLOYMENT,
}
"""Integration name -> adapter. ``batch/job`` is always on."""


def parse(names: list[str] | tuple[str, ...]) -> tuple[JobKind, ...]:
    """The adapters of these integration names (``batch/job`` first, always); a ValueError
    names the unknown ones and the known ones."""
    unknown = [n for n in names if n not in KINDS]
    if unknown:
        raise ValueError(f"unknown integration(s) {', '.join(unknown)}; known: {', '.join(KINDS)}")
    return (BATCH_JOB, *(KINDS[n] for n in dict.fromkeys(names) if KINDS[n] is not BATCH_JOB))


def by_group_version_kind(group: str, version: str, kind: str) -> JobKind | None:
    """The adapter of an AdmissionReview's ``request.kind`` (None: not a kind kfed queues)."""
    for job_kind in KINDS.values():
        res = job_kind.resource
        if (res.group, res.version, res.kind) == (group, version, kind):
            return job_kind
    return None


def owner_of(
    workload: Obj, kinds: tuple[JobKind, ...] = tuple(KINDS.values())
) -> tuple[JobKind, str] | None:
    """The kind and ``namespace/name`` of the job that owns this Workload, if one does."""
    for kind in kinds:
        key = kind.owner_of(workload)
        if key is not None:
            return kind, key
    return None
