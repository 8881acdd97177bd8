"""Every kind of job kfed knows, by upstream Kueue's integration names (its configuration's
``integrations.frameworks``)."""

from __future__ import annotations

from manager.controllers.jobkinds.appwrapper import APPWRAPPER
from manager.controllers.jobkinds.base import JobKind, Obj
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.jobkinds.jaxjob import JAXJOB
from manager.controllers.jobkinds.jobset import JOBSET
from manager.controllers.jobkinds.leaderworkerset import LEADERWORKERSET
from manager.controllers.jobkinds.mpijob import MPIJOB
from manager.controllers.jobkinds.paddlejob import PADDLEJOB
from manager.controllers.jobkinds.pod import POD
from manager.controllers.jobkinds.pytorchjob import PYTORCHJOB
from manager.controllers.jobkinds.raycluster import RAYCLUSTER
from manager.controllers.jobkinds.rayjob import RAYJOB
from manager.controllers.jobkinds.serving import DEPLOYMENT, STATEFULSET
from manager.controllers.jobkinds.tfjob import TFJOB
from manager.controllers.jobkinds.trainjob import TRAINJOB
from manager.controllers.jobkinds.xgboostjob import XGBOOSTJOB

KINDS: dict[str, JobKind] = {
    "batch/job": BATCH_JOB,
    "jobset.x-k8s.io/jobset": JOBSET,
    "ray.io/raycluster": RAYCLUSTER,
    "ray.io/rayjob": RAYJOB,
    "trainer.kubeflow.org/trainjob": TRAINJOB,
    "kubeflow.org/pytorchjob": PYTORCHJOB,
    "kubeflow.org/mpijob": MPIJOB,
    "kubeflow.org/tfjob": TFJOB,
    "kubeflow.org/xgboostjob": XGBOOSTJOB,
    "kubeflow.org/paddlejob": PADDLEJOB,
    "kubeflow.org/jaxjob": JAXJOB,
    "leaderworkerset.x-k8s.io/leaderworkerset": LEADERWORKERSET,
    "workload.codeflare.dev/appwrapper": APPWRAPPER,
    "statefulset": STATEFULSET,
    "deployment": DEPLOYMENT,
    "pod": POD,
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
