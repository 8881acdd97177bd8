"""What the kind federation of the article looks like, as data: the clusters, their GPU-like
nodes, the kind configuration of each, the node status patches that advertise GPUs, and
the queues each worker offers. Pure: nothing here runs a command.

kind nodes are containers without GPUs. A worker node gets the article's ``gpu.model``
label from kind's configuration and an ``nvidia.com/gpu`` extended resource patched onto
its status (kubelet keeps extended resources it does not manage), so that the scheduler
places GPU pods as on real GPU nodes. The containers themselves still have no GPU.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

GPU_RESOURCE = "nvidia.com/gpu"
MODEL_LABEL = "gpu.model"


@dataclass(frozen=True, slots=True)
class GpuNode:
    model: str
    """The ``gpu.model`` label, also the name of the ResourceFlavor that selects it."""
    gpus: int
    queued: bool = True
    """Whether the worker's ClusterQueue offers it from the start; a spare is added to the
    queue only for the drill (see ``spare_flavors``)."""


@dataclass(frozen=True, slots=True)
class KindCluster:
    name: str
    """The federation's name for it: manager, worker-1, worker-2."""
    nodes: tuple[GpuNode, ...] = field(default_factory=tuple)

    def node_names(self, kind_name: str) -> list[str]:
        """kind names worker nodes ``<cluster>-worker``, ``<cluster>-worker2``, ..."""
        return [f"{kind_name}-worker" + (str(i + 1) if i else "") for i in range(len(self.nodes))]


CLUSTERS = (
    KindCluster("manager"),
    KindCluster("worker-1", (GpuNode("rtx-a1000", 2),)),
    # The spare RTX A1000 node lets `kfed drill ... --cluster worker-1` move its probes here.
    KindCluster("worker-2", (GpuNode("h100", 4), GpuNode("rtx-a1000", 2, queued=False))),
)
"""The article: light jobs on worker-1's RTX A1000, heavy ones on worker-2's H100."""


def kind_config(cluster: KindCluster, node_image: str | None = None) -> Obj:
    """The kind cluster configuration: a control plane, and one labelled worker node per
    GPU node (the control plane keeps its taint out of the way: no GPU label on it)."""
    nodes: list[Obj] = [{"role": "control-plane"}]
    nodes += [{"role": "worker", "labels": {MODEL_LABEL: node.model}} for node in cluster.nodes]
    if node_image:
        for node in nodes:
            node["image"] = node_image
    return {"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4", "nodes": nodes}


def gpu_status_patch(node: GpuNode) -> str:
    """A JSON patch for a node's ``status`` subresource advertising its GPUs (``/`` in the
    resource name is ``~1`` in a JSON pointer)."""
    resource = GPU_RESOURCE.replace("/", "~1")
    return json.dumps(
        [
            {"op": "add", "path": f"/status/{part}/{resource}", "value": str(node.gpus)}
            for part in ("capacity", "allocatable")
        ]
    )


def worker_queues(nodes: list[GpuNode]) -> list[Obj]:
    """The article's queue names (namespace ml-jobs, LocalQueue gpu-lq, ClusterQueue
    gpu-cq) on a worker, offering exactly the GPU models it has: the manager's capacity view
    reads them to choose the worker."""
    group = "kueue.x-k8s.io/v1beta2"
    flavors = [
        {
            "name": node.model,
            "resources": [
                {"name": "cpu", "nominalQuota": 64},
                {"name": "memory", "nominalQuota": "512Gi"},
                {"name": GPU_RESOURCE, "nominalQuota": node.gpus},
            ],
        }
        for node in nodes
    ]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-jobs"}},
        *(
            {
                "apiVersion": group,
                "kind": "ResourceFlavor",
                "metadata": {"name": node.model},
                "spec": {"nodeLabels": {MODEL_LABEL: node.model}},
            }
            for node in nodes
        ),
        {
            "apiVersion": group,
            "kind": "ClusterQueue",
            "metadata": {"name": "gpu-cq"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {"coveredResources": ["cpu", "memory", GPU_RESOURCE], "flavors": flavors}
                ],
            },
        },
        {
            "apiVersion": group,
            "kind": "LocalQueue",
            "metadata": {"name": "gpu-lq", "namespace": "ml-jobs"},
            "spec": {"clusterQueue": "gpu-cq"},
        },
    ]


def queued_nodes(cluster: KindCluster) -> list[GpuNode]:
    return [node for node in cluster.nodes if node.queued]


def spare_flavors(cluster: KindCluster) -> list[GpuNode]:
    return [node for node in cluster.nodes if not node.queued]


def manager_check(config: str = "workers") -> list[Obj]:
    """The MultiKueue AdmissionCheck the manager's gpu-cq uses; ``kfed cluster add`` fills
    MultiKueueConfig ``config``."""
    return [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": "multikueue"},
            "spec": {
                "controllerName": "kueue.x-k8s.io/multikueue",
                "parameters": {
                    "apiGroup": "kueue.x-k8s.io",
                    "kind": "MultiKueueConfig",
                    "name": config,
                },
            },
        }
    ]
