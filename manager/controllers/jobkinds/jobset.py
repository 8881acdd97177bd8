"""JobSet (``jobset.x-k8s.io/v1alpha2``): one pod set per replicated job, of
``replicas * min(parallelism, completions)`` pods, as upstream Kueue counts them. The whole
JobSet is admitted at once (gang) and placed on one worker."""

from __future__ import annotations

from manager.controllers.jobkinds.base import JobKind, Obj, Outcome, PodSet, outcome_of_conditions
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
        for rj in (job.get("spec") or {}).get("replicatedJobs") or []:
            job_spec = (rj.get("template") or {}).get("spec") or {}
            replicas = 1 if rj.get("replicas") is None else int(rj["replicas"])
            result.append(
                PodSet(
                    str(rj.get("name", "")),
                    replicas * pods_per_job(job_spec),
                    job_spec.get("template") or {},
                )
            )
        return result

    def outcome(self, job: Obj) -> Outcome | None:
        return outcome_of_conditions(job, "Completed", "Failed", "JobSet")

    def is_active(self, job: Obj) -> bool:
        statuses = (job.get("status") or {}).get("replicatedJobsStatus") or []
        return any(int(s.get("active") or 0) > 0 for s in statuses)


JOBSET = JobSetKind()
