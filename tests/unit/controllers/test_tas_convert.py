"""TAS at the API edge: topology assignments in the v1beta2 status shape and back, what a
Workload, a Topology and a Node become for the core, and other pods' room on their nodes."""

from __future__ import annotations

from typing import Any

import pytest

from manager import core
from manager.api.workload import Workload
from manager.controllers import convert, topologyassignment
from manager.controllers.topologyfeed import TAS_LABEL, TopologyFeed
from manager.kube.informer import Event

HOST = "kubernetes.io/hostname"
RACK = "cloud.com/topology-rack"


def hosts(*pairs: tuple[str, int]) -> core.TopologyAssignment:
    return core.TopologyAssignment((HOST,), tuple(core.DomainAssignment((h,), n) for h, n in pairs))


def test_an_assignment_is_written_as_upstream_compacts_it() -> None:
    """Upstream's ``singleCompactSliceEncoding``: one slice, common prefix and suffix taken
    out of the individual values, one universal pod count when all are equal."""
    assignment = hosts(("gpu-node-01.rack-a", 4), ("gpu-node-02.rack-a", 4))
    assert topologyassignment.to_status(assignment) == {
        "levels": [HOST],
        "slices": [
            {
                "domainCount": 2,
                "podCounts": {"universal": 4},
                "valuesPerLevel": [
                    {
                        "individual": {
                            "prefix": "gpu-node-0",
                            "suffix": ".rack-a",
                            "roots": ["1", "2"],
                        }
                    }
                ],
            }
        ],
    }


def test_one_value_for_a_level_is_universal_and_unequal_counts_are_individual() -> None:
    assignment = core.TopologyAssignment(
        ("block", RACK),
        (core.DomainAssignment(("b1", "r1"), 1), core.DomainAssignment(("b1", "r2"), 3)),
    )
    raw = topologyassignment.to_status(assignment)
    assert raw["slices"][0]["podCounts"] == {"individual": [1, 3]}
    assert raw["slices"][0]["valuesPerLevel"][0] == {"universal": "b1"}
    assert raw["slices"][0]["valuesPerLevel"][1] == {
        "individual": {"prefix": "r", "roots": ["1", "2"]}
    }


def test_prefix_and_suffix_never_overlap() -> None:
    """Upstream's motivating example: "ababa" and "aba" share "aba" at both ends."""
    raw = topologyassignment.to_status(hosts(("ababa", 1), ("aba", 1)))
    assert topologyassignment.from_status(raw) == hosts(("ababa", 1), ("aba", 1))


@pytest.mark.parametrize(
    "assignment",
    [
        hosts(("x1", 1)),
        hosts(("node-a", 2), ("node-b", 1), ("other", 5)),
        core.TopologyAssignment((RACK,), ()),
    ],
)
def test_what_is_written_reads_back_the_same(assignment: core.TopologyAssignment) -> None:
    assert topologyassignment.from_status(topologyassignment.to_status(assignment)) == assignment


def test_an_admission_carries_its_topology_to_status_and_back() -> None:
    admission = core.Admission(
        cluster_queue=core.ClusterQueueName("cq"),
        pod_set_assignments=(
            core.PodSetAssignment(
                name=core.PodSetName("main"),
                flavors={core.ResourceName("nvidia.com/gpu"): core.FlavorName("tas")},
                resource_usage={core.ResourceName("nvidia.com/gpu"): 4},
                count=4,
                topology_assignment=hosts(("n1", 4)),
            ),
            core.PodSetAssignment(
                name=core.PodSetName("remote"),
                flavors={},
                resource_usage={},
                count=2,
                delayed_topology=True,
            ),
        ),
    )
    status = convert.admission_to_status(admission)
    assert status["podSetAssignments"][1]["delayedTopologyRequest"] == "Pending"
    assert "topologyAssignment" not in status["podSetAssignments"][1]
    assert convert.admission_from_status(status) == admission


def _workload(request: dict[str, Any]) -> Workload:
    return Workload.model_validate(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns"},
            "spec": {
                "queueName": "lq",
                "podSets": [
                    {
                        "name": "main",
                        "count": 4,
                        "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
                        "topologyRequest": request,
                    }
                ],
            },
        }
    )


def test_a_workload_s_topology_request_reaches_the_core() -> None:
    wl = _workload({"required": RACK, "podSetSliceRequiredTopology": HOST, "podSetSliceSize": 2})
    converted = convert.workload(wl, priority=0, creation_time=0.0)
    assert converted.pod_sets[0].topology_request == core.TopologyRequest(
        required=RACK, slice_required=HOST, slice_size=2
    )


def test_a_bookkeeping_only_request_asks_for_no_topology() -> None:
    wl = _workload({"podIndexLabel": "batch.kubernetes.io/job-completion-index"})
    assert convert.workload(wl, priority=0, creation_time=0.0).pod_sets[0].topology_request is None


def test_a_node_and_a_topology_for_the_core() -> None:
    node = convert.node(
        {
            "metadata": {"name": "n1", "labels": {HOST: "n1", RACK: "r1"}},
            "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}], "unschedulable": True},
            "status": {
                "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )
    assert node.allocatable[core.ResourceName("cpu")] == 8000
    assert node.ready and node.unschedulable and not node.schedulable
    assert node.taints == (core.Taint("gpu", core.TaintEffect.NO_SCHEDULE),)
    topology = convert.topology(
        {
            "metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOST}]},
        }
    )
    assert topology == core.Topology("default", (RACK, HOST))
    with pytest.raises(ValueError, match=r"spec\.levels is empty"):
        convert.topology({"metadata": {"name": "bad"}, "spec": {"levels": []}})


def _pod(
    name: str, node: str | None, cpu: str, *, phase: str = "Running", tas: bool = False
) -> dict[str, Any]:
    labels = {TAS_LABEL: "true"} if tas else {}
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]
    }
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": labels},
        "spec": spec,
        "status": {"phase": phase},
    }


def test_only_scheduled_unfinished_pods_outside_tas_take_room_on_their_node() -> None:
    admission_core = core.AdmissionCore()
    feed = TopologyFeed(admission_core, lambda: None)
    cpu, pods = core.ResourceName("cpu"), core.ResourceName("pods")

    def usage(node: str) -> dict[core.ResourceName, int]:
        return dict(feed._per_node.get(node, {}))

    feed.on_pod(Event("ADDED", "ns/a", _pod("a", "n1", "500m")))
    feed.on_pod(Event("ADDED", "ns/b", _pod("b", "n1", "1")))
    feed.on_pod(Event("ADDED", "ns/gated", _pod("gated", None, "1")))
    feed.on_pod(Event("ADDED", "ns/tas", _pod("tas", "n1", "2", tas=True)))
    assert usage("n1") == {cpu: 1500, pods: 2}
    running = _pod("a", "n1", "500m")
    ready = {**running, "status": {"phase": "Running", "conditions": [{"type": "Ready"}]}}
    feed.on_pod(Event("MODIFIED", "ns/a", ready, old=running))
    assert usage("n1") == {cpu: 1500, pods: 2}
    feed.on_pod(Event("MODIFIED", "ns/a", _pod("a", "n1", "500m", phase="Succeeded"), old=ready))
    assert usage("n1") == {cpu: 1000, pods: 1}
    feed.on_pod(Event("DELETED", "ns/b", _pod("b", "n1", "1")))
    assert usage("n1") == {}
    assert admission_core._cache.tas.pod_usage == {}
