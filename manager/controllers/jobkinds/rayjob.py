"""KubeRay RayJob (``ray.io/v1``), as upstream Kueue v0.19.2 counts and runs it.

- Pod sets: its RayCluster's, from ``spec.rayClusterSpec`` (``head`` of one pod, one per
  worker group of ``replicas * numOfHosts``), then ``submitter`` (one pod) when
  ``spec.submissionMode`` is ``K8sJobMode`` (the CRD's default, so also when unset):
  the submitter Job's pod template, ``spec.submitterPodTemplate``, or where the RayJob has
  none, KubeRay's default one (container ``ray-job-submitter`` with the head's image,
  requests 500m CPU / 200Mi, limits 1 CPU / 1Gi), which running the RayJob writes there, as
  upstream does. In ``SidecarMode`` the head pod set carries that submitter container too.
- Suspended by ``spec.suspend``; ``managedBy`` is ``spec.managedBy``.
- Finished when ``status.jobDeploymentStatus`` is ``Complete`` or ``Failed``, succeeded only
  when ``status.jobStatus`` is ``SUCCEEDED``, with ``status.message``; pods may run unless it
  is ``Suspended`` or ``New`` (or not written yet).
- Refused (``refusal``) with upstream's field errors: no ``shutdownAfterJobFinishes``, a
  ``clusterSelector`` with a ``rayClusterSpec``, neither, in-tree autoscaling, more than 8
  pod sets, a worker group named ``head``. A RayJob with a ``clusterSelector`` and no
  ``rayClusterSpec`` runs on an existing RayCluster: not queued (upstream skips it).
- Its pods: the submitter Job's (named as the RayJob: ``batch.kubernetes.io/job-name``) carry
  the Ray job's output; its RayCluster's (``ray.io/cluster=<status.rayClusterName>``, a
  generated name) go with the RayCluster, which KubeRay deletes when the RayJob is suspended.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from manager.api.view import at, items
from manager.controllers.jobkinds.base import JobKind, Obj, Outcome, PodSet, PodSetPlacement
from manager.controllers.jobkinds.raycluster import RAYCLUSTER
from manager.kube.jsoncopy import copy_json
from manager.kube.resources import Resource

RAYJOBS = Resource("ray.io", "v1", "rayjobs", "RayJob", True)
K8S_JOB_MODE = "K8sJobMode"
SIDECAR_MODE = "SidecarMode"
SUBMITTER = "submitter"
SUBMITTER_CONTAINER = "ray-job-submitter"
SUBMITTER_RESOURCES: Obj = {
    "limits": {"cpu": "1", "memory": "1Gi"},
    "requests": {"cpu": "500m", "memory": "200Mi"},
}
"""KubeRay's default submitter container's resources (upstream counts them)."""
MAX_POD_SETS = 8
FINISHED = ("Complete", "Failed")
NOT_ACTIVE = ("", "New", "Suspended")
CLUSTER_SPEC = "spec.rayClusterSpec"


class RayJobKind(JobKind):
    resource = RAYJOBS
    workload_prefix = "rayjob"
    default_managed_by = "ray.io/kuberay-operator"
    pod_label = "batch.kubernetes.io/job-name"

    def manages(self, job: Obj) -> bool:
        spec = at(job, "spec")
        return not (
            spec.get("clusterSelector") and not isinstance(spec.get("rayClusterSpec"), dict)
        )

    def pod_sets(self, job: Obj) -> list[PodSet]:
        spec = at(job, "spec")
        result = RAYCLUSTER.pod_sets({"spec": at(spec, "rayClusterSpec")})
        if _mode(spec) == K8S_JOB_MODE:
            template = spec.get("submitterPodTemplate")
            if not isinstance(template, dict):
                template = default_submitter(job)
            result.append(PodSet(SUBMITTER, 1, template))
        return result

    def workload_pod_sets(self, job: Obj) -> list[Obj]:
        """Every kind's, the head's with KubeRay's submitter container in ``SidecarMode``."""
        pod_sets = super().workload_pod_sets(job)
        if _mode(at(job, "spec")) == SIDECAR_MODE and pod_sets:
            spec = pod_sets[0]["template"].setdefault("spec", {})
            spec.setdefault("containers", []).append(
                {"name": SUBMITTER_CONTAINER, "resources": copy_json(SUBMITTER_RESOURCES)}
            )
        return pod_sets

    def with_templates(self, job: Obj, placements: Mapping[str, PodSetPlacement]) -> Obj:
        """Every kind's, on a copy that has the default submitter template where the RayJob
        has none: running it writes that one, placed, as upstream's run does."""
        spec = at(job, "spec")
        if _mode(spec) == K8S_JOB_MODE and not isinstance(spec.get("submitterPodTemplate"), dict):
            job = copy_json(job)
            job["spec"]["submitterPodTemplate"] = default_submitter(job)
        return super().with_templates(job, placements)

    def outcome(self, job: Obj) -> Outcome | None:
        status = at(job, "status")
        deployment = status.get("jobDeploymentStatus")
        if deployment not in FINISHED:
            return None
        succeeded = status.get("jobStatus") == "SUCCEEDED"
        default = "RayJob finished successfully" if succeeded else f"RayJob {deployment}"
        return Outcome(succeeded, str(status.get("message") or default))

    def is_active(self, job: Obj) -> bool:
        return (at(job, "status").get("jobDeploymentStatus") or "") not in NOT_ACTIVE

    def refusal(self, job: Obj) -> str | None:
        errors = refusals(job)
        if not errors:
            return None
        return errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"


def _mode(spec: Mapping[str, object]) -> str:
    """Its ``submissionMode``; unset: ``K8sJobMode``, the CRD's default (a RayJob read from
    the API server always has one; a manifest ``kfed whatif`` reads may not)."""
    return str(spec.get("submissionMode") or K8S_JOB_MODE)


def default_submitter(job: Obj) -> Obj:
    """KubeRay's default submitter pod template (the image of the head's first container)."""
    head = items(
        at(job, "spec", "rayClusterSpec", "headGroupSpec", "template"), "spec", "containers"
    )
    container: Obj = {"name": SUBMITTER_CONTAINER, "resources": copy_json(SUBMITTER_RESOURCES)}
    if head and head[0].get("image"):
        container["image"] = head[0]["image"]
    return {"spec": {"containers": [container], "restartPolicy": "Never"}}


def refusals(job: Obj) -> list[str]:
    """Upstream's field errors for a queued RayJob, in its order and words."""
    spec = at(job, "spec")
    selector = spec.get("clusterSelector")
    cluster = spec.get("rayClusterSpec")
    if selector and isinstance(cluster, dict):
        return [
            f"spec.clusterSelector: Invalid value: {_go_map(selector)}: "
            "a kueue managed job should not use an existing cluster"
        ]
    if selector:
        return []
    if not isinstance(cluster, dict):
        return [
            "spec.rayClusterSpec: Required value: rayClusterSpec is required for "
            "Kueue-managed jobs that don't use clusterSelector"
        ]
    found = []
    if not spec.get("shutdownAfterJobFinishes"):
        found.append(
            "spec.shutdownAfterJobFinishes: Invalid value: false: a kueue managed job should "
            "delete the cluster after finishing"
        )
    if cluster.get("enableInTreeAutoscaling"):
        found.append(
            f"{CLUSTER_SPEC}.enableInTreeAutoscaling: Invalid value: true: a kueue managed "
            "job should only use autoscaling when workload slicing is enabled"
        )
    groups = items(cluster, "workerGroupSpecs")
    if len(groups) + 1 > MAX_POD_SETS:
        found.append(
            f"{CLUSTER_SPEC}.workerGroupSpecs: Too many: {len(groups) + 1}: must have at "
            f"most {MAX_POD_SETS} items"
        )
    for i, group in enumerate(groups):
        if group.get("groupName") == "head":
            found.append(
                f"{CLUSTER_SPEC}.workerGroupSpecs[{i}].groupName: Forbidden: "
                '"head" is reserved for the head group'
            )
    return found


def _go_map(value: object) -> str:
    """A selector as Go's ``%#v`` prints it in a field error, keys sorted."""
    if not isinstance(value, dict):
        return json.dumps(value)
    inner = ", ".join(f"{json.dumps(str(k))}:{json.dumps(str(value[k]))}" for k in sorted(value))
    return f"map[string]string{{{inner}}}"


RAYJOB = RayJobKind()
