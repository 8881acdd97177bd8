"""Kubeflow MPI operator v2 MPIJob (``kubeflow.org/v2beta1``): pod sets ``launcher`` and
``worker`` (the replica types it has, in that order), as upstream Kueue counts them. The
launcher runs as a batch/v1 Job the operator makes, the workers as its pods; the MPIJob
succeeds when the launcher does. The rest is every Kubeflow job's (``kubeflow.py``)."""

from __future__ import annotations

from manager.controllers.jobkinds.kubeflow import KubeflowJobKind
from manager.kube.resources import Resource

MPIJOBS = Resource("kubeflow.org", "v2beta1", "mpijobs", "MPIJob", True)


class MPIJobKind(KubeflowJobKind):
    resource = MPIJOBS
    workload_prefix = "mpijob"
    default_managed_by = "kubeflow.org/mpi-operator"
    replica_specs_field = "mpiReplicaSpecs"
    replica_types = ("Launcher", "Worker")
    operator_name = "mpi-operator"
    upstream_managed_by_field = "spec.runPolicy.managedBy"


MPIJOB = MPIJobKind()
