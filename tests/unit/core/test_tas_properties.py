"""Properties of TAS placement over random topologies (hypothesis).

For any tree of blocks, racks and hosts with random free cpu, and any request:

- a placement never puts more pods on a host than it has room for;
- its counts add up to the pod count;
- a required level is respected (every pod in one domain of it), and a slice never spans
  two domains of its level;
- a required placement is refused only when no domain of that level has room for all pods
  (the first phase's counts are exact when pods are not sliced).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from manager.core.model import PodSetName, ResourceName, TopologyRequest
from manager.core.tas import TopologySnapshot
from manager.core.tas_model import HOSTNAME, Node, PodSetRequest, Topology, TopologyAssignment

BLOCK = "block"
RACK = "rack"
LEVELS = (BLOCK, RACK, HOSTNAME)
CPU = ResourceName("cpu")


@dataclass(frozen=True)
class Scenario:
    nodes: tuple[Node, ...]
    per_pod_cpu: int
    count: int
    request: TopologyRequest


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    nodes: list[Node] = []
    for b in range(draw(st.integers(1, 3))):
        for r in range(draw(st.integers(1, 3))):
            for h in range(draw(st.integers(1, 3))):
                host = f"b{b}r{r}h{h}"
                labels = {BLOCK: f"b{b}", RACK: f"b{b}-r{r}", HOSTNAME: host}
                cpu = draw(st.integers(0, 8)) * 1000
                nodes.append(Node(host, labels, {CPU: cpu, ResourceName("pods"): 110}))
    per_pod = draw(st.sampled_from([500, 1000, 2000]))
    mode = draw(st.sampled_from(["required", "preferred", "unconstrained", "slices"]))
    level = draw(st.sampled_from(LEVELS))
    if mode == "slices":
        size = draw(st.integers(1, 3))
        count = size * draw(st.integers(1, 5))
        slice_level = draw(st.sampled_from(LEVELS[LEVELS.index(level) :]))
        request = TopologyRequest(required=level, slice_required=slice_level, slice_size=size)
    else:
        count = draw(st.integers(1, 16))
        request = TopologyRequest(
            required=level if mode == "required" else None,
            preferred=level if mode == "preferred" else None,
            unconstrained=mode == "unconstrained",
        )
    return Scenario(tuple(nodes), per_pod, count, request)


def _place(s: Scenario) -> tuple[TopologySnapshot, TopologyAssignment | str]:
    snapshot = TopologySnapshot(Topology("t", LEVELS), s.nodes)
    request = PodSetRequest(PodSetName("main"), s.count, {CPU: s.per_pod_cpu}, s.request)
    return snapshot, snapshot.find_assignment(request)


def _room(s: Scenario) -> dict[str, int]:
    return {n.name: n.allocatable[CPU] // s.per_pod_cpu for n in s.nodes}


def _labels(s: Scenario) -> dict[str, dict[str, str]]:
    return {n.name: dict(n.labels) for n in s.nodes}


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_no_host_gets_more_pods_than_it_has_room_for_and_counts_add_up(s: Scenario) -> None:
    _, result = _place(s)
    if isinstance(result, str):
        return
    room = _room(s)
    assert result.levels == (HOSTNAME,)
    assert result.pods == s.count
    for domain in result.domains:
        assert 0 < domain.count <= room[domain.values[0]]
    assert len({d.values for d in result.domains}) == len(result.domains)


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_required_level_and_slices_are_respected(s: Scenario) -> None:
    _, result = _place(s)
    if isinstance(result, str):
        return
    labels = _labels(s)
    if s.request.required:
        spanned = {labels[d.values[0]][s.request.required] for d in result.domains}
        assert len(spanned) == 1
    if s.request.slice_required:
        size = s.request.slice_size or 1
        per_domain: dict[str, int] = defaultdict(int)
        for d in result.domains:
            per_domain[labels[d.values[0]][s.request.slice_required]] += d.count
        assert all(n % size == 0 for n in per_domain.values())


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_a_required_placement_is_refused_only_when_no_domain_holds_every_pod(
    s: Scenario,
) -> None:
    if not s.request.required or s.request.slice_required:
        return
    _, result = _place(s)
    room = _room(s)
    labels = _labels(s)
    per_domain: dict[str, int] = defaultdict(int)
    for name, pods in room.items():
        per_domain[labels[name][s.request.required]] += pods
    fits_somewhere = any(pods >= s.count for pods in per_domain.values())
    assert isinstance(result, TopologyAssignment) == fits_somewhere
    if isinstance(result, str):
        best = max(per_domain.values(), default=0)
        assert (f"only {best} out of" in result) or (best == 0 and "any of" in result)


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_preferred_and_unconstrained_place_whenever_the_whole_topology_has_room(
    s: Scenario,
) -> None:
    if s.request.required:
        return
    _, result = _place(s)
    total = sum(_room(s).values())
    assert isinstance(result, TopologyAssignment) == (total >= s.count)
