"""The dispatcher's records: the copies in flight are indexed, so that summing them per
worker at every placement reads those few, not every workload the manager knows."""

from __future__ import annotations

from manager.federation.records import Placement, Records


def placement(cluster: str) -> Placement:
    return Placement(cluster, "cq", {("cq", "default", "cpu"): 1}, deadline=0.0, reason="fits")


def test_only_records_holding_a_placement_are_in_flight() -> None:
    records = Records()
    for i in range(100):
        records(f"ns/wl-{i}")  # known, nothing in flight
    records("ns/a").placement = placement("w1")
    records("ns/b").placement = placement("w2")
    assert sorted(k for k, _ in records.placements()) == ["ns/a", "ns/b"]
    assert len(records) == 102

    records("ns/a").placement = None  # admitted there: no longer in flight
    assert [k for k, _ in records.placements()] == ["ns/b"]

    records.forget("ns/b")
    assert list(records.placements()) == []
    assert records.placement("ns/b") is None


def test_a_placement_replaced_is_counted_once() -> None:
    records = Records()
    records("ns/a").placement = placement("w1")
    records("ns/a").placement = placement("w2")
    assert [(k, p.cluster) for k, p in records.placements()] == [("ns/a", "w2")]
