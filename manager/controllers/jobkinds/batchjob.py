"""``batch/v1`` Job: one pod set ``main`` of ``min(parallelism, completions)`` pods."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from manager.api.view import at
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.base import (
    JobKind,
    Obj,
    Outcome,
    PodSet,
    outcome_of_conditions,
    own_template,
)
from manager.kube import resources as R

GENERATED_LABELS = (
    "batch.kubernetes.io/controller-uid",
    "batch.kubernetes.io/job-name",
    "controller-uid",
    "job-name",
)
"""Labels the Job controller sets itself, on the Job and its pod template: a copy of a Job
must not carry the manager's (the worker's Job controller sets its own)."""


def pods_per_job(job_spec: Mapping[str, Any]) -> int:
    """Pods a Job runs at once: ``parallelism`` (1 when unset), at most ``completions``."""
    parallelism = job_spec.get("parallelism")
    count = 1 if parallelism is None else int(parallelism)
    completions = job_spec.get("completions")
    return count if completions is None else min(count, int(completions))


class BatchJob(JobKind):
    resource = R.JOBS
    workload_prefix = "job"
    default_managed_by = "kubernetes.io/job-controller"
    pod_label = "batch.kubernetes.io/job-name"
    status_counters = ("active", "ready", "terminating")
    controller_labels = GENERATED_LABELS

    def pod_sets(self, job: Obj) -> list[PodSet]:
        spec = at(job, "spec")
        return [PodSet("main", pods_per_job(spec), own_template(spec))]

    def outcome(self, job: Obj) -> Outcome | None:
        return outcome_of_conditions(job, "Complete", "Failed", "Job")

    def is_active(self, job: Obj) -> bool:
        return bool(at(job, "status").get("active"))

    def templates_mutable(self, job: Obj) -> bool:
        # The Job controller clears startTime once a suspended Job's pods are gone; until then
        # the API server refuses template changes.
        return not at(job, "status").get("startTime")

    def owner_of(self, workload: Obj) -> str | None:
        return ws.owner_job(workload)

    def spec_for_worker(self, job: Obj) -> Obj:
        spec = super().spec_for_worker(job)
        spec.pop("selector", None)  # the worker's Job controller picks its own
        template_meta = own_template(spec).get("metadata")
        if template_meta:
            labels = at(template_meta, "labels")
            template_meta["labels"] = {k: v for k, v in labels.items() if k not in GENERATED_LABELS}
        return spec

    def status_for_manager(self, remote: Obj) -> Obj:
        status = super().status_for_manager(remote)
        status.pop("uncountedTerminatedPods", None)  # the worker's bookkeeping, not a result
        return status


BATCH_JOB = BatchJob()
