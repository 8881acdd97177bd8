"""Kubeflow training-operator v1 PyTorchJob (``kubeflow.org/v1``): pod sets ``master`` and
``worker`` (the replica types it has, in that order), as upstream Kueue counts them; the rest
is every Kubeflow job's (``kubeflow.py``)."""

from __future__ import annotations

from manager.controllers.jobkinds.kubeflow import KubeflowJobKind
from manager.kube.resources import Resource

PYTORCHJOBS = Resource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", True)
TRAINING_OPERATOR = "kubeflow.org/training-operator"
"""The training-operator's own ``managedBy`` (every kind it runs)."""


class PyTorchJobKind(KubeflowJobKind):
    resource = PYTORCHJOBS
    workload_prefix = "pytorchjob"
    default_managed_by = TRAINING_OPERATOR
    replica_specs_field = "pytorchReplicaSpecs"
    replica_types = ("Master", "Worker")
    operator_name = "pytorchjob-controller"


PYTORCHJOB = PyTorchJobKind()
