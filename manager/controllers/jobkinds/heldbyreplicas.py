"""Kinds without ``suspend`` or ``managedBy`` that serve until deleted (LeaderWorkerSet,
StatefulSet, Deployment): kfed holds one by scaling it to zero, the count it asked for kept in
the annotation ``kfed.io/held-replicas``, and gives that count back on resuming; MultiKueue's
``managedBy`` is the annotation ``kfed.io/managed-by``. The manager's own object stays held
while a worker serves it (``held_for_worker``): the kind's controller may run there too."""

from __future__ import annotations

from manager.api import constants as C
from manager.api.view import annotations_of, at
from manager.controllers.jobkinds.base import JobKind, Obj, Outcome

HELD_REPLICAS_ANNOTATION = "kfed.io/held-replicas"
"""On a held object (scaled to zero by kfed): the replicas it asked for."""
MANAGED_BY_ANNOTATION = "kfed.io/managed-by"
"""Where such a kind keeps MultiKueue's ``managedBy`` (it has no such field)."""


def replicas(job: Obj) -> int:
    """The replicas it asks for: those kfed holds back, else ``spec.replicas`` (1 unset)."""
    held = annotations_of(job).get(HELD_REPLICAS_ANNOTATION)
    if held is not None:
        return int(held)
    value = at(job, "spec").get("replicas")
    return 1 if value is None else int(value)


class HeldByReplicasKind(JobKind):
    """What every kind held by its replica count shares; each says its pod sets."""

    suspend_path = ("metadata", "annotations", HELD_REPLICAS_ANNOTATION)
    managed_by_path = ("metadata", "annotations", MANAGED_BY_ANNOTATION)
    upstream_managed_by_field = f"metadata.annotations[{MANAGED_BY_ANNOTATION}]"

    def outcome(self, job: Obj) -> Outcome | None:
        return None  # it serves until deleted

    def is_suspended(self, job: Obj) -> bool:
        return HELD_REPLICAS_ANNOTATION in annotations_of(job)

    def suspend_fields(self, suspend: bool, job: Obj | None = None) -> Obj:
        if job is None:
            raise ValueError(f"a {self.resource.kind} is held by its replica count: pass the job")
        count = replicas(job)
        held = {HELD_REPLICAS_ANNOTATION: str(count) if suspend else None}
        return {"metadata": {"annotations": held}, "spec": {"replicas": 0 if suspend else count}}

    def held_for_worker(self, job: Obj) -> bool:
        return self.managed_by(job) == C.MULTIKUEUE_MANAGED_BY

    def is_active(self, job: Obj) -> bool:
        """Pods of it may still run: its controller counts them in ``status.replicas``."""
        status = at(job, "status")
        return int(status.get("replicas") or 0) > 0 or int(status.get("readyReplicas") or 0) > 0
