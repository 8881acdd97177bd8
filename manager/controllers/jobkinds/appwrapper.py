"""AppWrapper (``workload.codeflare.dev/v1beta2``, the AppWrapper operator of
github.com/project-codeflare/appwrapper): a wrapper of other objects (``spec.components``,
each a whole object in ``template``: a batch/v1 Job, a JobSet, a PyTorchJob, ...) that its
operator creates when the AppWrapper is resumed and deletes when it is suspended.

As upstream Kueue's integration ``workload.codeflare.dev/appwrapper`` reads it:

- One pod set per pod set of each component, in order, named ``<name>-<i>`` (``i`` counting
  over every component), of ``replicas`` pods (1 when unset), its template the pod template
  at the pod set's ``path`` inside the component (``template.spec.template``: the wrapped
  object's ``spec.template``). A component's pod sets are those the operator recorded in
  ``status.componentStatus`` once it has, else those it declares in ``podSets``, else those
  the operator infers for a kind it knows (``INFERRED``), as the module's
  ``GetComponentPodSpecs`` finds them; a path that leads to no pod template is skipped.
- kfed writes each pod set's flavors into that template in place, inside the wrapped object
  (upstream writes them into ``podSetInfos``, which the operator merges in when it creates
  the object; the template is the same object either way).
- Suspended by ``spec.suspend``; ``managedBy`` is ``spec.managedBy``; pods may still run
  while its ``QuotaReserved`` condition is True (the operator clears it once it has deleted
  the wrapped objects).
- Finished when ``status.phase`` is ``Succeeded``, or ``Failed`` once its resources are
  deleted (``ResourcesDeployed`` no longer True).
- The operator labels every pod of it ``workload.codeflare.dev/appwrapper=<name>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from manager.api import constants as C
from manager.api.view import at, items
from manager.controllers.jobkinds.base import JobKind, Obj, Outcome, PodSet
from manager.controllers.jobkinds.batchjob import pods_per_job
from manager.kube.jsoncopy import copy_json
from manager.kube.resources import Resource

APPWRAPPERS = Resource("workload.codeflare.dev", "v1beta2", "appwrappers", "AppWrapper", True)
APPWRAPPER_CONTROLLER = "workload.codeflare.dev/appwrapper-controller"
"""The operator's own ``managedBy``: it runs an AppWrapper whose ``managedBy`` is unset or
this."""
APPWRAPPER_LABEL = "workload.codeflare.dev/appwrapper"
"""The label the operator puts on each wrapped object and each of its pods."""

_STEP = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")


def path_steps(path: str) -> list[str | int] | None:
    """The steps of a pod set's ``path`` (``template.spec.replicatedJobs[0].template``: keys
    and list indexes); None when it is not one the operator reads (it must start with
    ``template``)."""
    if not path.startswith("template"):
        return None
    steps: list[str | int] = ["template"]
    rest = path[len("template") :]
    while rest:
        match = _STEP.match(rest)
        if match is None:
            return None
        key, index = match.groups()
        steps.append(int(index) if index is not None else key)
        rest = rest[match.end() :]
    return steps


def value_at(component: Mapping[str, Any], path: str) -> Any:
    """What ``path`` leads to inside a component (the object itself, not a copy), or None."""
    steps = path_steps(path)
    if steps is None:
        return None
    current: Any = component
    for step in steps:
        if isinstance(step, int):
            if not isinstance(current, list) or step >= len(current):
                return None
        elif not isinstance(current, dict) or step not in current:
            return None
        current = current[step]
    return current


def template_at(component: Mapping[str, Any], path: str) -> Obj | None:
    """The pod template at ``path`` (a mapping with a ``spec`` mapping), else None."""
    found = value_at(component, path)
    if isinstance(found, dict) and isinstance(found.get("spec"), dict):
        return found
    return None


def _count(component: Mapping[str, Any], path: str, default: int = 1) -> int:
    value = value_at(component, path)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _pod_set(path: str, replicas: int) -> Obj:
    return {"path": path, "replicas": replicas}


def _ray(component: Mapping[str, Any], prefix: str) -> list[Obj]:
    result = [_pod_set(f"{prefix}headGroupSpec.template", 1)]
    groups = value_at(component, f"{prefix}workerGroupSpecs")
    for i, group in enumerate(groups if isinstance(groups, list) else []):
        if isinstance(group, dict) and "template" in group:
            path = f"{prefix}workerGroupSpecs[{i}]."
            result.append(_pod_set(f"{path}template", _count(component, f"{path}replicas")))
    return result


def _jobset(component: Mapping[str, Any]) -> list[Obj]:
    result = []
    jobs = value_at(component, "template.spec.replicatedJobs")
    for i, job in enumerate(jobs if isinstance(jobs, list) else []):
        if not isinstance(job, dict) or "template" not in job:
            continue
        path = f"template.spec.replicatedJobs[{i}]."
        pods = pods_per_job(at(job, "template", "spec"))
        replicas = _count(component, f"{path}replicas")
        result.append(_pod_set(f"{path}template.spec.template", replicas * pods))
    return result


def _pytorchjob(component: Mapping[str, Any]) -> list[Obj]:
    result = []
    for replica_type in ("Master", "Worker"):
        path = f"template.spec.pytorchReplicaSpecs.{replica_type}."
        if value_at(component, f"{path}template") is not None:
            result.append(_pod_set(f"{path}template", _count(component, f"{path}replicas")))
    return result


def inferred(component: Mapping[str, Any]) -> list[Obj]:
    """The pod sets the operator infers for a wrapped object of a kind it knows (its
    ``InferPodSets``); none for another kind (it must declare them)."""
    obj = component.get("template")
    if not isinstance(obj, dict):
        return []  # not an object: no pod set (the API server refuses such a template)
    kind = (str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))
    if kind == ("batch/v1", "Job"):
        return [_pod_set("template.spec.template", pods_per_job(at(obj, "spec")))]
    if kind == ("jobset.x-k8s.io/v1alpha2", "JobSet"):
        return _jobset(component)
    if kind == ("kubeflow.org/v1", "PyTorchJob"):
        return _pytorchjob(component)
    if kind == ("ray.io/v1", "RayCluster"):
        return _ray(component, "template.spec.")
    if kind == ("ray.io/v1", "RayJob"):
        return _ray(component, "template.spec.rayClusterSpec.")
    if kind == ("v1", "Pod"):
        return [_pod_set("template", 1)]
    if kind in (("apps/v1", "Deployment"), ("apps/v1", "StatefulSet")):
        replicas = _count(component, "template.spec.replicas")
        return [_pod_set("template.spec.template", replicas)]
    return []


def component_pod_sets(job: Obj) -> Iterator[tuple[Obj, Obj]]:
    """Each component with each of its pod sets (``path``, ``replicas``), in order: the
    operator's record in ``status.componentStatus`` when it has one per component, else
    each component's declared ``podSets``, else the inferred ones."""
    components: Sequence[Any] = items(job, "spec", "components")
    recorded: Sequence[Any] = items(job, "status", "componentStatus")
    use_status = len(recorded) == len(components)
    for i, component in enumerate(components):
        if not isinstance(component, dict):
            continue
        if use_status and isinstance(recorded[i], dict):
            pod_sets = list(items(recorded[i], "podSets"))
        else:
            pod_sets = list(items(component, "podSets")) or inferred(component)
        for pod_set in pod_sets:
            if isinstance(pod_set, dict) and isinstance(pod_set.get("path"), str):
                yield component, pod_set


def _replicas(pod_set: Mapping[str, Any]) -> int:
    replicas = pod_set.get("replicas")
    return 1 if replicas is None else int(replicas)


def _condition_true(job: Obj, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in items(job, "status", "conditions")
    )


class AppWrapperKind(JobKind):
    resource = APPWRAPPERS
    workload_prefix = "appwrapper"
    default_managed_by = APPWRAPPER_CONTROLLER
    pod_label = APPWRAPPER_LABEL

    def pod_sets(self, job: Obj) -> list[PodSet]:
        name = str(at(job, "metadata").get("name") or "")
        result: list[PodSet] = []
        for component, pod_set in component_pod_sets(job):
            template = template_at(component, pod_set["path"])
            if template is None:
                continue  # as upstream: a path to no pod template is no pod set
            result.append(PodSet(f"{name}-{len(result)}", _replicas(pod_set), template))
        return result

    def outcome(self, job: Obj) -> Outcome | None:
        phase = at(job, "status").get("phase")
        if phase == "Succeeded":
            return Outcome(True, "AppWrapper finished successfully")
        if phase == "Failed" and not _condition_true(job, "ResourcesDeployed"):
            return Outcome(False, "AppWrapper failed")
        return None

    def is_active(self, job: Obj) -> bool:
        return _condition_true(job, "QuotaReserved")

    def spec_for_worker(self, job: Obj) -> Obj:
        """The manager's spec, suspended, without ``managedBy``, and no wrapped object
        carrying a queue label: the worker admits the AppWrapper; what its operator creates
        from it must not be queued a second time there."""
        spec = super().spec_for_worker(job)
        wrapped = [c.get("template") for c in items(spec, "components") if isinstance(c, dict)]
        templates = [ps.template for ps in self.pod_sets({"spec": spec})]
        for obj in (*wrapped, *templates):
            labels = at(obj, "metadata").get("labels") if isinstance(obj, dict) else None
            if isinstance(labels, dict):
                labels.pop(C.QUEUE_NAME_LABEL, None)
        return spec

    def status_for_manager(self, remote: Obj) -> Obj:
        """The worker's status, ``resettingCount`` written out (0 where the operator omits
        it): the manager's status is merge-patched, and a copy moved to another worker
        starts counting again."""
        status = copy_json(dict(at(remote, "status")))
        status.setdefault("resettingCount", 0)
        return status


APPWRAPPER = AppWrapperKind()
