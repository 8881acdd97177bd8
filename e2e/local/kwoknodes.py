"""The fake nodes of a bed: groups of identical kwok nodes (``NodeGroup``, as the node file
describes them) and the Node objects (and, with DRA, DeviceClasses and ResourceSlices) that
make them up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from e2e.local import dra

KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """``count`` identical kwok nodes named ``<cluster>-<name>-<i>``."""

    name: str
    count: int
    labels: dict[str, str]
    capacity: dict[str, str]
    devices: dra.Devices | None = None
    """The GPUs each node publishes through DRA (a ResourceSlice per node), if any."""
    max_nodes: int = 0
    """Above 0: the group grows on demand, up to this many nodes, its ``count`` the nodes it
    starts with (0: none): an autoscaler (Karpenter, ``e2e/local/autoscaler.py``) makes
    the others when pods wait for them and removes them once empty."""

    @property
    def grows(self) -> bool:
        return self.max_nodes > 0

    def to_state(self) -> dict[str, Any]:
        """The node file's shape of this group (``NodeGroup.from_state`` reads it back)."""
        state: dict[str, Any] = {
            "name": self.name,
            "count": self.count,
            "labels": dict(self.labels),
            "capacity": dict(self.capacity),
        }
        if self.devices is not None:
            state["devices"] = dra.devices_to_state(self.devices)
        if self.max_nodes:
            state["maxNodes"] = self.max_nodes
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> NodeGroup:
        """A group from its node file entry (or ``to_state``'s): ValueError when malformed."""
        name = str(state["name"])
        return cls(
            name=name,
            count=int(state.get("count", 1)),
            labels={str(k): str(v) for k, v in (state.get("labels") or {}).items()},
            capacity={str(k): str(v) for k, v in (state.get("capacity") or {}).items()},
            devices=dra.parse_devices(state.get("devices"), group=name),
            max_nodes=int(state.get("maxNodes", 0)),
        )


def node_manifests(cluster: str, groups: list[NodeGroup]) -> list[dict[str, Any]]:
    """The kwok Node of every node of ``groups``, named ``<cluster>-<group>-<i>``."""
    key, value = KWOK_NODE_ANNOTATION
    manifests = []
    for group in groups:
        for i in range(group.count):
            name = f"{cluster}-{group.name}-{i}"
            manifests.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": name,
                        "annotations": {key: value},
                        "labels": {
                            **group.labels,
                            "type": "kwok",
                            "kubernetes.io/hostname": name,
                            "kubernetes.io/os": "linux",
                            "kubernetes.io/arch": "amd64",
                        },
                    },
                    "status": {"capacity": group.capacity, "allocatable": group.capacity},
                }
            )
    return manifests


def dra_manifests(
    cluster: str, groups: list[NodeGroup], *, kubernetes: str
) -> list[dict[str, Any]]:
    """A DeviceClass per GPU model (and partition profile) of ``groups``, and the
    ResourceSlices of each node whose group has ``devices`` (as ``kubernetes`` takes them)."""
    groups = [g for g in groups if g.devices is not None]
    classes = dra.device_classes(g.devices for g in groups if g.devices is not None)
    slices = [
        made
        for g in groups
        if g.devices is not None
        for i in range(g.count)
        for made in dra.resource_slices(f"{cluster}-{g.name}-{i}", g.devices, kubernetes=kubernetes)
    ]
    return classes + slices
