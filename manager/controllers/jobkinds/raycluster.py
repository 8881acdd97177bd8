"""KubeRay RayCluster (``ray.io/v1``): a pod set ``head`` of one pod, and one per worker
group of ``replicas * numOfHosts`` pods, as upstream Kueue counts them. A RayCluster serves
until deleted: it never finishes."""

from __future__ import annotations

from manager.controllers.jobkinds.base import JobKind, Obj, Outcome, PodSet
from manager.kube.resources import Resource

RAYCLUSTERS = Resource("ray.io", "v1", "rayclusters", "RayCluster", True)


class RayClusterKind(JobKind):
    resource = RAYCLUSTERS
    workload_prefix = "raycluster"
    default_managed_by = "ray.io/kuberay-operator"
    pod_label = "ray.io/cluster"

    def pod_sets(self, job: Obj) -> list[PodSet]:
        spec = job.get("spec") or {}
        head = spec.get("headGroupSpec") or {}
        result = [PodSet("head", 1, head.get("template") or {})]
        for group in spec.get("workerGroupSpecs") or []:
            replicas = group.get("replicas")
            hosts = group.get("numOfHosts")
            count = (1 if replicas is None else int(replicas)) * (
                1 if hosts is None else max(int(hosts), 1)
            )
            result.append(
                PodSet(str(group.get("groupName", "")), count, group.get("template") or {})
            )
        return result

    def outcome(self, job: Obj) -> Outcome | None:
        return None

    def is_active(self, job: Obj) -> bool:
        status = job.get("status") or {}
        return int(status.get("readyWorkerReplicas") or 0) > 0 or status.get("state") == "ready"


RAYCLUSTER = RayClusterKind()
