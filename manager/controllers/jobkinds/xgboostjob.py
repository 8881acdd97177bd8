"""Kubeflow training-operator v1 XGBoostJob (``kubeflow.org/v1``): pod sets ``master`` and
``worker`` (the replica types it has, in that order: upstream Kueue's), each of its
``spec.xgbReplicaSpecs.<Type>``; the operator calls it Succeeded when its master has. The rest
is every Kubeflow job's (``kubeflow.py``)."""

from __future__ import annotations

from manager.controllers.jobkinds.kubeflow import KubeflowJobKind
from manager.controllers.jobkinds.pytorchjob import TRAINING_OPERATOR
from manager.kube.resources import Resource

XGBOOSTJOBS = Resource("kubeflow.org", "v1", "xgboostjobs", "XGBoostJob", True)


class XGBoostJobKind(KubeflowJobKind):
    resource = XGBOOSTJOBS
    workload_prefix = "xgboostjob"
    default_managed_by = TRAINING_OPERATOR
    replica_specs_field = "xgbReplicaSpecs"
    replica_types = ("Master", "Worker")
    operator_name = "xgboostjob-controller"


XGBOOSTJOB = XGBoostJobKind()
