"""Where a workload fits on one worker, and whether it ever can: ``capacity.evaluate`` on
hand-built worker views (the informer caches it reads)."""

from __future__ import annotations

from typing import Any

import pytest

from manager.federation.decisions import capacity

GPU = "nvidia.com/gpu"


def worker(*, queue: bool = True, flavor: str = "h100", gpus: int = 4, reserved: int = 0) -> Any:
    cq = {
        "metadata": {"name": "gpu-cq"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": [GPU],
                    "flavors": [
                        {"name": flavor, "resources": [{"name": GPU, "nominalQuota": gpus}]}
                    ],
                }
            ]
        },
        "status": {
            "flavorsReservation": [
                {"name": flavor, "resources": [{"name": GPU, "total": str(reserved)}]}
            ]
        },
    }
    lq = {"metadata": {"name": "gpu-lq", "namespace": "ml"}, "spec": {"clusterQueue": "gpu-cq"}}
    return capacity.WorkerView(
        name="w",
        local_queues={"ml/gpu-lq": lq} if queue else {},
        cluster_queues={"gpu-cq": cq},
        flavors={flavor: {"metadata": {"name": flavor}, "spec": {}}},
    )


def request(gpus: int) -> capacity.Request:
    return capacity.Request("ml", "gpu-lq", {("h100", GPU): gpus})


@pytest.mark.parametrize(
    ("view", "gpus", "says"),
    [
        (worker(queue=False), 1, "no LocalQueue ml/gpu-lq"),
        (worker(flavor="a100"), 1, "has no flavor matching h100"),
        (worker(gpus=2), 3, "too small: flavor h100 of ClusterQueue gpu-cq has 2 nvidia.com/gpu"),
    ],
)
def test_a_worker_that_can_never_hold_it_says_so(view: Any, gpus: int, says: str) -> None:
    candidate = capacity.evaluate(view, request(gpus), {})
    assert not candidate.fits and candidate.never
    assert says in candidate.reason


def test_a_full_worker_is_not_never() -> None:
    """Its quota is big enough, only taken now: the workload waits, it is not given up."""
    candidate = capacity.evaluate(worker(gpus=4, reserved=3), request(2), {})
    assert not candidate.fits and not candidate.never
    assert "insufficient nvidia.com/gpu" in candidate.reason


def test_never_placeable_needs_every_worker_to_say_never() -> None:
    never = capacity.Candidate("a", False, "too small", never=True)
    full = capacity.Candidate("b", False, "insufficient", never=False)
    unreachable = capacity.Candidate("c", False, "not connected")
    assert capacity.never_placeable([never])
    assert capacity.never_placeable([])  # no worker configured at all
    assert not capacity.never_placeable([never, full])
    assert not capacity.never_placeable([never, unreachable])
