"""Kubeflow Trainer v2 TrainJob (``trainer.kubeflow.org/v1alpha1``): it runs as the JobSet
its runtime describes, so its pod sets are that JobSet's replicated jobs, as upstream Kueue
counts them. The runtime (a ClusterTrainingRuntime, or a TrainingRuntime of the TrainJob's
namespace) lives in another object: ``with_references`` reads it before the pod sets are.

What the TrainJob changes in its runtime's JobSet, and so in the pod sets: the trainer job
(the replicated job its runtime labels ``trainjob-ancestor-step: trainer``) runs ``numNodes``
pods with ``resourcesPerNode`` on its ``node`` container, and its ``podTemplateOverrides``
(Trainer 2.1) or ``runtimePatches`` (Trainer 2.2 and after) change the replicated jobs'
templates (``trainjob_overrides``).

The flavors are written in the shape the cluster's TrainJob CRD has (read once per cluster
and kept a while, ``served_shape``: the manager and each worker may run another Trainer):
podTemplateOverrides of kfed's own (marked by an annotation), one per pod set, or a runtime
patch of kfed's own (manager ``kfed.io/admission``); they are removed on eviction. The
trainer accepts changes to them only while the TrainJob is suspended, so they are written
first and the TrainJob resumed after (``run_patches``)."""

from __future__ import annotations

import copy
import logging
import time
import weakref
from collections.abc import Mapping

from manager.api.view import at, items
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
from manager.controllers.jobkinds.trainjob_overrides import (
    OVERRIDES,
    PATCHES,
    SHAPES,
    Shape,
    apply_overrides,
    apply_runtime_patches,
    placements_in,
    shape_of,
    with_placements,
    without_ours,
)
from manager.kube import errors
from manager.kube.api import KubeApi
from manager.kube.resources import CRDS, Resource

log = logging.getLogger(__name__)

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
RUNTIME_KEY = "kfed.io/runtime"
"""Where ``with_references`` puts the runtime's spec in its copy of a TrainJob (never sent to
the API)."""
TRAINJOB_CRD = "trainjobs.trainer.kubeflow.org"
SHAPE_TTL = 300.0
"""Seconds a cluster's TrainJob shape is kept before its CRD is read again (a Trainer
upgraded in place is seen within this)."""
_SHAPES: weakref.WeakKeyDictionary[KubeApi, tuple[float, Shape | None]] = (
    weakref.WeakKeyDictionary()
)


class TrainJobKind(JobKind):
    resource = TRAINJOBS
    workload_prefix = "trainjob"
    default_managed_by = "trainer.kubeflow.org/trainjob-controller"
    pod_label = JOBSET.pod_label  # its pods are its JobSet's, named after it

    def __init__(self, shape: Shape | None = None) -> None:
        self.shape = shape
        """Where it writes the flavors: podTemplateOverrides or runtimePatches; None (the
        registered adapter): where the object already has entries, else podTemplateOverrides.
        ``on_cluster`` gives the adapter of the shape a cluster serves."""

    def __repr__(self) -> str:
        return f"<TrainJobKind {self.shape or 'by object'}>"

    async def on_cluster(self, api: KubeApi) -> JobKind:
        shape = await served_shape(api)
        return _BY_SHAPE[shape] if shape is not None else self

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
        # The user's overrides or patches travel; kfed's are the manager's placement (the
        # worker writes its own, in the shape its Trainer takes).
        spec = super().spec_for_worker(job)
        without_ours(spec)
        return spec

    # -- the flavors, as overrides or a runtime patch of kfed's own ------------------------

    def shape_for(self, job: Obj) -> Shape:
        return self.shape or shape_of(at(job, "spec")) or OVERRIDES

    def with_templates(self, job: Obj, placements: Mapping[str, PodSetPlacement]) -> Obj:
        changed = copy.deepcopy(job)
        spec = changed.setdefault("spec", {})
        with_placements(spec, placements, self.shape_for(job))
        return changed

    def run_patches(self, job: Obj, placements: Mapping[str, PodSetPlacement]) -> list[Obj]:
        placed = merge_patch(job, self.with_templates(job, placements))
        return [p for p in (placed, self.suspend_fields(False)) if p]

    def restore_patch(self, job: Obj, originals: Mapping[str, PodSetPlacement]) -> Obj | None:
        # The submitted templates live in the runtime and the user's overrides or patches,
        # which kfed never changes: removing its own restores them.
        return merge_patch(job, self.with_templates(job, {})) or None

    def placements_of(self, job: Obj) -> dict[str, PodSetPlacement]:
        return placements_in(at(job, "spec"))


def child_jobset_spec(job: Obj) -> Obj:
    """The spec of the JobSet the trainer makes for this TrainJob (as ``with_references``
    left it), as far as its pods go: the runtime's with the TrainJob's runtime patches
    applied, then its node count, node resources and podTemplateOverrides."""
    if RUNTIME_KEY not in job:
        raise MissingReference("its runtime was not read (TrainJobKind.with_references)")
    runtime: Obj = job[RUNTIME_KEY]
    spec = copy.deepcopy(dict(at(runtime, "template", "spec")))
    job_spec = at(job, "spec")
    apply_runtime_patches(spec, job_spec)
    trainer = at(job_spec, "trainer")
    num_nodes = trainer.get("numNodes") or at(runtime, "mlPolicy").get("numNodes") or 1
    for rj in spec.get("replicatedJobs") or []:
        template = rj.setdefault("template", {})
        replicated_spec = template.setdefault("spec", {})
        pod_spec = replicated_spec.setdefault("template", {}).setdefault("spec", {})
        if at(template, "metadata", "labels").get(ANCESTOR_LABEL) == TRAINER_STEP:
            replicated_spec["parallelism"] = replicated_spec["completions"] = int(num_nodes)
            if trainer.get("resourcesPerNode"):
                for container in pod_spec.get("containers") or []:
                    if container.get("name") == NODE_CONTAINER:
                        container["resources"] = copy.deepcopy(trainer["resourcesPerNode"])
        apply_overrides(rj, job_spec)
    return spec


async def served_shape(api: KubeApi) -> Shape | None:
    """Where the TrainJobs of ``api``'s cluster take a placement: ``runtimePatches`` when its
    TrainJob CRD has that field (Trainer 2.2 and after), ``podTemplateOverrides`` when it has
    that one; None when the CRD may not be read (the object decides, ``TrainJobKind.shape``).
    Read from the CRD's schema, kept ``SHAPE_TTL`` seconds per client."""
    now = time.monotonic()
    kept = _SHAPES.get(api)
    if kept is not None and now - kept[0] < SHAPE_TTL:
        return kept[1]
    try:
        shape = shape_of_crd(await api.get(CRDS, TRAINJOB_CRD))
    except (errors.Forbidden, errors.NotFound) as err:
        # Not readable by this identity: decided by the object. Any other error (the API
        # server unreachable a moment) propagates, so that the job waits for an answer.
        log.warning(
            "cannot read the CustomResourceDefinition %s (%s): a TrainJob's flavors go where "
            "it has entries already, else into podTemplateOverrides",
            TRAINJOB_CRD,
            err,
        )
        shape = None
    _SHAPES[api] = (now, shape)
    return shape


def shape_of_crd(crd: Obj) -> Shape | None:
    """The shape the TrainJob CRD's schema of ``v1alpha1`` has (None: neither field)."""
    for version in items(crd, "spec", "versions"):
        if version.get("name") != TRAINJOBS.version:
            continue
        fields = at(version, "schema", "openAPIV3Schema", "properties", "spec", "properties")
        for shape in (PATCHES, OVERRIDES):
            if shape in fields:
                return shape
    return None


TRAINJOB = TrainJobKind()
_BY_SHAPE: dict[Shape, TrainJobKind] = {shape: TrainJobKind(shape) for shape in SHAPES}
