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

from manager.api.view import at
from manager.controllers.jobkinds.base import Obj, PodSet, own_template
from manager.controllers.jobkinds.heldbyreplicas import HeldByReplicasKind, replicas
from manager.kube.resources import Resource

LEADERWORKERSETS = Resource(
    "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", True
)
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"


class LeaderWorkerSetKind(HeldByReplicasKind):
    resource = LEADERWORKERSETS
    workload_prefix = "leaderworkerset"
    default_managed_by = "leaderworkerset.x-k8s.io/lws"
    pod_label = NAME_LABEL
    status_counters = ("replicas", "readyReplicas", "updatedReplicas")

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


LEADERWORKERSET = LeaderWorkerSetKind()
