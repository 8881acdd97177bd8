"""Topology Aware Scheduling placement, case by case from upstream Kueue's table.

Each case is named after the case of ``TestFindTopologyAssignments`` in upstream's
``pkg/cache/scheduler/tas_cache_test.go`` (kubernetes-sigs/kueue ff69552e79) whose nodes,
request and answer it reproduces. Upstream's default flags apply: TASProfileMixed is on,
so unconstrained requests use LeastFreeCapacity even where a case's name says BestFit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from manager.core.model import PodSetName, ResourceName, TopologyRequest
from manager.core.selectors import Taint, TaintEffect
from manager.core.tas import TopologySnapshot
from manager.core.tas_model import (
    HOSTNAME,
    DomainAssignment,
    Node,
    PodSetRequest,
    Topology,
    TopologyAssignment,
)
from tests.unit.core.builders import quantity

BLOCK = "cloud.com/topology-block"
RACK = "cloud.com/topology-rack"
ONE_LEVEL = (HOSTNAME,)
TWO_LEVELS = (BLOCK, RACK)
THREE_LEVELS = (BLOCK, RACK, HOSTNAME)


def node(
    name: str,
    *,
    block: str | None = None,
    rack: str | None = None,
    host: str | None = None,
    cpu: str = "1",
    memory: str | None = None,
    pods: int = 10,
    labels: dict[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
    ready: bool = True,
) -> Node:
    all_labels = dict(labels or {})
    for key, value in ((BLOCK, block), (RACK, rack), (HOSTNAME, host)):
        if value is not None:
            all_labels[key] = value
    allocatable = {ResourceName("cpu"): quantity("cpu", cpu), ResourceName("pods"): pods}
    if memory is not None:
        allocatable[ResourceName("memory")] = quantity("memory", memory)
    return Node(name, all_labels, allocatable, taints, ready=ready)


#      b1                   b2
#   /      \             /      \
#  r1       r2          r1       r2
#  |      /  |  \       |         |
#  x3    x5  x1  x6     x2       x4
DEFAULT_NODES = (
    node("b1-r1-x3", block="b1", rack="r1", host="x3", memory="1Gi"),
    node("b1-r2-x5", block="b1", rack="r2", host="x5", memory="1Gi"),
    node("b1-r2-x1", block="b1", rack="r2", host="x1", memory="1Gi"),
    node("b1-r2-x6", block="b1", rack="r2", host="x6", memory="1Gi"),
    node("b2-r2-x2", block="b2", rack="r1", host="x2", memory="1Gi"),
    node("b2-r2-x4", block="b2", rack="r2", host="x4", cpu="2", memory="4Gi", pods=40),
)

#       b1           b2
#       |             |
#       r1           r1
#     /  |  \       /  \
#   x3  x5  x1     x6  x2
SCATTERED_NODES = (
    node("b1-r1-x3", block="b1", rack="r1", host="x3", cpu="4", memory="1Gi"),
    node("b1-r1-x5", block="b1", rack="r1", host="x5", memory="1Gi"),
    node("b1-r1-x1", block="b1", rack="r1", host="x1", memory="1Gi"),
    node("b2-r1-x6", block="b2", rack="r1", host="x6", cpu="2", memory="1Gi"),
    node("b2-r1-x2", block="b2", rack="r1", host="x2", memory="1Gi"),
)


def hosts(*pairs: tuple[str, int]) -> TopologyAssignment:
    return TopologyAssignment(ONE_LEVEL, tuple(DomainAssignment((h,), n) for h, n in pairs))


def racks(*triples: tuple[str, str, int]) -> TopologyAssignment:
    return TopologyAssignment(TWO_LEVELS, tuple(DomainAssignment((b, r), n) for b, r, n in triples))


@dataclass(frozen=True)
class Case:
    nodes: tuple[Node, ...]
    levels: tuple[str, ...]
    count: int
    want: TopologyAssignment | str
    request: TopologyRequest | None = None
    cpu: str | None = "1"
    memory: int | None = None
    implied: bool = False
    node_selector: dict[str, str] = field(default_factory=dict)


CASES: dict[str, Case] = {
    "minimize the number of used racks before optimizing the number of nodes; BestFit": Case(
        nodes=(
            node("b1-r1-x3", block="b1", rack="r1", host="x3", cpu="2"),
            node("b1-r2-x5", block="b1", rack="r2", host="x5", cpu="2", pods=20),
            node("b1-r3-x1", block="b1", rack="r3", host="x1"),
            node("b1-r3-x6", block="b1", rack="r3", host="x6"),
            node("b1-r3-x2", block="b1", rack="r3", host="x2"),
            node("b1-r3-x4", block="b1", rack="r3", host="x4"),
        ),
        levels=THREE_LEVELS,
        request=TopologyRequest(required=BLOCK),
        count=4,
        want=hosts(("x1", 1), ("x2", 1), ("x4", 1), ("x6", 1)),
    ),
    "choose the node that can accommodate all Pods": Case(
        nodes=(
            node("b1-r1-x3", block="b1", rack="r1", host="x3", cpu="2"),
            node("b1-r1-x5", block="b1", rack="r1", host="x5"),
            node("b1-r1-x1", block="b1", rack="r1", host="x1"),
        ),
        levels=THREE_LEVELS,
        request=TopologyRequest(required=BLOCK),
        count=2,
        want=hosts(("x3", 2)),
    ),
    "no annotation; implied default to unconstrained; 6 pods fit into hosts scattered across "
    "the whole datacenter even they could fit into single rack; BestFit": Case(
        nodes=SCATTERED_NODES,
        levels=THREE_LEVELS,
        implied=True,
        count=6,
        want=hosts(("x1", 1), ("x3", 1), ("x5", 1), ("x2", 1), ("x6", 2)),
    ),
    "unconstrained; 6 pods fit into hosts scattered across the whole datacenter even they "
    "could fit into single rack; BestFit": Case(
        nodes=SCATTERED_NODES,
        levels=THREE_LEVELS,
        request=TopologyRequest(unconstrained=True),
        count=6,
        want=hosts(("x1", 1), ("x3", 1), ("x5", 1), ("x2", 1), ("x6", 2)),
    ),
    "unconstrained; a single pod fits into each host; LeastFreeCapacity; TASProfileMixed": Case(
        nodes=DEFAULT_NODES,
        levels=THREE_LEVELS,
        request=TopologyRequest(unconstrained=True),
        count=1,
        want=hosts(("x3", 1)),
    ),
    "host required; single Pod fits in the host; BestFit": Case(
        nodes=DEFAULT_NODES,
        levels=THREE_LEVELS,
        request=TopologyRequest(required=HOSTNAME),
        count=1,
        want=hosts(("x3", 1)),
    ),
    "rack required; single Pod fits in a rack; BestFit": Case(
        nodes=DEFAULT_NODES,
        levels=TWO_LEVELS,
        request=TopologyRequest(required=RACK),
        count=1,
        want=racks(("b1", "r1", 1)),
    ),
    "rack required; multiple Pods fit in a rack; BestFit": Case(
        nodes=DEFAULT_NODES,
        levels=TWO_LEVELS,
        request=TopologyRequest(required=RACK),
        count=3,
        want=racks(("b1", "r2", 3)),
    ),
    "block preferred; Pods fit in 2 blocks; BestFit": Case(
        nodes=(
            node("b1", block="b1", cpu="2", pods=20),
            node("b2", block="b2"),
            node("b3", block="b3", cpu="4", pods=40),
        ),
        levels=(BLOCK,),
        request=TopologyRequest(preferred=BLOCK),
        count=5,
        want=TopologyAssignment(
            (BLOCK,), (DomainAssignment(("b2",), 1), DomainAssignment(("b3",), 4))
        ),
    ),
    "rack required; multiple Pods fit in some racks; BestFit": Case(
        nodes=DEFAULT_NODES,
        levels=TWO_LEVELS,
        request=TopologyRequest(required=RACK),
        count=2,
        want=racks(("b2", "r2", 2)),
    ),
    "rack required; too many pods to fit in any rack; BestFit": Case(
        nodes=DEFAULT_NODES,
        levels=TWO_LEVELS,
        request=TopologyRequest(required=RACK),
        count=4,
        want='topology "default" allows to fit only 3 out of 4 pod(s)',
    ),
    "block required; single Pod fits in a block and a single rack; BestFit": Case(
        nodes=DEFAULT_NODES,
        levels=TWO_LEVELS,
        request=TopologyRequest(required=BLOCK),
        count=1,
        want=racks(("b2", "r1", 1)),
    ),
    "block required; Pods fit in a block spread across two racks; BestFit": Case(
        nodes=DEFAULT_NODES,
        levels=TWO_LEVELS,
        request=TopologyRequest(required=BLOCK),
        count=4,
        want=racks(("b1", "r1", 1), ("b1", "r2", 3)),
    ),
    "block required; single Pod which cannot be split; BestFit": Case(
        nodes=DEFAULT_NODES,
        levels=TWO_LEVELS,
        request=TopologyRequest(required=BLOCK),
        cpu="4",
        count=1,
        want=(
            'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 4; '
            'excluded: resource "cpu": 4'
        ),
    ),
    "block required; too many Pods to fit requested; BestFit": Case(
        nodes=DEFAULT_NODES,
        levels=TWO_LEVELS,
        request=TopologyRequest(required=BLOCK),
        count=5,
        want='topology "default" allows to fit only 4 out of 5 pod(s)',
    ),
    "rack required; single Pod requiring memory; BestFit": Case(
        nodes=DEFAULT_NODES,
        levels=TWO_LEVELS,
        request=TopologyRequest(required=RACK),
        cpu=None,
        memory=1024,
        count=4,
        want=racks(("b1", "r1", 4)),
    ),
    "rack preferred; but only block can accommodate the workload; BestFit": Case(
        nodes=DEFAULT_NODES,
        levels=TWO_LEVELS,
        request=TopologyRequest(preferred=RACK),
        count=4,
        want=racks(("b1", "r1", 1), ("b1", "r2", 3)),
    ),
    "rack preferred; but only multiple blocks can accommodate the workload; BestFit": Case(
        nodes=DEFAULT_NODES,
        levels=TWO_LEVELS,
        request=TopologyRequest(preferred=RACK),
        count=6,
        want=racks(("b1", "r1", 1), ("b1", "r2", 3), ("b2", "r2", 2)),
    ),
    "block preferred; but only multiple blocks can accommodate the workload; BestFit": Case(
        nodes=DEFAULT_NODES,
        levels=TWO_LEVELS,
        request=TopologyRequest(preferred=BLOCK),
        count=6,
        want=racks(("b1", "r1", 1), ("b1", "r2", 3), ("b2", "r2", 2)),
    ),
    "block preferred; but the workload cannot be accommodate in entire topology; BestFit": Case(
        nodes=DEFAULT_NODES,
        levels=TWO_LEVELS,
        request=TopologyRequest(preferred=BLOCK),
        count=10,
        want='topology "default" allows to fit only 7 out of 10 pod(s)',
    ),
    "only nodes with matching levels are considered; no host label on node; BestFit": Case(
        nodes=(node("b1-r1-x3", block="b1", rack="r1", memory="1Gi"),),
        levels=THREE_LEVELS,
        request=TopologyRequest(required=RACK),
        count=1,
        want=f"no topology domains at level: {RACK}",
    ),
    "no assignment as node is not ready; BestFit": Case(
        nodes=(node("b1-r1-x1", block="b1", rack="r1", host="x1", ready=False),),
        levels=THREE_LEVELS,
        request=TopologyRequest(required=BLOCK),
        count=1,
        want=f"no topology domains at level: {BLOCK}",
    ),
    "skip node which has untolerated taint; BestFit": Case(
        nodes=(
            node(
                "x3",
                host="x3",
                memory="1Gi",
                labels={"zone": "zone-a"},
                taints=(Taint("example.com/gpu", TaintEffect.NO_SCHEDULE, "present"),),
            ),
        ),
        levels=ONE_LEVEL,
        request=TopologyRequest(required=HOSTNAME),
        count=1,
        want=(
            'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; '
            'excluded: taint "example.com/gpu=present:NoSchedule": 1'
        ),
    ),
    "detailed failure message with exclusion stats": Case(
        nodes=(
            node(
                "x1",
                host="x1",
                labels={"zone": "zone-a"},
                taints=(Taint("key", TaintEffect.NO_SCHEDULE, "value"),),
            ),
            node("x2", host="x2", labels={"zone": "zone-b"}),
            node("x3", host="x3", cpu="2", labels={"zone": "zone-b"}),
            node("x4", host="x4", cpu="100m", labels={"zone": "zone-a"}),
        ),
        levels=ONE_LEVEL,
        request=TopologyRequest(required=HOSTNAME),
        node_selector={"zone": "zone-a"},
        count=1,
        want=(
            'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 4; '
            'excluded: nodeSelector: 2, resource "cpu": 1, taint "key=value:NoSchedule": 1'
        ),
    ),
    "skip node which doesn't match node selector, label exists, value doesn't match; BestFit": (
        Case(
            nodes=(node("x1", host="x1", labels={"zone": "zone-b"}),),
            levels=ONE_LEVEL,
            request=TopologyRequest(required=HOSTNAME),
            node_selector={"zone": "zone-a"},
            count=1,
            want=(
                'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; '
                "excluded: nodeSelector: 1"
            ),
        )
    ),
    "block required for podset; host required for slices; BestFit": Case(
        nodes=(
            node("b1-r1-x3", block="b1", rack="r1", host="x3", cpu="3"),
            node("b1-r1-x5", block="b1", rack="r1", host="x5", cpu="3"),
            node("b1-r1-x1", block="b1", rack="r1", host="x1", cpu="3"),
        ),
        levels=THREE_LEVELS,
        request=TopologyRequest(required=BLOCK, slice_required=HOSTNAME, slice_size=2),
        count=6,
        want=hosts(("x1", 2), ("x3", 2), ("x5", 2)),
    ),
    "block required for podset; rack required for slices; podset fits in a block, but slices "
    "do not fit in racks": Case(
        nodes=(
            node("b1-r1-x3", block="b1", rack="r1", host="x3", cpu="2"),
            node("b1-r2-x5", block="b1", rack="r2", host="x5", cpu="2"),
            node("b1-r3-x1", block="b1", rack="r3", host="x1", cpu="2"),
        ),
        levels=THREE_LEVELS,
        request=TopologyRequest(required=BLOCK, slice_required=RACK, slice_size=3),
        count=6,
        want='topology "default" doesn\'t allow to fit any of 2 slice(s)',
    ),
    "block required for podset; rack required for slices; only 1 out of 2 slices fit the "
    "topology": Case(
        nodes=(
            node("b1-r1-x3", block="b1", rack="r1", host="x3", cpu="3"),
            node("b1-r2-x5", block="b1", rack="r2", host="x5"),
            node("b1-r3-x1", block="b1", rack="r3", host="x1"),
            node("b1-r4-x6", block="b1", rack="r4", host="x6"),
        ),
        levels=THREE_LEVELS,
        request=TopologyRequest(required=BLOCK, slice_required=RACK, slice_size=3),
        count=6,
        want='topology "default" allows to fit only 1 out of 2 slice(s)',
    ),
    "slice required topology level cannot be above the main required topology level": Case(
        nodes=DEFAULT_NODES,
        levels=THREE_LEVELS,
        request=TopologyRequest(required=RACK, slice_required=BLOCK, slice_size=1),
        count=1,
        want=f"podset slice topology {BLOCK} is above the podset topology {RACK}",
    ),
    "slice size is required when slice topology is requested": Case(
        nodes=DEFAULT_NODES,
        levels=THREE_LEVELS,
        request=TopologyRequest(required=BLOCK, slice_required=HOSTNAME),
        count=1,
        want="slice topology requested, but slice size not provided",
    ),
    "cannot request not existing slice topology": Case(
        nodes=DEFAULT_NODES,
        levels=THREE_LEVELS,
        request=TopologyRequest(required=BLOCK, slice_required="not-existing", slice_size=1),
        count=1,
        want="no requested topology level for slices: not-existing",
    ),
    "no topology for podset; host required for slices; BestFit": Case(
        nodes=(
            node("b1-r1-x3", block="b1", rack="r1", host="x3", cpu="3"),
            node("b1-r1-x5", block="b1", rack="r1", host="x5", cpu="3"),
            node("b1-r1-x1", block="b1", rack="r1", host="x1", cpu="3"),
        ),
        levels=THREE_LEVELS,
        request=TopologyRequest(slice_required=HOSTNAME, slice_size=2),
        count=6,
        want=hosts(("x1", 2), ("x3", 2), ("x5", 2)),
    ),
    "no topology for podset; host required for slices; multiple blocks; BestFit": Case(
        nodes=SCATTERED_NODES,
        levels=THREE_LEVELS,
        request=TopologyRequest(slice_required=HOSTNAME, slice_size=2),
        count=6,
        want=hosts(("x3", 4), ("x6", 2)),
    ),
}


def _request(case: Case) -> PodSetRequest:
    requests: dict[ResourceName, int] = {}
    if case.cpu is not None:
        requests[ResourceName("cpu")] = quantity("cpu", case.cpu)
    if case.memory is not None:
        requests[ResourceName("memory")] = case.memory
    return PodSetRequest(
        PodSetName("main"),
        case.count,
        requests,
        case.request,
        implied=case.implied,
        node_selector=case.node_selector,
    )


@pytest.mark.parametrize("name", list(CASES))
def test_find_topology_assignment_as_upstream(name: str) -> None:
    case = CASES[name]
    snapshot = TopologySnapshot(Topology("default", case.levels), case.nodes)
    assert snapshot.find_assignment(_request(case)) == case.want


def test_pods_already_on_a_node_and_admitted_workloads_take_their_room() -> None:
    """Upstream's "include usage from running non-TAS pods, found free capacity on another
    node": a pod kfed does not place by topology holds its requests on its node, and so does
    an admitted TAS workload in the leaves of its assignment."""
    nodes = (
        node("x1", host="x1", cpu="2"),
        node("x2", host="x2", cpu="2"),
        node("x3", host="x3", cpu="2"),
    )
    snapshot = TopologySnapshot(
        Topology("default", ONE_LEVEL),
        nodes,
        pod_usage={"x1": {ResourceName("cpu"): 1500}},
        tas_usage={("x2",): {ResourceName("cpu"): 2000, ResourceName("pods"): 2}},
    )
    request = PodSetRequest(
        PodSetName("main"),
        2,
        {ResourceName("cpu"): 1000},
        TopologyRequest(required=HOSTNAME),
    )
    assert snapshot.find_assignment(request) == hosts(("x3", 2))
    assert snapshot.find_assignment(request, simulate_empty=True) == hosts(("x2", 2))
    assumed: dict[tuple[str, ...], dict[ResourceName, int]] = {("x3",): {ResourceName("cpu"): 1000}}
    assert snapshot.find_assignment(request, assumed=assumed) == (
        'topology "default" allows to fit only 1 out of 2 pod(s). Total nodes: 3; '
        'excluded: resource "cpu": 2'
    )


def test_a_count_that_is_not_a_multiple_of_the_slice_size_is_refused_with_the_reason() -> None:
    snapshot = TopologySnapshot(Topology("default", THREE_LEVELS), DEFAULT_NODES)
    request = PodSetRequest(
        PodSetName("workers"),
        5,
        {ResourceName("cpu"): 100},
        TopologyRequest(required=BLOCK, slice_required=HOSTNAME, slice_size=2),
    )
    assert snapshot.find_assignment(request) == (
        "pod set workers has 5 pods, not a multiple of its slice size 2"
    )
