"""Which of a manager ClusterQueue's flavors each worker offers together (``colocation.py``)."""

from __future__ import annotations

from typing import Any

from manager.federation.decisions.capacity import WorkerView
from manager.federation.decisions.colocation import places

Obj = dict[str, Any]
GPU_LQ = "ml-jobs/gpu-lq"


def flavor(name: str, model: str) -> Obj:
    return {"metadata": {"name": name}, "spec": {"nodeLabels": {"gpu.model": model}}}


def cluster_queue(name: str, *flavors: str) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": f, "resources": [{"name": "cpu", "nominalQuota": 8}]}
                        for f in flavors
                    ],
                }
            ]
        },
    }


def local_queue(cq: str) -> Obj:
    return {"spec": {"clusterQueue": cq}}


MANAGER_FLAVORS = {"rtx-a1000": flavor("rtx-a1000", "rtx"), "h100": flavor("h100", "h100")}
MANAGER_CQ = cluster_queue("gpu-cq", "rtx-a1000", "h100")


def worker(name: str, *flavors: str, worker_flavors: dict[str, Obj] | None = None) -> WorkerView:
    return WorkerView(
        name=name,
        local_queues={GPU_LQ: local_queue("gpu-cq")},
        cluster_queues={"gpu-cq": cluster_queue("gpu-cq", *flavors)},
        flavors=worker_flavors or {f: MANAGER_FLAVORS[f] for f in flavors if f in MANAGER_FLAVORS},
    )


def test_each_worker_offers_the_flavors_it_has_in_the_workers_order() -> None:
    found = places(
        MANAGER_CQ, [GPU_LQ], [worker("w1", "rtx-a1000"), worker("w2", "h100")], MANAGER_FLAVORS
    )
    assert found == (frozenset({"rtx-a1000"}), frozenset({"h100"}))


def test_a_set_offered_by_two_workers_is_listed_once() -> None:
    workers = [worker("w2", "h100"), worker("w3", "h100"), worker("w1", "rtx-a1000")]
    assert places(MANAGER_CQ, [GPU_LQ], workers, MANAGER_FLAVORS) == (
        frozenset({"h100"}),
        frozenset({"rtx-a1000"}),
    )


def test_a_worker_flavor_of_another_name_matches_by_node_labels() -> None:
    renamed = worker("w2", "hopper", worker_flavors={"hopper": flavor("hopper", "h100")})
    assert places(MANAGER_CQ, [GPU_LQ], [renamed], MANAGER_FLAVORS) == (frozenset({"h100"}),)


def test_workers_without_the_local_queue_or_a_matching_flavor_offer_nothing() -> None:
    no_queue = WorkerView("w0", local_queues={}, cluster_queues={}, flavors={})
    other = worker("w4", "a100", worker_flavors={"a100": flavor("a100", "a100")})
    assert places(MANAGER_CQ, [GPU_LQ], [no_queue, other], MANAGER_FLAVORS) == ()
