"""LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``, the lws operator): ``replicas`` groups,
each a leader pod and ``size - 1`` workers, serving until deleted.

Upstream Kueue makes one Workload per group (pod sets ``leader`` of 1 and ``worker`` of
``size - 1``; ``main`` of ``size`` when the set has no leader template) and gates every pod
until its group is admitted. kfed places a job whole on one worker, so it makes ONE Workload
for the whole set, of the same pod sets with every group in them: ``leader`` of ``replicas``
pods and ``worker`` of ``replicas * (size - 1)`` (``main`` of ``replicas * size``). A set of
one-pod groups with a leader template has no ``worker`` pod set.

A LeaderWorkerSet has neither ``suspend`` nor ``managedBy``. kfed holds one by scaling it to
zero groups, the count it asked for kept in the annotation ``kfed.io/held-replicas`` (held:
that annotation is there), and gives it back on resuming; at zero groups the operator
deletes every leader pod, and with it (its owner) each group's workers. MultiKueue's
``managedBy`` is the annotation ``kfed.io/managed-by``, which the manager's webhook sets and
a worker's copy goes without. The manager's own object stays held while a worker serves it
(``held_for_worker``), as upstream keeps the manager's pods gated: were an lws operator
running on the manager too, it would start no pod there. The worker's status is copied into
its ``status`` (the manager needs the CRD only; an lws operator there would overwrite it).
"""

from __future__ import annotations

from manager.api import constants as C
from manager.api.view import annotations_of, at
from manager.controllers.jobkinds.base import JobKind, Obj, Outcome, PodSet, own_template
from manager.kube.resources import Resource

LEADERWORKERSETS = Resource(
    "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", True
)
HELD_REPLICAS_ANNOTATION = "kfed.io/held-replicas"
"""On a held LeaderWorkerSet (scaled to zero by kfed): the groups it asked for."""
MANAGED_BY_ANNOTATION = "kfed.io/managed-by"
"""Where a LeaderWorkerSet keeps MultiKueue's ``managedBy`` (it has no such field)."""
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"


def replicas(job: Obj) -> int:
    """The groups the set asks for: those kfed holds back, else ``spec.replicas`` (1 unset)."""
    held = annotations_of(job).get(HELD_REPLICAS_ANNOTATION)
    if held is not None:
        return int(held)
    value = at(job, "spec").get("replicas")
    return 1 if value is None else int(value)


class LeaderWorkerSetKind(JobKind):
    resource = LEADERWORKERSETS
    workload_prefix = "leaderworkerset"
    default_managed_by = "leaderworkerset.x-k8s.io/lws"
    pod_label = NAME_LABEL
    status_counters = ("replicas", "readyReplicas", "updatedReplicas")
    suspend_path = ("metadata", "annotations", HELD_REPLICAS_ANNOTATION)
    managed_by_path = ("metadata", "annotations", MANAGED_BY_ANNOTATION)
    upstream_managed_by_field = f"metadata.annotations[{MANAGED_BY_ANNOTATION}]"

    def pod_sets(self, job: Obj) -> list[PodSet]:
        template = at(job, "spec", "leaderWorkerTemplate")
        groups = replicas(job)
        size = template.get("size")
        size = 1 if size is None else int(size)
        workers = own_template({"template": template.get("workerTemplate")})
        if not isinstance(template.get("leaderTemplate"), dict):
            return [PodSet("main", groups * size, workers)]
        leader = own_template({"template": template["leaderTemplate"]})
        result = [PodSet("leader", groups, leader)]
        if size > 1:
            result.append(PodSet("worker", groups * (size - 1), workers))
        return result

    def outcome(self, job: Obj) -> Outcome | None:
        return None  # it serves until deleted

    def is_suspended(self, job: Obj) -> bool:
        return HELD_REPLICAS_ANNOTATION in annotations_of(job)

    def suspend_fields(self, suspend: bool, job: Obj | None = None) -> Obj:
        if job is None:
            raise ValueError("a LeaderWorkerSet is held by its replica count: pass the job")
        count = replicas(job)
        return {
            "metadata": {
                "annotations": {HELD_REPLICAS_ANNOTATION: str(count) if suspend else None}
            },
            "spec": {"replicas": 0 if suspend else count},
        }

    def held_for_worker(self, job: Obj) -> bool:
        return self.managed_by(job) == C.MULTIKUEUE_MANAGED_BY

    def is_active(self, job: Obj) -> bool:
        """Groups of it may still run: the operator counts them in ``status.replicas``."""
        status = at(job, "status")
        return int(status.get("replicas") or 0) > 0 or int(status.get("readyReplicas") or 0) > 0


LEADERWORKERSET = LeaderWorkerSetKind()
