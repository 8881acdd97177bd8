"""Where a TrainJob says how its pods differ from its runtime's, in the two shapes Kubeflow
Trainer has had, and where kfed writes an admission's placement in each:

- ``spec.podTemplateOverrides`` (Trainer 2.1 and before): a list of overrides, each naming
  its target replicated jobs; the trainer merges an override's node selector, labels and
  annotations over the runtime template's, appends its tolerations and replaces its
  scheduling gates by name. kfed's own are marked by the annotation ``kfed.io/admission``,
  one per pod set.
- ``spec.runtimePatches`` (Trainer 2.2 and after): a list keyed by ``manager``, each a patch
  of the runtime's JobSet spec that the trainer applies in list order as a strategic merge
  patch (maps merged, replicated jobs, containers and scheduling gates merged by name,
  tolerations and other lists replaced). kfed's own is the entry of manager
  ``kfed.io/admission``, written last so that it has the last word, with one replicated job
  per pod set; the trainer's webhook stamps each entry's ``time``.

Which shape a cluster takes is its TrainJob CRD's business (``trainjob.served_shape``); the
readers here take whichever an object has."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from manager.api.view import annotations_of, at, items
from manager.controllers.jobkinds.base import Obj, PodSetPlacement
from manager.kube.jsoncopy import copy_json

Shape = Literal["podTemplateOverrides", "runtimePatches"]
OVERRIDES: Shape = "podTemplateOverrides"
PATCHES: Shape = "runtimePatches"
SHAPES: tuple[Shape, ...] = (OVERRIDES, PATCHES)

ADMISSION_OVERRIDE = "kfed.io/admission"
"""Annotation on the podTemplateOverrides kfed writes (its pods carry it too): they hold the
admission's flavors and are kfed's to replace and remove."""
ADMISSION_MANAGER = "kfed.io/admission"
"""The ``manager`` of kfed's entry of runtimePatches (the trainer wants a domain-prefixed
path): it holds the admission's flavors and is kfed's to replace and remove."""

MERGE_KEYS = {
    "replicatedJobs": "name",
    "initContainers": "name",
    "containers": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumes": "name",
    "imagePullSecrets": "name",
    "schedulingGates": "name",
}
"""The lists a runtime patch merges item by item, by this key (their Go types' patch merge
keys); any other list in a patch replaces the runtime's whole."""


def shape_of(spec: Mapping[str, Any]) -> Shape | None:
    """The shape a TrainJob's spec already uses (None: neither field is set)."""
    for shape in (PATCHES, OVERRIDES):
        if spec.get(shape):
            return shape
    return None


# -- what is kfed's ----------------------------------------------------------------------------


def is_ours_override(override: Obj) -> bool:
    return ADMISSION_OVERRIDE in annotations_of(override)


def is_ours_patch(patch: Mapping[str, Any]) -> bool:
    return patch.get("manager") == ADMISSION_MANAGER


def without_ours(spec: Obj) -> None:
    """Takes kfed's own entries out of both fields of ``spec`` (in place), keeping the
    others (the user's, another controller's) as they are."""
    kept = {
        OVERRIDES: [o for o in items(spec, OVERRIDES) if not is_ours_override(o)],
        PATCHES: [p for p in items(spec, PATCHES) if not is_ours_patch(p)],
    }
    for field, entries in kept.items():
        if entries:
            spec[field] = entries
        elif field in spec:
            del spec[field]


def with_placements(spec: Obj, placements: Mapping[str, PodSetPlacement], shape: Shape) -> None:
    """Writes these placements into ``spec`` (in place) as kfed's own entries of ``shape``,
    replacing kfed's earlier ones; none at all when no pod set has anything to place."""
    if shape == OVERRIDES:
        earlier = [o for o in items(spec, OVERRIDES) if not is_ours_override(o)]
        ours = [admission_override(name, p) for name, p in sorted(placements.items())]
        entries = earlier + [o for o in ours if o]
    else:
        earlier = [p for p in items(spec, PATCHES) if not is_ours_patch(p)]
        patch = admission_patch(placements)
        previous = next((p for p in items(spec, PATCHES) if is_ours_patch(p)), None)
        if patch is not None and previous is not None and _untimed(previous) == patch:
            patch = previous  # unchanged: its time stays as the trainer stamped it
        entries = earlier + ([patch] if patch else [])
    if entries:
        spec[shape] = entries
    else:
        spec.pop(shape, None)


def placements_in(spec: Mapping[str, Any]) -> dict[str, PodSetPlacement]:
    """The node selector and tolerations kfed's own entries give each pod set, in either
    shape."""
    found = {
        target["name"]: PodSetPlacement(
            dict(at(o, "spec", "nodeSelector")), list(items(o, "spec", "tolerations"))
        )
        for o in items(spec, OVERRIDES)
        if is_ours_override(o)
        for target in items(o, "targetJobs")
    }
    for patch in items(spec, PATCHES):
        if is_ours_patch(patch):
            for rj in items(patch, "trainingRuntimeSpec", "template", "spec", "replicatedJobs"):
                pod_spec = at(rj, "template", "spec", "template", "spec")
                found[rj["name"]] = PodSetPlacement(
                    dict(at(pod_spec, "nodeSelector")), list(items(pod_spec, "tolerations"))
                )
    return found


def _pod_template_parts(placement: PodSetPlacement) -> tuple[Obj, Obj]:
    """The pod template metadata and spec fields that carry one pod set's placement: its
    flavors' node selector and tolerations, and for a pod set placed by topology its labels,
    annotations and scheduling gates (so the topology gate and labels reach its pods)."""
    spec: Obj = {}
    if placement.node_selector:
        spec["nodeSelector"] = dict(placement.node_selector)
    if placement.tolerations:
        spec["tolerations"] = copy_json(list(placement.tolerations))
    if placement.scheduling_gates:
        spec["schedulingGates"] = copy_json(list(placement.scheduling_gates))
    metadata: Obj = {}
    if placement.labels:
        metadata["labels"] = dict(placement.labels)
    if placement.annotations:
        metadata["annotations"] = dict(placement.annotations)
    return metadata, spec


def admission_override(pod_set: str, placement: PodSetPlacement) -> Obj | None:
    """kfed's podTemplateOverride for one pod set (None: nothing to place)."""
    metadata, spec = _pod_template_parts(placement)
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


def admission_patch(placements: Mapping[str, PodSetPlacement]) -> Obj | None:
    """kfed's runtime patch: one replicated job per pod set with something to place (None:
    no pod set has). The tolerations are the pod set's whole list (the patch replaces the
    runtime's), as a placement holds them: the submitted ones and the flavors'."""
    replicated = []
    for name, placement in sorted(placements.items()):
        metadata, spec = _pod_template_parts(placement)
        if not spec and not metadata:
            continue
        template: Obj = {}
        if metadata:
            template["metadata"] = metadata
        if spec:
            template["spec"] = spec
        replicated.append({"name": name, "template": {"spec": {"template": template}}})
    if not replicated:
        return None
    return {
        "manager": ADMISSION_MANAGER,
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": replicated}}},
    }


def _untimed(patch: Mapping[str, Any]) -> Obj:
    return {k: v for k, v in patch.items() if k != "time"}


# -- what the trainer makes of them ----------------------------------------------------------


def apply_runtime_patches(jobset_spec: Obj, trainjob_spec: Mapping[str, Any]) -> None:
    """Applies a TrainJob's runtime patches to its runtime's JobSet spec (in place), in
    their order, as the trainer does."""
    for patch in items(trainjob_spec, PATCHES):
        strategic_merge(jobset_spec, at(patch, "trainingRuntimeSpec", "template", "spec"))


def strategic_merge(target: Obj, patch: Mapping[str, Any]) -> None:
    """A strategic merge patch of the JobSet spec's types, as far as a runtime patch
    reaches: objects merged key by key, a null removes its key, the lists of
    ``MERGE_KEYS`` merged item by item, any other value replaced."""
    for key, value in patch.items():
        current = target.get(key)
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(current, dict):
            strategic_merge(current, value)
        elif key in MERGE_KEYS and isinstance(value, list) and isinstance(current, list):
            _merge_list(current, value, MERGE_KEYS[key])
        else:
            target[key] = copy_json(value)


def _merge_list(current: list[Any], patch: list[Any], key: str) -> None:
    for item in patch:
        if not isinstance(item, Mapping):
            continue
        same = next(
            (c for c in current if isinstance(c, dict) and c.get(key) == item.get(key)), None
        )
        if same is None:
            current.append(copy_json(dict(item)))
        else:
            strategic_merge(same, item)


def apply_overrides(rj: Obj, trainjob_spec: Mapping[str, Any]) -> None:
    """Applies a TrainJob's podTemplateOverrides that target this replicated job of its
    runtime's JobSet (in place), as the trainer does."""
    template = rj.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
    pod_spec = template.setdefault("spec", {})
    for override in items(trainjob_spec, OVERRIDES):
        if rj.get("name") not in {t.get("name") for t in items(override, "targetJobs")}:
            continue
        for field in ("labels", "annotations"):
            given = at(override, "metadata", field)
            if given:
                meta = template.setdefault("metadata", {})
                meta[field] = {**at(meta, field), **given}
        o_spec = at(override, "spec")
        if o_spec.get("nodeSelector"):
            pod_spec["nodeSelector"] = {**at(pod_spec, "nodeSelector"), **o_spec["nodeSelector"]}
        if o_spec.get("tolerations"):
            pod_spec["tolerations"] = [*items(pod_spec, "tolerations"), *o_spec["tolerations"]]
        if o_spec.get("schedulingGates"):
            names = {g.get("name") for g in o_spec["schedulingGates"]}
            pod_spec["schedulingGates"] = [
                *(g for g in items(pod_spec, "schedulingGates") if g.get("name") not in names),
                *o_spec["schedulingGates"],
            ]
