"""The benchmark's federation: which worker offers which GPU flavor, the kwok nodes behind
them, the queues on every cluster and the registration of the workers on the manager. Pure:
objects as dicts, applied by ``bed``.

Two flavors, each offered by two of the three workers, so that capacity-aware dispatch has a
real choice, AllAtOnce visibly sends copies to a worker that cannot run them, and a partition
drill always has somewhere to go:

    worker-1: rtx-a1000          worker-2: h100          worker-3: rtx-a1000 + h100

Quotas are sized so that they never bind at the benchmark's rates (hundreds of free GPUs per
worker and flavor, pod slots to match): what the figures show is the control planes and kfed,
not queueing for quota.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from e2e.bench.federation.jobs import FLAVORS, LOCAL_QUEUE, NAMESPACE
from manager.api import constants as C
from manager.cli.workerobjects import multikueue_cluster
from manager.federation.settings import FederationSettings
from manager.kube import resources as R

Obj = dict[str, Any]
Applied = tuple[R.Resource, Obj]

FEDERATION_NAMESPACE = "kueue-system"
CLUSTER_QUEUE = "gpu-cq"
CONFIG = "workers"
CHECK = "multikueue"
ORIGIN_SELECTOR = f"{C.MULTIKUEUE_ORIGIN_LABEL}={FederationSettings().origin}"
"""Selects the remote copies the manager (default ``--origin``) makes on a worker."""


@dataclass(frozen=True, slots=True)
class Topology:
    worker_flavors: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: {
            "worker-1": ("rtx-a1000",),
            "worker-2": ("h100",),
            "worker-3": ("rtx-a1000", "h100"),
        }
    )
    nodes_per_flavor: int = 2
    node_cpu: int = 64
    node_memory_gi: int = 256
    node_gpus: int = 128
    node_pods: int = 250

    @property
    def workers(self) -> list[str]:
        """In e2e.local's order: worker-2 before worker-10."""

        def number(name: str) -> tuple[int, str]:
            suffix = name.rsplit("-", 1)[-1]
            return (int(suffix), name) if suffix.isdigit() else (0, name)

        return sorted(self.worker_flavors, key=number)

    def workers_with(self, flavor: str) -> list[str]:
        return [w for w in self.workers if flavor in self.worker_flavors[w]]

    def worker_quota(self) -> dict[str, int]:
        """Per worker and flavor: everything its nodes of that flavor hold."""
        n = self.nodes_per_flavor
        return {
            "cpu": n * self.node_cpu,
            "memory_gi": n * self.node_memory_gi,
            "gpu": n * self.node_gpus,
        }

    def manager_quota(self, flavor: str) -> dict[str, int]:
        """Per flavor on the manager: the sum over the workers that offer it."""
        each, count = self.worker_quota(), len(self.workers_with(flavor))
        return {k: v * count for k, v in each.items()}

    def to_json(self) -> dict[str, Any]:
        return {
            "worker_flavors": {w: list(f) for w, f in sorted(self.worker_flavors.items())},
            "nodes_per_worker_and_flavor": self.nodes_per_flavor,
            "node_capacity": {
                "cpu": self.node_cpu,
                "memory": f"{self.node_memory_gi}Gi",
                "nvidia.com/gpu": self.node_gpus,
                "pods": self.node_pods,
            },
            "worker_quota_per_flavor": self.worker_quota(),
            "manager_quota": {f: self.manager_quota(f) for f in FLAVORS},
        }


# -- nodes ---------------------------------------------------------------------------------


def nodes_file(topology: Topology) -> dict[str, Any]:
    """The ``--nodes`` file of e2e.local (see e2e/local/nodes.yaml for the shape)."""
    capacity = {
        "cpu": str(topology.node_cpu),
        "memory": f"{topology.node_memory_gi}Gi",
        "nvidia.com/gpu": str(topology.node_gpus),
        "pods": str(topology.node_pods),
    }
    return {
        "clusters": {
            worker: [
                {
                    "name": flavor,
                    "count": topology.nodes_per_flavor,
                    "labels": {"gpu.model": flavor},
                    "capacity": capacity,
                }
                for flavor in flavors
            ]
            for worker, flavors in sorted(topology.worker_flavors.items())
        }
    }


# -- queues --------------------------------------------------------------------------------


def _namespace(name: str) -> Applied:
    return R.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _flavor(name: str) -> Applied:
    return R.RESOURCE_FLAVORS, {
        "apiVersion": C.API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": {"gpu.model": name}},
    }


def _cluster_queue(quotas: Mapping[str, Mapping[str, int]], *, check: str | None) -> Applied:
    spec: Obj = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": flavor,
                        "resources": [
                            {"name": "cpu", "nominalQuota": q["cpu"]},
                            {"name": "memory", "nominalQuota": f"{q['memory_gi']}Gi"},
                            {"name": "nvidia.com/gpu", "nominalQuota": q["gpu"]},
                        ],
                    }
                    for flavor, q in quotas.items()
                ],
            }
        ],
    }
    if check is not None:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": check}]}
    return R.CLUSTER_QUEUES, {
        "apiVersion": C.API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": CLUSTER_QUEUE},
        "spec": spec,
    }


def _local_queue() -> Applied:
    return R.LOCAL_QUEUES, {
        "apiVersion": C.API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": LOCAL_QUEUE, "namespace": NAMESPACE},
        "spec": {"clusterQueue": CLUSTER_QUEUE},
    }


def manager_queues(topology: Topology) -> list[Applied]:
    """Both flavors, the MultiKueue check on the ClusterQueue (the article's queues in shape)."""
    return [
        _namespace(NAMESPACE),
        *(_flavor(f) for f in FLAVORS),
        _cluster_queue({f: topology.manager_quota(f) for f in FLAVORS}, check=CHECK),
        _local_queue(),
    ]


def worker_queues(topology: Topology, worker: str) -> list[Applied]:
    flavors = topology.worker_flavors[worker]
    return [
        _namespace(NAMESPACE),
        *(_flavor(f) for f in flavors),
        _cluster_queue({f: topology.worker_quota() for f in flavors}, check=None),
        _local_queue(),
    ]


# -- registration --------------------------------------------------------------------------


def worker_secret(worker: str, kubeconfig_text: str) -> Applied:
    """The Secret a MultiKueueCluster points at; re-applied to route the manager through a
    cuttable proxy for the drills (the manager follows Secret changes)."""
    data = base64.b64encode(kubeconfig_text.encode()).decode()
    return R.SECRETS, {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": worker, "namespace": FEDERATION_NAMESPACE},
        "type": "Opaque",
        "data": {"kubeconfig": data},
    }


def registration(kubeconfigs: Mapping[str, str]) -> list[Applied]:
    """Secrets, MultiKueueClusters, the MultiKueueConfig and the AdmissionCheck."""
    objects: list[Applied] = [_namespace(FEDERATION_NAMESPACE)]
    for worker, text in sorted(kubeconfigs.items()):
        objects.append(worker_secret(worker, text))
        objects.append((R.MULTIKUEUE_CLUSTERS, multikueue_cluster(worker, secret=worker)))
    objects.append(
        (
            R.MULTIKUEUE_CONFIGS,
            {
                "apiVersion": C.API_VERSION,
                "kind": "MultiKueueConfig",
                "metadata": {"name": CONFIG},
                "spec": {"clusters": sorted(kubeconfigs)},
            },
        )
    )
    objects.append(
        (
            R.ADMISSION_CHECKS,
            {
                "apiVersion": C.API_VERSION,
                "kind": "AdmissionCheck",
                "metadata": {"name": CHECK},
                "spec": {
                    "controllerName": C.MULTIKUEUE_CONTROLLER_NAME,
                    "parameters": {"apiGroup": C.GROUP, "kind": "MultiKueueConfig", "name": CONFIG},
                },
            },
        )
    )
    return objects
