"""Where a federated TAS workload's pods went, back on the manager (engine/topologyback.py)
and in kfed explain and the workload page."""

from __future__ import annotations

import json
from typing import Any

from manager.core.model import ResourceName
from manager.core.tas import TopologySnapshot
from manager.core.tas_model import HOSTNAME, Node, Topology
from manager.federation.engine import topologyback

BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"
ASSIGNED = {
    "levels": [HOSTNAME],
    "slices": [
        {
            "domainCount": 2,
            "podCounts": {"universal": 4},
            "valuesPerLevel": [{"individual": {"prefix": "h", "roots": ["0", "1"]}}],
        }
    ],
}


def manager_workload() -> dict[str, Any]:
    return {
        "metadata": {"name": "w", "namespace": "ns"},
        "status": {
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {"name": "trainers", "count": 8, "delayedTopologyRequest": "Pending"},
                    {"name": "driver", "count": 1},
                ],
            }
        },
    }


def test_the_workers_assignment_goes_into_the_managers_admission_once() -> None:
    copy = {
        "status": {
            "admission": {
                "podSetAssignments": [{"name": "trainers", "topologyAssignment": ASSIGNED}]
            }
        }
    }
    found = topologyback.assignments_of(copy)
    written = topologyback.with_assignments(manager_workload(), found)
    assert written is not None
    trainers, driver = written["status"]["admission"]["podSetAssignments"]
    assert trainers["topologyAssignment"] == ASSIGNED
    assert trainers["delayedTopologyRequest"] == "Ready"
    assert "topologyAssignment" not in driver
    assert topologyback.with_assignments(written, found) is None  # nothing left to write


def test_every_level_is_spelled_out_from_the_workers_report_and_explained() -> None:
    nodes = [
        Node(
            f"h{i}",
            {BLOCK: "b1", RACK: "r2", HOSTNAME: f"h{i}"},
            {ResourceName("nvidia.com/gpu"): 4},
        )
        for i in range(2)
    ]
    trees = {"tas": TopologySnapshot(Topology("t", (BLOCK, RACK, HOSTNAME)), nodes)}
    spelled = topologyback.spelled_out("worker-3", {"trainers": ASSIGNED}, trees)
    assert spelled == {
        "cluster": "worker-3",
        "levels": [BLOCK, RACK, HOSTNAME],
        "podSets": {"trainers": [[["b1", "r2", "h0"], 4], [["b1", "r2", "h1"], 4]]},
    }
    wl = manager_workload()
    wl["metadata"]["annotations"] = {topologyback.ANNOTATION: json.dumps(spelled)}
    assert topologyback.lines(wl) == []  # not the placement of the admission it has (yet)
    written = topologyback.with_assignments(wl, {"trainers": ASSIGNED})
    assert written is not None
    assert topologyback.lines(written) == [
        "on worker-3 (block / rack / host)",
        "trainers: b1 / r2 / h0 x4, b1 / r2 / h1 x4",
    ]
    del written["status"]["admission"]  # evicted, waiting to be placed again
    assert topologyback.lines(written) == []
    written["status"]["conditions"] = [{"type": "Finished", "status": "True"}]
    assert topologyback.lines(written)  # where it ran, kept once it finished
