"""The bed's autoscaler configuration (``e2e/local/autoscaler.py``): what Karpenter is told to
make for a node group that grows, read from the node file's shape."""

from __future__ import annotations

from e2e.local import autoscaler
from e2e.local.kwoknodes import NodeGroup

CLOUD = NodeGroup.from_state(
    {
        "name": "h100-cloud",
        "count": 0,
        "maxNodes": 2,
        "labels": {"gpu.model": "h100"},
        "capacity": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "4", "pods": "110"},
    }
)
STATIC = NodeGroup.from_state({"name": "h100", "count": 2, "labels": {"gpu.model": "h100"}})


def test_a_group_with_max_nodes_grows_and_keeps_it_in_its_state() -> None:
    assert CLOUD.grows and not STATIC.grows
    assert NodeGroup.from_state(CLOUD.to_state()) == CLOUD
    assert "maxNodes" not in STATIC.to_state()
    assert autoscaler.growing([STATIC, CLOUD]) == [CLOUD]


def test_each_growing_group_is_an_instance_type_of_its_capacity() -> None:
    [kind] = autoscaler.instance_types([STATIC, CLOUD])
    assert kind["name"] == "h100-cloud-node"
    assert kind["resources"]["nvidia.com/gpu"] == "4"
    [offering] = kind["offerings"]
    assert offering["Available"] is True


def test_each_growing_group_is_a_nodepool_of_its_labels_limited_to_max_nodes() -> None:
    node_class, pool = autoscaler.manifests([STATIC, CLOUD])
    assert node_class["kind"] == "KWOKNodeClass"
    assert pool["metadata"]["name"] == "h100-cloud"
    template = pool["spec"]["template"]
    assert template["metadata"]["labels"] == {"gpu.model": "h100"}
    assert {"key": "node.kubernetes.io/instance-type", "operator": "In",
            "values": ["h100-cloud-node"]} in template["spec"]["requirements"]  # fmt: skip
    assert template["spec"]["nodeClassRef"]["name"] == node_class["metadata"]["name"]
    # Countable resources only: memory "512Gi" and the pod count are not limited.
    assert pool["spec"]["limits"] == {"cpu": "128", "nvidia.com/gpu": "8"}
    assert pool["spec"]["disruption"]["consolidationPolicy"] == "WhenEmpty"


def test_a_bed_without_growing_groups_gets_no_autoscaler_objects() -> None:
    assert autoscaler.manifests([STATIC]) == []
    assert autoscaler.instance_types([STATIC]) == []
