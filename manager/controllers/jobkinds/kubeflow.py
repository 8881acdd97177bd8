"""Kubeflow's jobs of replica types (``kubeflow.org``): the training-operator v1 kinds
(PyTorchJob, and alike TFJob, XGBoostJob, PaddleJob, JAXJob) and the MPI operator's MPIJob
share one shape, and so one adapter here; each kind names its resource, its replica specs'
field and its replica types in upstream Kueue's order.

- One pod set per replica type the job has, in that order, named as upstream names it (the
  type in lower case: ``master``, ``worker``), of ``replicas`` pods (1 when unset), its
  template ``spec.<kind>ReplicaSpecs.<Type>.template``.
- Suspended by ``spec.runPolicy.suspend``; ``managedBy`` is ``spec.runPolicy.managedBy``.
- Finished by its ``Succeeded`` or ``Failed`` condition; pods may still run while a replica
  type counts ``active`` pods.
- Its pods carry ``training.kubeflow.org/job-name`` (and ``operator-name``: the operator's).
"""

from __future__ import annotations

from manager.api.view import at
from manager.controllers.jobkinds.base import (
    JobKind,
    Obj,
    Outcome,
    PodSet,
    outcome_of_conditions,
    own_template,
)
from manager.kube.jsoncopy import copy_json

JOB_NAME_LABEL = "training.kubeflow.org/job-name"
OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
REPLICA_COUNTERS = ("active", "succeeded", "failed")
"""What a replica type's status counts; its operator omits a count of zero."""


class KubeflowJobKind(JobKind):
    replica_specs_field: str
    """``pytorchReplicaSpecs``, ``mpiReplicaSpecs``, ..."""
    replica_types: tuple[str, ...]
    """Its replica types in upstream Kueue's order (its pod sets' order)."""
    operator_name: str
    """The value of its pods' ``training.kubeflow.org/operator-name`` label."""
    pod_label = JOB_NAME_LABEL
    suspend_path = ("spec", "runPolicy", "suspend")
    managed_by_path = ("spec", "runPolicy", "managedBy")

    def pod_sets(self, job: Obj) -> list[PodSet]:
        specs = at(job, "spec", self.replica_specs_field)
        result = []
        for replica_type in self.replica_types:
            spec = specs.get(replica_type)
            if not isinstance(spec, dict):
                continue  # a type the job does not have
            replicas = spec.get("replicas")
            count = 1 if replicas is None else int(replicas)
            result.append(PodSet(replica_type.lower(), count, own_template(spec)))
        return result

    def outcome(self, job: Obj) -> Outcome | None:
        return outcome_of_conditions(job, "Succeeded", "Failed", self.resource.kind)

    def is_active(self, job: Obj) -> bool:
        statuses = at(job, "status", "replicaStatuses")
        return any(
            int(status.get("active") or 0) > 0
            for status in statuses.values()
            if isinstance(status, dict)
        )

    def pod_selector(self, name: str) -> str:
        return f"{JOB_NAME_LABEL}={name},{OPERATOR_NAME_LABEL}={self.operator_name}"

    def status_for_manager(self, remote: Obj) -> Obj:
        """The worker's status, each replica type's counts written out (0 where the operator
        omits them): the manager's status is merge-patched, which keeps what a patch omits, so
        a finished job would otherwise keep its last ``active`` count."""
        status = copy_json(dict(at(remote, "status")))
        replicas = status.get("replicaStatuses")
        if isinstance(replicas, dict):
            for counts in replicas.values():
                if isinstance(counts, dict):
                    for counter in REPLICA_COUNTERS:
                        counts.setdefault(counter, 0)
        return status
