"""Small builders for the objects controller tests create (each test names its own)."""

from __future__ import annotations

from typing import Any

from manager.api import constants as C
from tests import builders
from tests.builders import local_queue as local_queue
from tests.builders import priority_class as priority_class

Obj = dict[str, Any]


def flavor(name: str, model: str) -> Obj:
    return builders.gpu_flavor(name, model)


def cluster_queue(
    name: str,
    flavor_name: str,
    *,
    gpus: int,
    cohort: str | None = None,
    borrowing_limit: int | None = None,
    preemption: Obj | None = None,
    strategy: str = "BestEffortFIFO",
) -> Obj:
    """64 cpus and ``gpus`` GPUs of one flavor."""
    gpu: Obj = {"nominalQuota": gpus}
    if borrowing_limit is not None:
        gpu["borrowingLimit"] = borrowing_limit
    spec: Obj = {"queueingStrategy": strategy}
    if preemption:
        spec["preemption"] = preemption
    quotas = {flavor_name: {"cpu": 64, "nvidia.com/gpu": gpu}}
    return builders.cluster_queue(name, quotas, cohort=cohort, **spec)


def job(
    namespace: str,
    name: str,
    queue: str,
    *,
    gpus: int = 1,
    delay_ms: int = 1000,
    priority_class: str | None = None,
    model: str | None = None,
) -> Obj:
    labels = {C.QUEUE_NAME_LABEL: queue}
    if priority_class:
        labels[C.PRIORITY_CLASS_LABEL] = priority_class
    pod_spec: Obj = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "resources": {
                    "requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)},
                    "limits": {"nvidia.com/gpu": str(gpus)},
                },
            }
        ],
    }
    if model:
        pod_spec["nodeSelector"] = {"gpu.model": model}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "suspend": True,
            "template": {
                "metadata": {
                    "annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": str(delay_ms)}
                },
                "spec": pod_spec,
            },
        },
    }


def pod_template(gpus: int, *, model: str | None = None, delay_ms: int | None = None) -> Obj:
    """A pod of ``gpus`` GPUs (none: cpu only), on nodes of that GPU ``model`` if given,
    that kwok completes after ``delay_ms`` when a Job owns it."""
    requests = {"cpu": "1", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    resources: Obj = {"requests": requests}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}  # required of extended resources
    spec: Obj = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox", "resources": resources}],
    }
    if model:
        spec["nodeSelector"] = {"gpu.model": model}
    template: Obj = {"spec": spec}
    if delay_ms is not None:
        template["metadata"] = {
            "annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": str(delay_ms)}
        }
    return template


def jobset(
    namespace: str,
    name: str,
    queue: str,
    *,
    workers: int,
    model: str | None = None,
    delay_ms: int | None = None,
) -> Obj:
    """A driver (1 pod, cpu only) and ``workers`` GPU workers (2 Jobs of workers/2 pods),
    every pod on nodes of GPU ``model`` when given (a cpu-only pod set is placed by its
    flavor too: the driver goes where the workers go)."""

    def pod(gpus: int) -> Obj:
        return pod_template(gpus, model=model, delay_ms=delay_ms)

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {C.QUEUE_NAME_LABEL: queue}},
        "spec": {
            "replicatedJobs": [
                {"name": "driver", "replicas": 1, "template": {"spec": {"template": pod(0)}}},
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "parallelism": workers // 2,
                            "completions": workers // 2,
                            "template": pod(1),
                        }
                    },
                },
            ]
        },
    }


def raycluster(
    namespace: str, name: str, queue: str, *, gpu_workers: int, model: str | None = None
) -> Obj:
    """A head (cpu only) and one worker group of ``gpu_workers`` one-GPU pods."""

    def template(gpus: int) -> Obj:
        pod = pod_template(gpus, model=model)
        pod["spec"].pop("restartPolicy")
        pod["spec"]["containers"][0].update(name="ray", image="rayproject/ray")
        return pod

    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": namespace, "labels": {C.QUEUE_NAME_LABEL: queue}},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": template(0)},
            "workerGroupSpecs": [
                {
                    "groupName": "gpu",
                    "replicas": gpu_workers,
                    "minReplicas": 0,
                    "maxReplicas": gpu_workers,
                    "rayStartParams": {},
                    "template": template(1),
                }
            ],
        },
    }
