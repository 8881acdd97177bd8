"""Upstream Kueue's MultiKueue performance baseline in kfed's objects: one ResourceFlavor
``default``, one ClusterQueue with ``cpu`` quota for every workload at once (``1m`` each,
``count`` of them) on the manager and on every worker, the MultiKueue check on the
manager's; and ``count`` suspended ``batch/v1`` Jobs of one pod requesting ``cpu: 1m``
(upstream ``test/performance/multikueue``, ``configs/baseline/configuration.yaml``).

The Jobs carry ``suspend: true`` and ``spec.managedBy: kueue.x-k8s.io/multikueue`` as
upstream's generator writes them, so the manager runs without its Job webhook there too.
Pure: objects as dicts, applied by the bed.
"""

from __future__ import annotations

from typing import Any

from e2e.bench.federation.topology import CHECK, Applied
from manager.api import constants as C
from manager.kube import resources as R

Obj = dict[str, Any]

FLAVOR = "default"
CLUSTER_QUEUE = "multikueue-performance"
LOCAL_QUEUE = "multikueue-performance"
CPU_REQUEST_MILLI = 1
RUN_LABEL = "bench.kfed.io/multikueue-run"
"""On every Job of a run; its value names the run's dispatch mode."""


def namespace_of(mode: str) -> str:
    """Each mode's Jobs in a namespace of their own (a fresh bed per mode anyway)."""
    return f"mk-perf-{mode}"


def _quota(count: int) -> str:
    return f"{max(count, 1) * CPU_REQUEST_MILLI}m"


def queues(namespace: str, count: int, *, check: bool) -> list[Applied]:
    """The namespace, the flavor, the ClusterQueue (with the MultiKueue check when
    ``check``: the manager's) and the LocalQueue, quota for ``count`` workloads at once."""
    spec: Obj = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [
                    {"name": FLAVOR, "resources": [{"name": "cpu", "nominalQuota": _quota(count)}]}
                ],
            }
        ],
    }
    if check:
        # v1beta2 names checks only through the strategy (upstream's wrapper does the same).
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": CHECK}]}
    return [
        (R.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        (
            R.RESOURCE_FLAVORS,
            {"apiVersion": C.API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}},
        ),
        (
            R.CLUSTER_QUEUES,
            {
                "apiVersion": C.API_VERSION,
                "kind": "ClusterQueue",
                "metadata": {"name": CLUSTER_QUEUE},
                "spec": spec,
            },
        ),
        (
            R.LOCAL_QUEUES,
            {
                "apiVersion": C.API_VERSION,
                "kind": "LocalQueue",
                "metadata": {"name": LOCAL_QUEUE, "namespace": namespace},
                "spec": {"clusterQueue": CLUSTER_QUEUE},
            },
        ),
    ]


def job_name(index: int) -> str:
    return f"mk-{index:05d}"


def job(namespace: str, index: int, mode: str) -> Obj:
    request = {"cpu": f"{CPU_REQUEST_MILLI}m"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(index),
            "namespace": namespace,
            "labels": {C.QUEUE_NAME_LABEL: LOCAL_QUEUE, RUN_LABEL: mode},
        },
        "spec": {
            "suspend": True,
            "managedBy": C.MULTIKUEUE_MANAGED_BY,
            "parallelism": 1,
            "completions": 1,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": request},
                        }
                    ],
                }
            },
        },
    }
