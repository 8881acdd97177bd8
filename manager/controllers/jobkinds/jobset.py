"""JobSet (``jobset.x-k8s.io/v1alpha2``): one pod set per replicated job, of
``replicas * min(parallelism, completions)`` pods, as upstream Kueue counts them. The whole
JobSet is admitted at once (gang) and placed on one worker."""

from __future__ import annotations

from manager.api.view import at, items
from manager.controllers.jobkinds.base import (
    JobKind,
    Obj,
    Outcome,
    PodSet,
    outcome_of_conditions,
    own_template,
)
from manager.controllers.jobkinds.batchjob import pods_per_job
from manager.kube.resources import Resource

JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", True)


class JobSetKind(JobKind):
    resource = JOBSETS
    workload_prefix = "jobset"
    default_managed_by = "jobset.sigs.k8s.io/jobset-controller"
    pod_label = "jobset.sigs.k8s.io/jobset-name"

    def pod_sets(self, job: Obj) -> list[PodSet]:
        result = []
        for rj in items(job, "spec", "replicatedJobs"):
            job_spec = at(rj, "template", "spec")
            replicas = 1 if rj.get("replicas") is None else int(rj["replicas"])
            result.append(
                PodSet(
                    str(rj.get("name", "")),
                    replicas * pods_per_job(job_spec),
                    own_template(job_spec),
                )
            )
        return result

    def outcome(self, job: Obj) -> Outcome | None:
        return outcome_of_conditions(job, "Completed", "Failed", "JobSet")

    def is_active(self, job: Obj) -> bool:
        statuses = items(job, "status", "replicatedJobsStatus")
        return any(int(s.get("active") or 0) > 0 for s in statuses)


JOBSET = JobSetKind()
