"""A worker that grows: which flavors a Karpenter NodePool makes nodes for
(``growth.grown_flavors``), and that such a worker is chosen only when no worker that can run
the workload on nodes it has fits (``capacity.choose``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from manager.federation.decisions import capacity, growth

GPU = "nvidia.com/gpu"
Obj = dict[str, Any]


def flavor(name: str, labels: dict[str, str]) -> Obj:
    return {"metadata": {"name": name}, "spec": {"nodeLabels": labels}}


def pool(name: str, labels: dict[str, str], requirements: list[Obj] | None = None) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": labels},
                "spec": {"requirements": requirements or []},
            }
        },
    }


def test_a_flavor_grows_where_a_nodepool_makes_nodes_with_all_its_labels() -> None:
    flavors = {
        "h100": flavor("h100", {"gpu.model": "h100"}),
        "a1000": flavor("a1000", {"gpu.model": "rtx-a1000"}),
        "plain": {"metadata": {"name": "plain"}, "spec": {}},
    }
    pools = [pool("cloud-h100", {"gpu.model": "h100", "tier": "cloud"})]
    assert growth.grown_flavors(flavors, pools) == {"h100": "cloud-h100"}


def test_a_single_valued_requirement_is_a_label_of_the_pools_nodes() -> None:
    req = [
        {"key": "gpu.model", "operator": "In", "values": ["h100"]},
        {"key": "zone", "operator": "In", "values": ["a", "b"]},  # not one value: not a label
    ]
    flavors = {
        "h100": flavor("h100", {"gpu.model": "h100"}),
        "zoned": flavor("zoned", {"gpu.model": "h100", "zone": "a"}),
    }
    assert growth.grown_flavors(flavors, [pool("p", {}, req)]) == {"h100": "p"}


def test_a_pool_with_other_labels_or_a_malformed_pool_grows_nothing() -> None:
    flavors = {"h100": flavor("h100", {"gpu.model": "h100"})}
    assert growth.grown_flavors(flavors, [pool("p", {"gpu.model": "a100"})]) == {}
    bad = {"metadata": {"name": "bad"}, "spec": {"template": "not an object"}}
    assert growth.grown_flavors(flavors, [bad]) == {}


def worker(
    name: str, *, gpus: int, order: int, grows: bool = False, reserved: int = 0
) -> capacity.WorkerView:
    cq = {
        "metadata": {"name": "gpu-cq"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": [GPU],
                    "flavors": [
                        {"name": "h100", "resources": [{"name": GPU, "nominalQuota": gpus}]}
                    ],
                }
            ]
        },
        "status": {
            "flavorsReservation": [
                {"name": "h100", "resources": [{"name": GPU, "total": str(reserved)}]}
            ]
        },
    }
    lq = {"metadata": {"name": "gpu-lq", "namespace": "ml"}, "spec": {"clusterQueue": "gpu-cq"}}
    return capacity.WorkerView(
        name=name,
        local_queues={"ml/gpu-lq": lq},
        cluster_queues={"gpu-cq": cq},
        flavors={"h100": flavor("h100", {"gpu.model": "h100"})},
        order=order,
        grows={"h100": "cloud-h100"} if grows else {},
    )


def request(gpus: int) -> capacity.Request:
    return capacity.Request("ml", "gpu-lq", {("h100", GPU): gpus})


def test_the_cloud_worker_comes_after_an_on_premises_worker_that_fits() -> None:
    """Best fit and config order alone would pick the cloud worker (no quota left after it,
    first in the config); it must grow, so the on-premises worker goes first. Its candidate
    says what would make its nodes."""
    on_prem = capacity.evaluate(worker("on-prem", gpus=8, order=1), request(4), {})
    cloud = capacity.evaluate(worker("cloud", gpus=4, order=0, grows=True), request(4), {})
    assert cloud.fits and cloud.grows == "NodePool cloud-h100"
    assert "nodes on demand from NodePool cloud-h100" in cloud.reason
    # The cloud worker would be best fit (no quota left after it) and first in config order.
    assert cloud.score < on_prem.score
    chosen = capacity.choose([cloud, on_prem])
    assert chosen is not None and chosen.cluster == "on-prem"


def test_the_cloud_worker_takes_it_when_no_on_premises_worker_can() -> None:
    on_prem = capacity.evaluate(worker("on-prem", gpus=8, order=0, reserved=6), request(4), {})
    cloud = capacity.evaluate(worker("cloud", gpus=16, order=1, grows=True), request(4), {})
    assert not on_prem.fits and not on_prem.never  # full now, not forever
    chosen = capacity.choose([on_prem, cloud])
    assert chosen is not None and chosen.cluster == "cloud"


@given(st.lists(st.tuples(st.floats(0, 1), st.booleans()), min_size=1, max_size=6))
def test_a_growing_worker_is_never_chosen_over_a_fitting_one_that_need_not_grow(
    shapes: list[tuple[float, bool]],
) -> None:
    base = capacity.Candidate("x", True, "fits")
    candidates = [
        replace(base, cluster=f"w{i}", score=(tight, 0, i), grows="NodePool p" if grows else "")
        for i, (tight, grows) in enumerate(shapes)
    ]
    chosen = capacity.choose(candidates)
    assert chosen is not None
    if any(not c.grows for c in candidates):
        assert not chosen.grows
