"""A bed cluster that grows: Karpenter with its kwok cloud provider (``sigs.k8s.io/karpenter``,
``./kwok``, built by build-operators.sh) makes a kwok node when pods wait for one and removes
it once it is empty, for each node group of the node file with ``maxNodes``.

Per growing group: an instance type of the group's capacity (Karpenter's kwok provider reads
them from a JSON file, ``INSTANCE_TYPES_FILE_PATH``), and a NodePool whose nodes carry the
group's labels (so a flavor with those nodeLabels lands there), of that instance type only,
limited to ``maxNodes`` nodes' worth of each countable resource, consolidated when empty after
``CONSOLIDATE_AFTER``. Karpenter's nodes carry kwok's node annotation, so the bed's kwok
runs them like the others. Karpenter runs out of the cluster with the cluster's admin
kubeconfig, leader election off, its ports on this host.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

from e2e import binaries
from e2e.local import operators
from e2e.local.cluster import LocalCluster
from e2e.local.errors import ClusterStartError
from e2e.local.kwoknodes import NodeGroup
from e2e.local.ports import free_ports

Obj = dict[str, Any]
ROLE = "karpenter"
NODE_CLASS = "kfed-bed"
CAPACITY_TYPE = "on-demand"
ZONE = "bed-cloud"
CONSOLIDATE_AFTER = "5s"
"""Short for the bed (a cloud would wait minutes): how long a node stays empty before it goes."""
NODEPOOL_LABEL = "karpenter.sh/nodepool"
"""The label Karpenter puts on each node it makes: the NodePool's name."""


def growing(groups: list[NodeGroup]) -> list[NodeGroup]:
    return [g for g in groups if g.grows]


def instance_type_name(group: NodeGroup) -> str:
    return f"{group.name}-node"


def instance_types(groups: list[NodeGroup]) -> list[Obj]:
    """Karpenter's kwok provider's instance types: one per growing group, its capacity, offered
    on demand in one zone."""
    return [
        {
            "name": instance_type_name(g),
            "offerings": [
                {
                    "Price": 1.0,
                    "Available": True,
                    "Requirements": [
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": [CAPACITY_TYPE],
                        },
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONE]},
                    ],
                }
            ],
            "architecture": "amd64",
            "operatingSystems": ["linux"],
            "resources": dict(g.capacity),
        }
        for g in growing(groups)
    ]


def _limits(group: NodeGroup) -> dict[str, str]:
    """``maxNodes`` nodes' worth of each resource counted in whole units (cpu, GPUs)."""
    return {
        resource: str(int(amount) * group.max_nodes)
        for resource, amount in group.capacity.items()
        if resource != "pods" and amount.isdigit()
    }


def manifests(groups: list[NodeGroup]) -> list[Obj]:
    """The node class and one NodePool per growing group (named as the group)."""
    if not growing(groups):
        return []
    pools: list[Obj] = [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": g.name},
            "spec": {
                "template": {
                    "metadata": {"labels": dict(g.labels)},
                    "spec": {
                        "requirements": [
                            {
                                "key": "node.kubernetes.io/instance-type",
                                "operator": "In",
                                "values": [instance_type_name(g)],
                            },
                            {
                                "key": "karpenter.sh/capacity-type",
                                "operator": "In",
                                "values": [CAPACITY_TYPE],
                            },
                        ],
                        "nodeClassRef": {
                            "group": "karpenter.kwok.sh",
                            "kind": "KWOKNodeClass",
                            "name": NODE_CLASS,
                        },
                        "expireAfter": "Never",
                    },
                },
                "limits": _limits(g),
                "disruption": {
                    "consolidationPolicy": "WhenEmpty",
                    "consolidateAfter": CONSOLIDATE_AFTER,
                },
            },
        }
        for g in growing(groups)
    ]
    node_class = {
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": NODE_CLASS},
    }
    return [node_class, *pools]


def crd_files(versions: str | None = None) -> list[Path]:
    return sorted((binaries.operator_dir(ROLE, versions=versions) / "crds").glob("*.yaml"))


def start(cluster: LocalCluster) -> int:
    """Karpenter for the cluster's growing node groups: CRDs, node class and NodePools, the
    process (from the calling thread: it dies with it). Returns its health port."""
    groups = growing(cluster.nodes)
    if not groups:
        raise ValueError(f"{cluster.name} has no node group with maxNodes: nothing to grow")
    home = cluster.directory / ROLE
    home.mkdir(parents=True, exist_ok=True)
    types = home / "instance-types.json"
    types.write_text(json.dumps(instance_types(groups), indent=1))
    operators.apply_crd_directories(cluster, crd_files(cluster.operators_set))
    cluster.apply_objects(manifests(groups), field_manager="kfed-bed")
    metrics, health = free_ports(2)
    cluster.start_process(
        ROLE,
        [str(binaries.operator_path(ROLE, versions=cluster.operators_set))],
        env={
            "KUBECONFIG": str(cluster.kubeconfig),
            "SYSTEM_NAMESPACE": "kube-system",
            "DISABLE_LEADER_ELECTION": "true",
            "METRICS_PORT": str(metrics),
            "HEALTH_PROBE_PORT": str(health),
            "INSTANCE_TYPES_FILE_PATH": str(types),
            # Batch pending pods for at most a second or two: the bed wants the node now.
            "BATCH_IDLE_DURATION": "500ms",
            "BATCH_MAX_DURATION": "2s",
            "LOG_LEVEL": "info",
        },
    )
    return health


def ready(health_port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/readyz", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def wait_ready(cluster: LocalCluster, health_port: int, *, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready(health_port):
            return
        proc = cluster.processes.get(ROLE)
        if proc is not None and not proc.alive:
            raise ClusterStartError(f"{cluster.name}: karpenter exited (log: {proc.log_path})")
        time.sleep(0.2)
    raise ClusterStartError(f"{cluster.name}: karpenter not ready within {timeout:.0f}s")
