"""`kfed whatif`: the flavor the manager's ClusterQueue would assign, in the queue's order,
then the dispatcher's verdict per worker."""

from __future__ import annotations

from typing import Any

import pytest

from manager.cli.jobfiles import pod_set
from manager.cli.prediction import NoFlavor, admission_check_names, assign_manager_flavors
from manager.federation import capacity
from tests.unit.cli.builders import cluster_queue, flavor

Obj = dict[str, Any]

FLAVORS = {"rtx-a1000": flavor("rtx-a1000"), "h100": flavor("h100")}


def seed_queue(reserved: dict[str, dict[str, Any]] | None = None, **kw: Any) -> Obj:
    return cluster_queue(
        "gpu-cq",
        {
            "rtx-a1000": {"cpu": 32, "memory": "128Gi", "nvidia.com/gpu": 2},
            "h100": {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": 4},
        },
        reserved=reserved,
        **kw,
    )


def job(gpus: int, model: str | None = None, tolerations: list[Obj] | None = None) -> Obj:
    spec: Obj = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": str(gpus)}},
            }
        ],
    }
    if model:
        spec["nodeSelector"] = {"gpu.model": model}
    if tolerations:
        spec["tolerations"] = tolerations
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ml-jobs"},
        "spec": {"template": {"spec": spec}},
    }


def test_the_node_selector_picks_the_flavor() -> None:
    a = assign_manager_flavors(seed_queue(), FLAVORS, pod_set(job(4, "h100")))
    assert a.flavors == {"cpu": "h100", "nvidia.com/gpu": "h100"}
    assert a.usage == {("h100", "cpu"): 2000, ("h100", "nvidia.com/gpu"): 4}
    assert a.fits_now
    assert a.notes == ["flavor rtx-a1000: doesn't match node selector gpu.model=h100"]


def test_without_a_selector_the_first_flavor_in_order_wins() -> None:
    a = assign_manager_flavors(seed_queue(), FLAVORS, pod_set(job(1)))
    assert a.flavors["nvidia.com/gpu"] == "rtx-a1000"


def test_a_full_flavor_is_passed_over_for_one_with_free_quota() -> None:
    full = seed_queue(reserved={"rtx-a1000": {"nvidia.com/gpu": 2}})
    a = assign_manager_flavors(full, FLAVORS, pod_set(job(1)))
    assert a.flavors["nvidia.com/gpu"] == "h100"
    assert a.fits_now
    assert a.notes == ["flavor rtx-a1000: 1 nvidia.com/gpu requested, 0 free now"]


def test_when_every_flavor_is_full_it_waits_for_the_first_that_could_fit() -> None:
    full = seed_queue(reserved={"rtx-a1000": {"nvidia.com/gpu": 2}, "h100": {"nvidia.com/gpu": 4}})
    a = assign_manager_flavors(full, FLAVORS, pod_set(job(1)))
    assert a.flavors["nvidia.com/gpu"] == "rtx-a1000"
    assert not a.fits_now


def test_a_request_beyond_every_nominal_quota_never_fits() -> None:
    with pytest.raises(NoFlavor) as caught:
        assign_manager_flavors(seed_queue(), FLAVORS, pod_set(job(8)))
    assert "8 nvidia.com/gpu requested, nominal quota 4" in str(caught.value)


def test_in_a_cohort_the_nominal_quota_is_not_a_limit() -> None:
    a = assign_manager_flavors(seed_queue(cohort="all"), FLAVORS, pod_set(job(8, "h100")))
    assert a.flavors["nvidia.com/gpu"] == "h100"
    assert not a.fits_now


def test_an_uncovered_resource_never_fits() -> None:
    pod_job = job(1)
    pod_job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"][
        "example.com/fpga"
    ] = "1"
    with pytest.raises(NoFlavor, match=r"covers no example\.com/fpga"):
        assign_manager_flavors(seed_queue(), FLAVORS, pod_set(pod_job))


def test_taints_must_be_tolerated() -> None:
    tainted = {
        "rtx-a1000": flavor(
            "rtx-a1000", taints=[{"key": "gpu", "value": "rtx", "effect": "NoSchedule"}]
        ),
        "h100": flavor("h100"),
    }
    a = assign_manager_flavors(seed_queue(), tainted, pod_set(job(1)))
    assert a.flavors["nvidia.com/gpu"] == "h100"
    tolerant = job(1, tolerations=[{"key": "gpu", "operator": "Exists"}])
    assert (
        assign_manager_flavors(seed_queue(), tainted, pod_set(tolerant)).flavors["nvidia.com/gpu"]
        == "rtx-a1000"
    )


def test_pods_are_counted_when_the_queue_covers_them() -> None:
    cq = cluster_queue(
        "cq", {"h100": {"nvidia.com/gpu": 4, "pods": 10}}, covered=("nvidia.com/gpu", "pods")
    )
    j = job(1, "h100")
    j["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"].pop("cpu")
    j["spec"]["parallelism"] = 3
    a = assign_manager_flavors(cq, {"h100": flavor("h100")}, pod_set(j))
    assert a.usage == {("h100", "nvidia.com/gpu"): 3, ("h100", "pods"): 3}


def test_admission_check_names_come_from_the_strategy() -> None:
    cq = {"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "multikueue"}]}}}
    assert admission_check_names(cq) == ["multikueue"]


def test_the_assignment_feeds_the_dispatchers_evaluation() -> None:
    a = assign_manager_flavors(seed_queue(), FLAVORS, pod_set(job(4, "h100")))
    request = capacity.Request("ml-jobs", "gpu-lq", a.usage)
    lq = {"ml-jobs/gpu-lq": {"spec": {"clusterQueue": "w"}}}

    def worker(name: str, gpus: int, order: int) -> capacity.WorkerView:
        cq = cluster_queue("w", {"h100": {"cpu": 64, "nvidia.com/gpu": gpus}})
        return capacity.WorkerView(name, lq, {"w": cq}, {"h100": flavor("h100")}, order=order)

    verdicts = [
        capacity.evaluate(worker("w1", 2, 0), request, FLAVORS),
        capacity.evaluate(worker("w2", 8, 1), request, FLAVORS),
        capacity.evaluate(worker("w3", 4, 2), request, FLAVORS),
    ]
    assert [v.fits for v in verdicts] == [False, True, True]
    best = capacity.choose(verdicts)
    assert best is not None and best.cluster == "w3", "best fit: the tightest worker"
