"""`kfed whatif`: the flavor the manager's admission core would assign, in the queue's order,
and whether it fits now; then the dispatcher's verdict per worker."""

from __future__ import annotations

from typing import Any

from manager.cli.manageradmission import Decision, Outcome, decide, workload_of
from manager.cli.snapshot import from_objects
from manager.federation.decisions import capacity
from tests.unit.cli.builders import cluster_queue, flavor

Obj = dict[str, Any]
NOW = 1_700_000_000.0
T0 = "2023-11-14T00:00:00Z"

FLAVORS = [flavor("rtx-a1000"), flavor("h100")]
LOCAL_QUEUE = {
    "metadata": {"name": "gpu-lq", "namespace": "ml-jobs"},
    "spec": {"clusterQueue": "gpu-cq"},
}


def seed_queue(name: str = "gpu-cq", **kw: Any) -> Obj:
    cq = cluster_queue(
        name,
        {
            "rtx-a1000": {"cpu": 32, "memory": "128Gi", "nvidia.com/gpu": 2},
            "h100": {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": 4},
        },
        **kw,
    )
    cq["spec"]["namespaceSelector"] = {}  # every namespace (null would select none)
    return cq


def holding(flavor_name: str, gpus: int, name: str = "running") -> Obj:
    """A workload of gpu-cq holding ``gpus`` GPUs of ``flavor_name``."""
    true = {"status": "True", "reason": "Set", "message": "", "lastTransitionTime": T0}
    pod = {"name": "main", "image": "busybox"}
    return {
        "metadata": {"name": name, "namespace": "ml-jobs"},
        "spec": {
            "queueName": "gpu-lq",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [pod]}}}],
        },
        "status": {
            "conditions": [{"type": "QuotaReserved", **true}, {"type": "Admitted", **true}],
            "admission": {
                "clusterQueue": "gpu-cq",
                "podSetAssignments": [
                    {
                        "name": "main",
                        "flavors": {"nvidia.com/gpu": flavor_name},
                        "resourceUsage": {"nvidia.com/gpu": str(gpus)},
                        "count": 1,
                    }
                ],
            },
        },
    }


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
        "metadata": {
            "name": "j",
            "namespace": "ml-jobs",
            "labels": {"kueue.x-k8s.io/queue-name": "gpu-lq"},
        },
        "spec": {"template": {"spec": spec}},
    }


def manager_decision(
    the_job: Obj,
    *,
    queues: list[Obj] | None = None,
    flavors: list[Obj] | None = None,
    workloads: list[Obj] | None = None,
    local_queues: list[Obj] | None = None,
) -> Decision:
    snap = from_objects(
        flavors=FLAVORS if flavors is None else flavors,
        cluster_queues=queues or [seed_queue()],
        local_queues=local_queues or [LOCAL_QUEUE],
        workloads=workloads or [],
        now=NOW,
    )
    return decide(snap, workload_of(the_job, snap, now=NOW), now=NOW)


def test_the_node_selector_picks_the_flavor() -> None:
    d = manager_decision(job(4, "h100"))
    assert d.flavors == {"cpu": "h100", "nvidia.com/gpu": "h100"}
    assert d.usage == {("h100", "cpu"): 2000, ("h100", "nvidia.com/gpu"): 4}
    assert d.fits_now
    assert d.passed_over == (
        "couldn't assign flavors: flavor rtx-a1000 doesn't match node selector gpu.model=h100",
    )


def test_without_a_selector_the_first_flavor_in_order_wins() -> None:
    assert manager_decision(job(1)).flavors["nvidia.com/gpu"] == "rtx-a1000"


def test_a_full_flavor_is_passed_over_for_one_with_free_quota() -> None:
    d = manager_decision(job(1), workloads=[holding("rtx-a1000", 2)])
    assert d.flavors["nvidia.com/gpu"] == "h100"
    assert d.outcome is Outcome.FITS
    assert d.passed_over == (
        "insufficient unused quota for nvidia.com/gpu in flavor rtx-a1000: 1 requested, "
        "0 available",
    )


def test_when_every_flavor_is_full_it_waits_for_the_first_that_could_fit() -> None:
    d = manager_decision(job(1), workloads=[holding("rtx-a1000", 2, "a"), holding("h100", 4, "b")])
    assert d.flavors["nvidia.com/gpu"] == "rtx-a1000"
    assert d.outcome is Outcome.WAITS
    assert not d.fits_now
    assert "in flavor h100: 1 requested, 0 available" in d.reason


def test_a_request_beyond_every_nominal_quota_never_fits() -> None:
    d = manager_decision(job(8))
    assert d.outcome is Outcome.NEVER
    assert (
        "8 requested, but ClusterQueue gpu-cq can get at most 4 even when its cohort is idle"
        in (d.reason)
    )


def test_in_a_cohort_it_borrows_what_the_others_do_not_use() -> None:
    lender = cluster_queue("lender", {"h100": {"cpu": 64, "nvidia.com/gpu": 4}}, cohort="all")
    d = manager_decision(job(8, "h100"), queues=[seed_queue(cohort="all"), lender])
    assert d.flavors["nvidia.com/gpu"] == "h100"
    assert d.outcome is Outcome.BORROWS
    assert d.fits_now
    assert d.reason == "borrowing from cohort all"


def test_a_cohort_of_one_lends_nothing() -> None:
    """Only quota the cohort has can be borrowed: alone in it, 8 of 4 GPUs never fit."""
    assert manager_decision(job(8, "h100"), queues=[seed_queue(cohort="all")]).outcome is (
        Outcome.NEVER
    )


def test_an_uncovered_resource_never_fits() -> None:
    pod_job = job(1)
    pod_job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"][
        "example.com/fpga"
    ] = "1"
    d = manager_decision(pod_job)
    assert d.outcome is Outcome.NEVER
    assert "resource example.com/fpga unavailable in ClusterQueue gpu-cq" in d.reason


def test_taints_must_be_tolerated() -> None:
    tainted = [
        flavor("rtx-a1000", taints=[{"key": "gpu", "value": "rtx", "effect": "NoSchedule"}]),
        flavor("h100"),
    ]
    assert manager_decision(job(1), flavors=tainted).flavors["nvidia.com/gpu"] == "h100"
    tolerant = job(1, tolerations=[{"key": "gpu", "operator": "Exists"}])
    assert manager_decision(tolerant, flavors=tainted).flavors["nvidia.com/gpu"] == "rtx-a1000"


def test_pods_are_counted_when_the_queue_covers_them() -> None:
    cq = cluster_queue(
        "gpu-cq", {"h100": {"nvidia.com/gpu": 4, "pods": 10}}, covered=("nvidia.com/gpu", "pods")
    )
    cq["spec"]["namespaceSelector"] = {}
    j = job(1, "h100")
    j["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"].pop("cpu")
    j["spec"]["parallelism"] = 3
    d = manager_decision(j, queues=[cq], flavors=[flavor("h100")])
    assert d.usage == {("h100", "nvidia.com/gpu"): 3, ("h100", "pods"): 3}


def test_a_namespace_the_queue_does_not_select_never_fits() -> None:
    cq = seed_queue()
    cq["spec"]["namespaceSelector"] = None
    d = manager_decision(job(1), queues=[cq])
    assert d.outcome is Outcome.NEVER
    assert "namespace ml-jobs is not selected by ClusterQueue gpu-cq's namespaceSelector" in (
        d.reason
    )


def test_the_assignment_feeds_the_dispatchers_evaluation() -> None:
    d = manager_decision(job(4, "h100"))
    request = capacity.Request("ml-jobs", "gpu-lq", d.usage)
    lq = {"ml-jobs/gpu-lq": {"spec": {"clusterQueue": "w"}}}
    manager_flavors = {str(f["metadata"]["name"]): f for f in FLAVORS}

    def worker(name: str, gpus: int, order: int) -> capacity.WorkerView:
        cq = cluster_queue("w", {"h100": {"cpu": 64, "nvidia.com/gpu": gpus}})
        return capacity.WorkerView(name, lq, {"w": cq}, {"h100": flavor("h100")}, order=order)

    verdicts = [
        capacity.evaluate(worker("w1", 2, 0), request, manager_flavors),
        capacity.evaluate(worker("w2", 8, 1), request, manager_flavors),
        capacity.evaluate(worker("w3", 4, 2), request, manager_flavors),
    ]
    assert [v.fits for v in verdicts] == [False, True, True]
    best = capacity.choose(verdicts)
    assert best is not None and best.cluster == "w3", "best fit: the tightest worker"
