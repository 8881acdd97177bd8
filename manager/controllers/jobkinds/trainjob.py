"""Kubeflow Trainer v2 TrainJob (``trainer.kubeflow.org/v1alpha1``): it runs as the JobSet
its runtime describes, so its pod sets are that JobSet's replicated jobs, as upstream Kueue
counts them. The runtime (a ClusterTrainingRuntime, or a TrainingRuntime of the TrainJob's
namespace) lives in another object: ``with_references`` reads it before the pod sets are.

What the TrainJob changes in its runtime's JobSet, and so in the pod sets: the trainer job
(the replicated job its runtime labels ``trainjob-ancestor-step: trainer``) runs ``numNodes``
pods with ``resourcesPerNode`` on its ``node`` container, and ``podTemplateOverrides`` set
node selectors and tolerations per replicated job.

The flavors are written as podTemplateOverrides of kfed's own (marked by an annotation), one
per pod set, and removed on eviction; the trainer accepts changes to them only while the
TrainJob is suspended, so they are written first and the TrainJob resumed after
(``run_patches``)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from manager.api.view import annotations_of, at, items
from manager.controllers.jobkinds.base import (
    JobKind,
    MissingReference,
    Obj,
    Outcome,
    PodSet,
    PodSetPlacement,
    merge_patch,
    outcome_of_conditions,
)
from manager.controllers.jobkinds.jobset import JOBSET
from manager.kube import errors
from manager.kube.api import KubeApi
from manager.kube.resources import Resource

TRAINJOBS = Resource("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", True)
CLUSTER_TRAINING_RUNTIMES = Resource(
    "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "ClusterTrainingRuntime", False
)
TRAINING_RUNTIMES = Resource(
    "trainer.kubeflow.org", "v1alpha1", "trainingruntimes", "TrainingRuntime", True
)
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_STEP = "trainer"
NODE_CONTAINER = "node"
ADMISSION_OVERRIDE = "kfed.io/admission"
"""Annotation on the podTemplateOverrides kfed writes (its pods carry it too): they hold the
admission's flavors and are kfed's to replace and remove."""
RUNTIME_KEY = "kfed.io/runtime"
"""Where ``with_references`` puts the runtime's spec in its copy of a TrainJob (never sent to
the API)."""


class TrainJobKind(JobKind):
    resource = TRAINJOBS
    workload_prefix = "trainjob"
    default_managed_by = "trainer.kubeflow.org/trainjob-controller"
    pod_label = JOBSET.pod_label  # its pods are its JobSet's, named after it

    async def with_references(self, job: Obj, api: KubeApi) -> Obj:
        ref = at(job, "spec", "runtimeRef")
        name = str(ref.get("name") or "")
        cluster_scoped = (ref.get("kind") or "ClusterTrainingRuntime") == "ClusterTrainingRuntime"
        res = CLUSTER_TRAINING_RUNTIMES if cluster_scoped else TRAINING_RUNTIMES
        namespace = None if cluster_scoped else job["metadata"].get("namespace")
        try:
            runtime = await api.get(res, name, namespace)
        except errors.NotFound:
            where = "" if cluster_scoped else f" in namespace {namespace}"
            raise MissingReference(
                f"its runtime {res.kind} {name!r}{where} does not exist"
            ) from None
        resolved = copy.deepcopy(job)
        resolved[RUNTIME_KEY] = dict(at(runtime, "spec"))
        return resolved

    def pod_sets(self, job: Obj) -> list[PodSet]:
        return JOBSET.pod_sets({"spec": child_jobset_spec(job)})

    def outcome(self, job: Obj) -> Outcome | None:
        return outcome_of_conditions(job, "Complete", "Failed", "TrainJob")

    def is_active(self, job: Obj) -> bool:
        statuses = items(job, "status", "jobsStatus")
        return any(int(s.get("active") or 0) > 0 for s in statuses)

    def spec_for_worker(self, job: Obj) -> Obj:
        spec = super().spec_for_worker(job)
        users = user_overrides(spec)
        if users:
            spec["podTemplateOverrides"] = users
        else:
            spec.pop("podTemplateOverrides", None)
        return spec

    # -- the flavors, as podTemplateOverrides of kfed's own --------------------------------

    def with_templates(self, job: Obj, placements: Mapping[str, PodSetPlacement]) -> Obj:
        changed = copy.deepcopy(job)
        ours = [admission_override(name, p) for name, p in sorted(placements.items())]
        overrides = user_overrides(at(changed, "spec")) + [o for o in ours if o]
        spec = changed.setdefault("spec", {})
        if overrides:
            spec["podTemplateOverrides"] = overrides
        else:
            spec.pop("podTemplateOverrides", None)
        return changed

    def run_patches(self, job: Obj, placements: Mapping[str, PodSetPlacement]) -> list[Obj]:
        overrides = merge_patch(job, self.with_templates(job, placements))
        return [p for p in (overrides, self.suspend_fields(False)) if p]

    def restore_patch(self, job: Obj, originals: Mapping[str, PodSetPlacement]) -> Obj | None:
        # The submitted templates live in the runtime and the user's overrides, which kfed
        # never changes: removing its own overrides restores them.
        return merge_patch(job, self.with_templates(job, {})) or None

    def placements_of(self, job: Obj) -> dict[str, PodSetPlacement]:
        return {
            target["name"]: PodSetPlacement(
                dict(at(o, "spec", "nodeSelector")),
                list(items(o, "spec", "tolerations")),
            )
            for o in items(job, "spec", "podTemplateOverrides")
            if _is_ours(o)
            for target in items(o, "targetJobs")
        }


def child_jobset_spec(job: Obj) -> Obj:
    """The spec of the JobSet the trainer makes for this TrainJob (as ``with_references``
    left it), as far as its pods go: the runtime's, with the TrainJob's node count, node
    resources and podTemplateOverrides applied."""
    if RUNTIME_KEY not in job:
        raise MissingReference("its runtime was not read (TrainJobKind.with_references)")
    runtime: Obj = job[RUNTIME_KEY]
    spec = copy.deepcopy(dict(at(runtime, "template", "spec")))
    trainer = at(job, "spec", "trainer")
    num_nodes = trainer.get("numNodes") or at(runtime, "mlPolicy").get("numNodes") or 1
    overrides = items(job, "spec", "podTemplateOverrides")
    for rj in spec.get("replicatedJobs") or []:
        job_template = rj.setdefault("template", {})
        labels = at(job_template, "metadata", "labels")
        job_spec = job_template.setdefault("spec", {})
        pod_spec = job_spec.setdefault("template", {}).setdefault("spec", {})
        if labels.get(ANCESTOR_LABEL) == TRAINER_STEP:
            job_spec["parallelism"] = job_spec["completions"] = int(num_nodes)
            if trainer.get("resourcesPerNode"):
                for container in pod_spec.get("containers") or []:
                    if container.get("name") == NODE_CONTAINER:
                        container["resources"] = copy.deepcopy(trainer["resourcesPerNode"])
        for override in overrides:
            if rj.get("name") not in {t.get("name") for t in items(override, "targetJobs")}:
                continue
            _merge_override_metadata(job_spec["template"], at(override, "metadata"))
            o_spec = at(override, "spec")
            if o_spec.get("nodeSelector"):
                pod_spec["nodeSelector"] = {
                    **at(pod_spec, "nodeSelector"),
                    **o_spec["nodeSelector"],
                }
            if o_spec.get("tolerations"):
                pod_spec["tolerations"] = [
                    *items(pod_spec, "tolerations"),
                    *o_spec["tolerations"],
                ]
            if o_spec.get("schedulingGates"):
                names = {g.get("name") for g in o_spec["schedulingGates"]}
                pod_spec["schedulingGates"] = [
                    *(g for g in items(pod_spec, "schedulingGates") if g.get("name") not in names),
                    *o_spec["schedulingGates"],
                ]
    return spec


def _merge_override_metadata(template: Obj, metadata: Mapping[str, Any]) -> None:
    """An override's labels and annotations over the runtime template's, as the trainer
    merges them (a topology request may come either way)."""
    for field in ("labels", "annotations"):
        if metadata.get(field):
            meta = template.setdefault("metadata", {})
            meta[field] = {**at(meta, field), **metadata[field]}


def _is_ours(override: Obj) -> bool:
    return ADMISSION_OVERRIDE in annotations_of(override)


def user_overrides(spec: Mapping[str, Any]) -> list[Obj]:
    return [o for o in items(spec, "podTemplateOverrides") if not _is_ours(o)]


def admission_override(pod_set: str, placement: PodSetPlacement) -> Obj | None:
    """kfed's override for one pod set: its flavors' node selector and tolerations, and for
    a pod set placed by topology its labels, annotations and scheduling gates (the trainer
    merges them over the runtime's, so the topology gate and labels reach its pods)."""
    spec: Obj = {}
    if placement.node_selector:
        spec["nodeSelector"] = dict(placement.node_selector)
    if placement.tolerations:
        spec["tolerations"] = list(placement.tolerations)
    if placement.scheduling_gates:
        spec["schedulingGates"] = list(placement.scheduling_gates)
    metadata: Obj = {}
    if placement.labels:
        metadata["labels"] = dict(placement.labels)
    if placement.annotations:
        metadata["annotations"] = dict(placement.annotations)
    if not spec and not metadata:
        return None
    annotations = {**at(metadata, "annotations"), ADMISSION_OVERRIDE: "flavors"}
    override: Obj = {
        "targetJobs": [{"name": pod_set}],
        "metadata": {**metadata, "annotations": annotations},
    }
    if spec:
        override["spec"] = spec
    return override


TRAINJOB = TrainJobKind()
