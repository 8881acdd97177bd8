"""KubeRay RayCluster (``ray.io/v1``): a pod set ``head`` of one pod, and one per worker
group of ``replicas * numOfHosts`` pods, as upstream Kueue counts them. A RayCluster serves
until deleted: it never finishes."""

from __future__ import annotations

from manager.api.view import at, items
from manager.controllers.jobkinds.base import JobKind, Obj, Outcome, PodSet, own_template
from manager.kube.resources import Resource

RAYCLUSTERS = Resource("ray.io", "v1", "rayclusters", "RayCluster", True)


class RayClusterKind(JobKind):
    resource = RAYCLUSTERS
    workload_prefix = "raycluster"
    default_managed_by = "ray.io/kuberay-operator"
    pod_label = "ray.io/cluster"

    def manages(self, job: Obj) -> bool:
        """Not the RayCluster of a RayJob (it carries the RayJob's labels, queue and all):
        the RayJob's Workload answers for it, as upstream's owner rule says."""
        return not any(
            ref.get("controller") and ref.get("kind") == "RayJob"
            for ref in items(job, "metadata", "ownerReferences")
        )

    def pod_sets(self, job: Obj) -> list[PodSet]:
        spec = at(job, "spec")
        result = [PodSet("head", 1, own_template(at(spec, "headGroupSpec")))]
        for group in items(spec, "workerGroupSpecs"):
            replicas = group.get("replicas")
            hosts = group.get("numOfHosts")
            count = (1 if replicas is None else int(replicas)) * (
                1 if hosts is None else max(int(hosts), 1)
            )
            result.append(PodSet(str(group.get("groupName", "")), count, own_template(group)))
        return result

    def outcome(self, job: Obj) -> Outcome | None:
        return None

    def is_active(self, job: Obj) -> bool:
        status = at(job, "status")
        return int(status.get("readyWorkerReplicas") or 0) > 0 or status.get("state") == "ready"


RAYCLUSTER = RayClusterKind()
