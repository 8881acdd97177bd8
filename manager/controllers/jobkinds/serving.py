"""StatefulSet and Deployment (``apps/v1``): serving (the article's urgent inference
recovery), placed whole on one worker, serving until deleted.

Upstream Kueue v0.19.2 (``pkg/controller/jobs/statefulset``, ``deployment``, ``pod``) makes
a StatefulSet ONE Workload (a pod group named by the Workload) of one pod set ``main`` of
``replicas`` pods, and holds it by the pods: its webhook marks the template
(``kueue.x-k8s.io/pod-suspending-parent``), the pod webhook gives every pod the scheduling
gate ``kueue.x-k8s.io/admission``, removed pod by pod once admitted. Under MultiKueue the
manager's pods stay gated; the whole StatefulSet is copied to the worker (its spec as is,
the prebuilt-workload and origin labels, the manager's uid in an annotation) and its status
is NOT copied back, since the manager's own StatefulSet controller would overwrite it. Its
size may change only to and from zero while queued (zero: the Workload goes on hold, its
quota released). A Deployment has no Workload of its own upstream: each of its pods is a
single-pod Workload, and there is no MultiKueue adapter for Deployments (each pod would be
dispatched alone, to any worker).

kfed places every job whole on one worker, and a serving set is worth little split over
clusters (one Service, one rollout), so it federates a Deployment as upstream federates a
StatefulSet: ONE Workload, pod set ``main`` of ``replicas`` pods. Neither kind has
``suspend`` or ``managedBy``, so (as for a LeaderWorkerSet: ``heldbyreplicas.py``):

- held = scaled to zero, the size it asked for kept in ``kfed.io/held-replicas``; resumed =
  that size given back. Gated pods would stall a StatefulSet (its ordered rollout waits on
  a pod that never runs), and no pod at all is the stronger guarantee;
- MultiKueue's ``managedBy`` is the annotation ``kfed.io/managed-by`` (set by the manager's
  webhook). The manager's copy is never resumed (``held_for_worker``): every cluster runs
  the StatefulSet and Deployment controllers, so resuming it would start pods there;
- the worker's status (replica counts) is copied into the manager's annotation
  ``kfed.io/worker-status``, never its ``status``, which its own controller owns;
- a change of size on the manager is undone (held again at the size it was queued with):
  its Workload's pod set is as big as it was when queued, as upstream refuses a resize.
"""

from __future__ import annotations

import json

from manager.api.view import annotations_of, at
from manager.controllers.jobkinds.base import Obj, PodSet, own_template
from manager.controllers.jobkinds.heldbyreplicas import (
    HeldByReplicasKind,
    replicas,
)
from manager.kube.resources import Resource

STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet", True)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", True)
WORKER_STATUS_ANNOTATION = "kfed.io/worker-status"
"""On the manager's object: its worker copy's replica counts, as JSON."""
STATUS_FIELDS = ("replicas", "readyReplicas", "availableReplicas", "updatedReplicas")
"""What of a worker's status the manager shows (0 where the controller omits it)."""


class ServingKind(HeldByReplicasKind):
    """A set of ``replicas`` identical pods that serves until deleted."""

    status_counters = STATUS_FIELDS

    def __init__(self, resource: Resource, pod_label: str) -> None:
        self.resource = resource
        self.workload_prefix = resource.kind.lower()
        self.default_managed_by = ""
        self.pod_label = pod_label
        """Set by kfed on the worker copy's template: neither controller labels its pods
        with the owner's name."""

    def pod_sets(self, job: Obj) -> list[PodSet]:
        return [PodSet("main", replicas(job), own_template(at(job, "spec")))]

    def is_suspended(self, job: Obj) -> bool:
        """Held by kfed, and still at zero (a scale-up on the manager is undone)."""
        return super().is_suspended(job) and int(at(job, "spec").get("replicas") or 0) == 0

    def spec_for_worker(self, job: Obj) -> Obj:
        spec = super().spec_for_worker(job)
        template = spec.setdefault("template", {})
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        labels[self.pod_label] = job["metadata"]["name"]
        return spec

    def metadata_for_worker(self, job: Obj, meta: Obj) -> Obj:
        meta = super().metadata_for_worker(job, meta)
        annotations = {
            k: v for k, v in at(meta, "annotations").items() if k != WORKER_STATUS_ANNOTATION
        }
        return {**meta, "annotations": annotations}

    def status_for_manager(self, remote: Obj) -> Obj:
        status = at(remote, "status")
        return {name: int(status.get(name) or 0) for name in STATUS_FIELDS}

    def mirrored_status(self, job: Obj) -> Obj:
        text = annotations_of(job).get(WORKER_STATUS_ANNOTATION)
        try:
            found = json.loads(text) if text else {}
        except ValueError:
            return {}
        return found if isinstance(found, dict) else {}

    def status_write(self, job: Obj, patch: Obj) -> tuple[Obj, str | None]:
        merged = {k: v for k, v in {**self.mirrored_status(job), **patch}.items() if v is not None}
        text = json.dumps(merged, sort_keys=True, separators=(",", ":")) if merged else None
        return {"metadata": {"annotations": {WORKER_STATUS_ANNOTATION: text}}}, None


STATEFULSET = ServingKind(STATEFULSETS, "kfed.io/statefulset-name")
DEPLOYMENT = ServingKind(DEPLOYMENTS, "kfed.io/deployment-name")
