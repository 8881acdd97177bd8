"""Kubeflow training-operator v1 PaddleJob (``kubeflow.org/v1``): pod sets ``master`` and
``worker`` (the replica types it has, in that order: upstream Kueue's), each of its
``spec.paddleReplicaSpecs.<Type>``; the operator calls it Succeeded when its master has (no
master: when every worker has). The rest is every Kubeflow job's (``kubeflow.py``)."""

from __future__ import annotations

from manager.controllers.jobkinds.kubeflow import KubeflowJobKind
from manager.controllers.jobkinds.pytorchjob import TRAINING_OPERATOR
from manager.kube.resources import Resource

PADDLEJOBS = Resource("kubeflow.org", "v1", "paddlejobs", "PaddleJob", True)


class PaddleJobKind(KubeflowJobKind):
    resource = PADDLEJOBS
    workload_prefix = "paddlejob"
    default_managed_by = TRAINING_OPERATOR
    replica_specs_field = "paddleReplicaSpecs"
    replica_types = ("Master", "Worker")
    operator_name = "paddlejob-controller"


PADDLEJOB = PaddleJobKind()
