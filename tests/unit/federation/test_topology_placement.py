"""The manager's placement by topology (decisions/topology.py), from the summaries workers
report (core/tas_summary.py): table cases, then hypothesis properties over random workers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from manager.core.model import ResourceName, TopologyRequest
from manager.core.tas import TopologySnapshot
from manager.core.tas_model import HOSTNAME, Node, Topology
from manager.core.tas_summary import BadSummary, snapshot_of, summarize
from manager.federation.decisions import capacity, topology
from manager.federation.decisions.topology import Need, PodSetNeed

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
LEVELS = (BLOCK, RACK, HOSTNAME)
GPU = "nvidia.com/gpu"


def units(**amounts: int) -> dict[ResourceName, int]:
    """Resources by keyword (``GPU`` stands for nvidia.com/gpu)."""
    return {ResourceName(GPU if r == "GPU" else r): v for r, v in amounts.items()}


def worker(racks: Mapping[str, list[int]], *, block_of: Mapping[str, str] | None = None) -> Any:
    """A worker's summary, as its shim reports it: rack -> free GPUs per host."""
    nodes = []
    for rack, hosts in racks.items():
        for i, gpus in enumerate(hosts):
            name = f"{rack}-h{i}"
            labels = {BLOCK: (block_of or {}).get(rack, "b1"), RACK: rack, HOSTNAME: name}
            nodes.append(Node(name, labels, units(GPU=gpus, cpu=64000, pods=110)))
    tree = TopologySnapshot(Topology("default", LEVELS), nodes)
    return {"tas-h100": snapshot_of(summarize(tree))}


def gang(count: int, **asked: Any) -> Need:
    return Need(
        (PodSetNeed("main", count, {GPU: 1, "cpu": 1000}, TopologyRequest(**asked), "h100"),)
    )


FITS = capacity.Candidate("w", True, "fits in cq", "cq", {"h100": "tas-h100"}, {}, (0.25, 0, 0))


@pytest.mark.parametrize(
    ("racks", "need", "fits", "reason"),
    [
        pytest.param(
            {"r1": [4, 4]}, gang(8, required=RACK), True, "r1-h0 x4, r1-h1 x4", id="rack-of-8"
        ),
        pytest.param(
            {"r1": [4, 2], "r2": [2]},
            gang(8, required=RACK),
            False,
            "no rack holds 8 pods of pod set main (1 nvidia.com/gpu each), the largest 6",
            id="spread-over-racks",
        ),
        pytest.param(
            {"r1": [4, 2], "r2": [2]}, gang(8, required=BLOCK), True, "x2", id="block-holds-it"
        ),
        pytest.param(
            {"r1": [3]},
            gang(4, required=HOSTNAME),
            False,
            "no host holds 4 pods of pod set main (1 nvidia.com/gpu each), the largest 3",
            id="host-too-small",
        ),
        pytest.param(
            {"r1": [2], "r2": [2]},
            gang(4, preferred=RACK),
            True,
            "r1-h0 x2",
            id="preferred-spreads",
        ),
        pytest.param(
            {"r1": [3, 3], "r2": [3, 3]},
            gang(8, required=BLOCK, slice_required=HOSTNAME, slice_size=4),
            False,
            "no block holds 8 pods in slices of 4 (each on one host) of pod set main "
            "(1 nvidia.com/gpu each), the largest 0",
            id="slices-of-4-on-3-gpu-hosts",
        ),
        pytest.param(
            {"r1": [3, 3]},
            gang(8, slice_required=HOSTNAME, slice_size=4),
            False,
            "doesn't allow to fit any of 2 slice(s)",
            id="slices-alone-say-upstreams-count",
        ),
        pytest.param(
            {"r1": [4, 4], "r2": [4, 4]},
            gang(16, slice_required=HOSTNAME, slice_size=4),
            True,
            "x4",
            id="four-slices-one-per-host",
        ),
        pytest.param({"r1": [4]}, gang(2, unconstrained=True), True, "x2", id="unconstrained"),
    ],
)
def test_a_worker_is_a_candidate_only_where_its_domains_hold_the_gang(
    racks: dict[str, list[int]], need: Need, fits: bool, reason: str
) -> None:
    judged = topology.evaluate(FITS, worker(racks), need)
    assert judged.fits is fits
    assert reason in judged.reason


def test_a_worker_without_a_topology_report_is_no_candidate_for_a_tas_gang() -> None:
    judged = topology.evaluate(FITS, {}, gang(2, required=RACK))
    assert not judged.fits and "no topology reported for flavor tas-h100" in judged.reason
    assert not judged.never  # its shim may report one later


def test_quota_refusals_and_plain_workloads_are_left_as_they_are() -> None:
    refused = capacity.Candidate("w", False, "insufficient nvidia.com/gpu")
    assert topology.evaluate(refused, {}, gang(8, required=RACK)) is refused
    assert topology.evaluate(FITS, {}, Need()) is FITS


def test_preferred_the_tightest_worker_wins_and_a_wider_level_is_the_fallback() -> None:
    need = gang(8, preferred=RACK)
    in_a_rack = topology.evaluate(FITS, worker({"r1": [4, 4], "r2": [1]}), need)
    in_a_block = topology.evaluate(FITS, worker({"r1": [4], "r2": [4]}), need)
    spread = topology.evaluate(
        FITS, worker({"r1": [4], "r2": [4]}, block_of={"r1": "b1", "r2": "b2"}), need
    )
    assert in_a_rack.fits and in_a_block.fits and spread.fits
    assert in_a_rack.score < in_a_block.score < spread.score
    assert capacity.choose([spread, in_a_block, in_a_rack]) is in_a_rack


def test_every_pod_set_needs_its_own_domain_beside_the_earlier_ones() -> None:
    two = Need(
        (
            PodSetNeed("a", 4, {GPU: 1}, TopologyRequest(required=RACK), "h100"),
            PodSetNeed("b", 4, {GPU: 1}, TopologyRequest(required=RACK), "h100"),
        )
    )
    assert topology.evaluate(FITS, worker({"r1": [4, 4]}), two).fits
    refused = topology.evaluate(FITS, worker({"r1": [4, 2]}), two)
    assert not refused.fits and "pod set b" in refused.reason


def test_the_need_comes_from_the_workload_and_its_admission() -> None:
    wl = {
        "spec": {
            "podSets": [
                {"name": "driver", "count": 1},
                {"name": "workers", "count": 8, "topologyRequest": {"required": RACK}},
            ]
        },
        "status": {
            "admission": {
                "podSetAssignments": [
                    {"name": "driver", "count": 1, "flavors": {"cpu": "h100"}},
                    {
                        "name": "workers",
                        "count": 8,
                        "flavors": {"cpu": "h100", GPU: "h100"},
                        "resourceUsage": {"cpu": "32", GPU: "8"},
                    },
                ]
            }
        },
    }
    (ps,) = topology.need_of(wl).pod_sets
    assert (ps.name, ps.count, ps.flavor) == ("workers", 8, "h100")
    assert ps.per_pod == {"cpu": 4000, GPU: 1}
    assert ps.request == TopologyRequest(required=RACK)
    assert not topology.need_of({"spec": {"podSets": [{"name": "main"}]}})


@pytest.mark.parametrize(
    "summary",
    [
        {},
        {"format": 99},
        {"format": 1, "topology": "t", "levels": ["a"], "leaves": [[["x", "y"], {}]]},
    ],
)
def test_a_summary_of_another_shape_is_refused_not_misread(summary: dict[str, Any]) -> None:
    with pytest.raises(BadSummary):
        snapshot_of(summary)


def test_the_summary_carries_what_is_free_per_host() -> None:
    nodes = [Node("h", {RACK: "r", HOSTNAME: "h"}, units(GPU=4, pods=110))]
    tree = TopologySnapshot(
        Topology("t", (RACK, HOSTNAME)), nodes, tas_usage={("h",): units(GPU=3, pods=3)}
    )
    assert summarize(tree)["leaves"] == [[["r", "h"], {GPU: 1, "pods": 107}]]


# -- properties ---------------------------------------------------------------------------

racks_strategy = st.dictionaries(
    st.sampled_from([f"r{i}" for i in range(4)]),
    st.lists(st.integers(0, 8), min_size=1, max_size=4),
    min_size=1,
)


@settings(max_examples=150, deadline=None)
@given(racks=racks_strategy, count=st.integers(1, 24), level=st.sampled_from(LEVELS))
def test_never_a_worker_without_a_fitting_domain(
    racks: dict[str, list[int]], count: int, level: str
) -> None:
    """Accepted for a required level: some domain of that level has room for every pod;
    refused: none has, and the reason names the largest."""
    judged = topology.evaluate(FITS, worker(racks), gang(count, required=level))
    index = LEVELS.index(level)
    by_domain: dict[tuple[str, ...], int] = {}
    for rack, hosts in racks.items():
        for i, gpus in enumerate(hosts):
            key = ("b1", rack, f"{rack}-h{i}")[: index + 1]
            by_domain[key] = by_domain.get(key, 0) + gpus
    largest = max(by_domain.values())
    assert judged.fits is (largest >= count)
    if not judged.fits:
        assert judged.reason.endswith(f"the largest {largest}")


@settings(max_examples=100, deadline=None)
@given(racks=racks_strategy, count=st.integers(1, 24))
def test_preferred_accepts_exactly_where_the_worker_has_room_at_all(
    racks: dict[str, list[int]], count: int
) -> None:
    judged = topology.evaluate(FITS, worker(racks), gang(count, preferred=RACK))
    assert judged.fits is (sum(sum(h) for h in racks.values()) >= count)
    if judged.fits:
        fits_in_a_rack = any(sum(h) >= count for h in racks.values())
        assert (judged.score[0] - FITS.score[0] == 0) is fits_in_a_rack


def test_what_was_sent_and_not_admitted_yet_counts_as_taken() -> None:
    """Two gangs placed at once: the first's expected racks are in flight to the worker (its
    report cannot show them yet), so the second is not sent into the same rack."""
    trees = worker({"r1": [4, 4], "r2": [4, 2]})
    need = gang(8, required=RACK)
    held = topology.expected(trees, need, FITS.flavors)
    assert sum(usage["nvidia.com/gpu"] for usage in held["tas-h100"].values()) == 8
    assert topology.evaluate(FITS, trees, need).fits
    refused = topology.evaluate(FITS, trees, need, in_flight=held)
    assert not refused.fits and refused.reason.endswith("the largest 6"), refused.reason
    assert topology.expected(trees, Need(), FITS.flavors) == {}
    assert topology.expected(worker({"r1": [2]}), need, FITS.flavors) == {}
