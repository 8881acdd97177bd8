"""A plain Pod (``core/v1``, upstream Kueue's ``pod`` integration): one Workload per pod,
federated whole to one worker.

What upstream Kueue v0.19.2 does (``pkg/controller/jobs/pod``), and kfed with it:

- its webhook gives a Pod that names a queue (and whose controller is no kind Kueue
  manages) the scheduling gate ``kueue.x-k8s.io/admission`` and the label
  ``kueue.x-k8s.io/managed: "true"`` at creation; the gate is its hold (a Pod has no
  ``suspend``), removed once admitted, when the flavor's nodeSelector and tolerations are
  added (the API server allows only additions to either, and only removal of gates);
- a single pod is one Workload ``pod-<name>-<uid[:5]>`` of one pod set ``main`` of 1;
- under MultiKueue the manager's pod stays gated; the worker gets a copy (the manager's
  metadata and spec, gate included, with the prebuilt-workload and origin labels), and the
  manager's pod takes the worker pod's status whole, except its own ``PodScheduled``
  condition while it is gated (``SchedulingGated``: the manager never schedules it);
- it ends when its phase is ``Succeeded`` or ``Failed``; the remote pod is deleted then, or
  when the workload is evicted.

A started pod cannot be gated again: it is stopped by deleting it (``stopped_by_deletion``),
as upstream stops an evicted pod; fencing on a worker deletes its pods as for every kind
(by the label ``kfed.io/pod-name`` kfed gives the worker copy).
"""

from __future__ import annotations

from typing import Any

from manager.api import constants as C
from manager.api.view import annotations_of, at, items, labels_of
from manager.controllers.jobkinds.base import (
    JobKind,
    Obj,
    Outcome,
    PodSet,
    PodSetPlacement,
)
from manager.kube.jsoncopy import copy_json
from manager.kube.resources import PODS

ADMISSION_GATE = "kueue.x-k8s.io/admission"
"""Upstream's scheduling gate of a pod waiting for admission."""
MANAGED_LABEL = "kueue.x-k8s.io/managed"
"""Upstream's label of a pod its pod integration manages (valued ``"true"``)."""
MANAGED_BY_ANNOTATION = "kfed.io/managed-by"
"""Where a Pod keeps MultiKueue's ``managedBy`` (it has no such field)."""
POD_NAME_LABEL = "kfed.io/pod-name"
"""On a worker's copy: its name, how fencing finds it."""
GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
GROUP_TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
"""Upstream's pod group: the pods of one label value, as many as this annotation says."""
POD_SCHEDULED = "PodScheduled"
HOLD_FIELDS = ("nodeName", "schedulingGates")
"""Of a pod's spec, what its Workload's template leaves out (the hold, where it ran)."""


def gates(pod: Obj) -> list[Obj]:
    return [dict(g) for g in items(pod, "spec", "schedulingGates")]


def is_gated(pod: Obj) -> bool:
    return any(g.get("name") == ADMISSION_GATE for g in gates(pod))


def in_group(pod: Obj) -> bool:
    return GROUP_NAME_LABEL in labels_of(pod) or GROUP_TOTAL_COUNT_ANNOTATION in annotations_of(pod)


def controller_of(pod: Obj) -> Obj | None:
    for ref in items(pod, "metadata", "ownerReferences"):
        if ref.get("controller"):
            return dict(ref)
    return None


class PodKind(JobKind):
    resource = PODS
    workload_prefix = "pod"
    default_managed_by = ""
    pod_label = POD_NAME_LABEL
    suspend_path = ("spec", "schedulingGates")
    managed_by_path = ("metadata", "annotations", MANAGED_BY_ANNOTATION)
    upstream_managed_by_field = f"metadata.annotations[{MANAGED_BY_ANNOTATION}]"
    informer_selector = C.QUEUE_NAME_LABEL
    stopped_by_deletion = True

    def manages(self, job: Obj) -> bool:
        """A pod some controller made (a Job's, a StatefulSet's, an operator's) belongs to
        its owner: only pods of their own are queued, as upstream skips a pod whose owner
        is a kind it manages."""
        return controller_of(job) is None

    def refusal(self, job: Obj) -> str | None:
        """A pod of an upstream pod group: kfed does not queue groups (docs/jobs.md), and
        a pod of one queued alone would run without the others, maybe on another worker."""
        if controller_of(job) is not None or not in_group(job):
            return None
        return (
            f"metadata.labels[{GROUP_NAME_LABEL}]: kfed does not queue pod groups "
            f"({GROUP_NAME_LABEL}, {GROUP_TOTAL_COUNT_ANNOTATION}); submit the pods as a "
            "Job, JobSet or LeaderWorkerSet, which kfed places whole on one worker, or "
            "as single pods"
        )

    def pod_sets(self, job: Obj) -> list[PodSet]:
        """One pod set ``main`` of one pod; its template is the pod itself (its ``spec``
        and ``metadata`` are where a template's are)."""
        return [PodSet("main", 1, job)]

    def workload_pod_sets(self, job: Obj) -> list[Obj]:
        meta = at(job, "metadata")
        spec = {k: copy_json(v) for k, v in at(job, "spec").items() if k not in HOLD_FIELDS}
        template: Obj = {"spec": spec}
        labels = {k: v for k, v in labels_of(job).items() if k != POD_NAME_LABEL}
        if labels:
            template["metadata"] = {"labels": labels}
        if meta.get("annotations"):
            kept = {k: v for k, v in annotations_of(job).items() if k != MANAGED_BY_ANNOTATION}
            if kept:
                template.setdefault("metadata", {})["annotations"] = kept
        return [{"name": "main", "count": 1, "template": template}]

    def outcome(self, job: Obj) -> Outcome | None:
        phase = at(job, "status").get("phase")
        if phase == "Succeeded":
            return Outcome(True, "Pod finished successfully")
        if phase == "Failed":
            message = at(job, "status").get("message") or "Pod failed"
            return Outcome(False, str(message))
        return None

    def is_suspended(self, job: Obj) -> bool:
        return is_gated(job)

    def suspend_fields(self, suspend: bool, job: Obj | None = None) -> Obj:
        """Gated (at creation: a pod stored already can only lose gates) and labelled as
        upstream's managed pod; resumed: the gate removed, other gates kept."""
        if job is None:
            raise ValueError("a Pod is held by its scheduling gate: pass the pod")
        others = [g for g in gates(job) if g.get("name") != ADMISSION_GATE]
        if not suspend:
            return {"spec": {"schedulingGates": others or None}}
        if is_gated(job) or at(job, "metadata").get("resourceVersion"):
            return {}  # held already, or created: a gate cannot be added any more
        return {
            "metadata": {"labels": {MANAGED_LABEL: "true"}},
            "spec": {"schedulingGates": [*others, {"name": ADMISSION_GATE}]},
        }

    def is_active(self, job: Obj) -> bool:
        return not is_gated(job) and self.outcome(job) is None

    def templates_mutable(self, job: Obj) -> bool:
        return is_gated(job)

    def restore_patch(self, job: Obj, originals: Any) -> Obj | None:
        """Nothing: a pod's nodeSelector and tolerations cannot be taken back (only added
        to); a pod evicted after it started is deleted, never resumed."""
        return None

    def with_templates(self, job: Obj, placements: Any) -> Obj:
        """The pod with each flavor's node labels and tolerations added to its own (a
        pod's may only grow), its labels and annotations as they are."""
        changed = copy_json(job)
        placement: PodSetPlacement | None = placements.get("main")
        if placement is None:
            return changed
        spec = changed.setdefault("spec", {})
        selector = {**at(job, "spec", "nodeSelector"), **placement.node_selector}
        if selector:
            spec["nodeSelector"] = selector
        tolerations = list(items(job, "spec", "tolerations"))
        tolerations += [t for t in placement.tolerations if t not in tolerations]
        if tolerations:
            spec["tolerations"] = tolerations
        return changed

    def spec_for_worker(self, job: Obj) -> Obj:
        """The manager's spec, gated (as upstream copies it), without where it ran."""
        spec = copy_json(dict(at(job, "spec")))
        spec.pop("nodeName", None)
        if not is_gated(job):
            spec["schedulingGates"] = [*gates(job), {"name": ADMISSION_GATE}]
        return spec

    def metadata_for_worker(self, job: Obj, meta: Obj) -> Obj:
        labels = {**at(meta, "labels"), POD_NAME_LABEL: job["metadata"]["name"]}
        annotations = {k: v for k, v in at(meta, "annotations").items()}
        annotations.pop(MANAGED_BY_ANNOTATION, None)
        return {**meta, "labels": labels, "annotations": annotations}

    def status_for_manager(self, remote: Obj) -> Obj:
        """The worker pod's status, less its ``PodScheduled`` (the manager's keeps its own)."""
        return _without_scheduled(copy_json(dict(at(remote, "status"))))

    def mirrored_status(self, job: Obj) -> Obj:
        return _without_scheduled(dict(at(job, "status")))

    def status_write(self, job: Obj, patch: Obj) -> tuple[Obj, str | None]:
        """``patch`` onto the pod's status; a list of conditions written whole keeps the
        manager pod's own ``PodScheduled``."""
        if isinstance(patch.get("conditions"), list):
            own = [c for c in items(job, "status", "conditions") if c.get("type") == POD_SCHEDULED]
            patch = {**patch, "conditions": [*own, *patch["conditions"]]}
        return {"status": patch}, "status"

    def held_for_worker(self, job: Obj) -> bool:
        return self.managed_by(job) == C.MULTIKUEUE_MANAGED_BY


def _without_scheduled(status: Obj) -> Obj:
    conditions = status.get("conditions")
    if isinstance(conditions, list):
        status = {
            **status,
            "conditions": [c for c in conditions if c.get("type") != POD_SCHEDULED],
        }
    return status


POD = PodKind()
