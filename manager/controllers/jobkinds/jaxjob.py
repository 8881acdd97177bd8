"""Kubeflow training-operator v1 JAXJob (``kubeflow.org/v1``, training-operator v1.9 on): one
pod set, ``worker`` (its only replica type, as upstream Kueue counts it), of its
``spec.jaxReplicaSpecs.Worker``; the operator calls it Succeeded when every worker has. The
rest is every Kubeflow job's (``kubeflow.py``)."""

from __future__ import annotations

from manager.controllers.jobkinds.kubeflow import KubeflowJobKind
from manager.controllers.jobkinds.pytorchjob import TRAINING_OPERATOR
from manager.kube.resources import Resource

JAXJOBS = Resource("kubeflow.org", "v1", "jaxjobs", "JAXJob", True)


class JAXJobKind(KubeflowJobKind):
    resource = JAXJOBS
    workload_prefix = "jaxjob"
    default_managed_by = TRAINING_OPERATOR
    replica_specs_field = "jaxReplicaSpecs"
    replica_types = ("Worker",)
    operator_name = "jaxjob-controller"


JAXJOB = JAXJobKind()
