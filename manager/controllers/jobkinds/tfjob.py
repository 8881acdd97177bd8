"""Kubeflow training-operator v1 TFJob (``kubeflow.org/v1``): pod sets ``chief``, ``master``,
``ps``, ``worker`` and ``evaluator`` (the replica types it has, in that order: upstream
Kueue's), each of its ``spec.tfReplicaSpecs.<Type>``; the rest is every Kubeflow job's
(``kubeflow.py``). The operator calls it Succeeded when its chief (or master) has, else when
worker 0 has."""

from __future__ import annotations

from manager.controllers.jobkinds.kubeflow import KubeflowJobKind
from manager.controllers.jobkinds.pytorchjob import TRAINING_OPERATOR
from manager.kube.resources import Resource

TFJOBS = Resource("kubeflow.org", "v1", "tfjobs", "TFJob", True)


class TFJobKind(KubeflowJobKind):
    resource = TFJOBS
    workload_prefix = "tfjob"
    default_managed_by = TRAINING_OPERATOR
    replica_specs_field = "tfReplicaSpecs"
    replica_types = ("Chief", "Master", "PS", "Worker", "Evaluator")
    operator_name = "tfjob-controller"


TFJOB = TFJobKind()
