"""How `kfed submit` describes a submitted Job's progress, from its manager Workload."""

from __future__ import annotations

from manager.api import constants as C
from manager.cli.submission import placement
from tests.unit.cli.builders import admission, condition, reserved_conditions, workload

JOB = {"metadata": {"name": "heavy-job", "namespace": "ml-jobs", "uid": "abcdef12"}}
MK = {"multikueue"}


def test_no_workload_yet_points_at_the_manager() -> None:
    p = placement(JOB, None, MK)
    assert not p.done
    assert "no Workload yet" in p.text


def test_pending_shows_the_queue_message() -> None:
    wl = workload(
        "w", conditions=[condition(C.QUOTA_RESERVED, False, "Pending", "insufficient quota")]
    )
    p = placement(JOB, wl, MK)
    assert (p.done, p.text) == (False, "pending: insufficient quota")


def test_reserved_shows_the_multikueue_check_message() -> None:
    wl = workload(
        "w",
        conditions=reserved_conditions(admitted=False),
        admission=admission("cq", "h100"),
        checks=[{"name": "multikueue", "state": "Pending", "message": "no worker can admit it"}],
    )
    p = placement(JOB, wl, MK)
    assert not p.done
    assert p.text == "quota reserved in cq; MultiKueue check Pending: no worker can admit it"


def test_placed_once_the_check_is_ready_with_a_cluster() -> None:
    wl = workload(
        "w",
        conditions=reserved_conditions(admitted=True),
        admission=admission("cq", "h100"),
        checks=[{"name": "multikueue", "state": "Ready", "message": ""}],
        cluster="worker-2",
    )
    p = placement(JOB, wl, MK)
    assert (p.job, p.done, p.cluster) == ("ml-jobs/heavy-job", True, "worker-2")


def test_a_queue_without_multikueue_admits_on_the_manager() -> None:
    wl = workload(
        "w", conditions=reserved_conditions(admitted=True), admission=admission("cq", "h100")
    )
    p = placement(JOB, wl, MK)
    assert p.done and p.cluster is None
    assert "not federated" in p.text


def test_finished_counts_as_done() -> None:
    wl = workload(
        "w",
        conditions=[*reserved_conditions(True), condition(C.FINISHED, True, "Succeeded", "ok")],
        admission=admission("cq", "h100"),
        cluster="worker-1",
    )
    p = placement(JOB, wl, MK)
    assert (p.done, p.cluster, p.text) == (True, "worker-1", "finished on worker-1: ok")
