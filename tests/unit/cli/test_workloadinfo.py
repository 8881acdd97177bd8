"""`kfed workloads` rows and `kfed explain` answers, from manager Workload objects."""

from __future__ import annotations

import json
from typing import Any

from manager.api import constants as C
from manager.cli import workloadinfo as wi
from manager.cli.tables import render_text
from manager.cli.workloads import render_explanation
from manager.federation.engine.workloadview import state_of
from manager.federation.settings import PLACEMENT_ANNOTATION, RAN_ON_ANNOTATION
from manager.observability.workloadrows import workload_row
from tests.unit.cli.builders import admission, condition, reserved_conditions, workload

NOW = 1704067200.0 + 300  # five minutes after the builders' creationTimestamp

PENDING = workload(
    "pending",
    conditions=[
        condition(
            C.QUOTA_RESERVED,
            False,
            "Pending",
            "couldn't assign flavors to pod set main: insufficient unused quota for "
            "nvidia.com/gpu in flavor h100, 8 more needed",
        )
    ],
)
RESERVED = workload(
    "reserved",
    conditions=reserved_conditions(admitted=False),
    admission=admission("cq", "h100", 8),
    checks=[{"name": "multikueue", "state": "Pending", "message": "dispatched to worker-2: fits"}],
    nominated=["worker-2"],
)
DECISION = {
    "cluster": "worker-2",
    "reason": "fits in worker-cq (8 nvidia.com/gpu free)",
    "rule": "growing workers last, then best fit, then fewest waiting, then config order",
    "candidates": [
        "worker-1: ClusterQueue worker-cq has no flavor matching h100",
        "worker-2: fits in worker-cq (8 nvidia.com/gpu free)",
    ],
    "at": 1704067260.0,
}
PLACED = workload(
    "placed",
    conditions=reserved_conditions(admitted=True),
    admission=admission("cq", "h100", 8),
    checks=[
        {
            "name": "multikueue",
            "state": "Ready",
            "message": 'The workload was admitted on "worker-2"',
        }
    ],
    cluster="worker-2",
    annotations={PLACEMENT_ANNOTATION: json.dumps(DECISION), C.JOB_NAME_ANNOTATION: "heavy-job"},
)
FINISHED = workload(
    "finished",
    conditions=[
        *reserved_conditions(admitted=True),
        condition(C.FINISHED, True, "Succeeded", "Job finished successfully"),
    ],
    admission=admission("cq", "rtx-a1000"),
    cluster="worker-1",
)
EVICTED = workload(
    "evicted",
    conditions=[
        condition(C.QUOTA_RESERVED, False, "Pending", "evicted"),
        condition(C.EVICTED, True, "AdmissionCheck", "worker-1 was drained"),
    ],
)


def test_states() -> None:
    assert [state_of(w) for w in (PENDING, RESERVED, PLACED, FINISHED, EVICTED)] == [
        "Pending",
        "Reserved",
        "Admitted",
        "Finished",
        "Evicted",
    ]


def test_explain_and_the_dashboard_say_the_same_sentence() -> None:
    for wl in (PENDING, RESERVED, PLACED, FINISHED, EVICTED):
        assert wi.explain(wl).summary == workload_row(wl).reason


def test_rows_show_queue_flavor_cluster_state_and_age() -> None:
    rows = {r.name: r for r in wi.workload_rows([PLACED, PENDING, RESERVED], now=NOW)}
    assert rows["placed"] == wi.WorkloadRow(
        "ml-jobs", "placed", "", "gpu-lq", "h100", "worker-2", "Admitted", "5m"
    )
    assert rows["reserved"].cluster == "worker-2 (nominated)"
    assert rows["pending"].flavors == "" and rows["pending"].cluster == ""
    assert [r.name for r in wi.workload_rows([PLACED, PENDING, RESERVED], now=NOW)] == [
        "pending",
        "placed",
        "reserved",
    ]


def owned_by(wl: dict[str, Any], api_version: str, kind: str, name: str) -> dict[str, Any]:
    owned: dict[str, Any] = json.loads(json.dumps(wl))
    owned["metadata"]["ownerReferences"] = [
        {"apiVersion": api_version, "kind": kind, "name": name, "uid": "u1", "controller": True}
    ]
    return owned


def test_rows_and_explanations_name_the_kind_of_job() -> None:
    """JobSets and RayClusters are shown as Jobs are, with their kind; an owner of a kind
    kfed does not queue is still named."""
    jobset = owned_by(PLACED, "jobset.x-k8s.io/v1alpha2", "JobSet", "train")
    ray = owned_by(PENDING, "ray.io/v1", "RayCluster", "ray")
    odd = owned_by(RESERVED, "v1", "ConfigMap", "odd")
    rows = {r.name: r.kind for r in wi.workload_rows([jobset, ray, odd], now=NOW)}
    assert rows == {"placed": "JobSet", "pending": "RayCluster", "reserved": "ConfigMap"}
    jobset["metadata"]["annotations"] = {}
    e = wi.explain(jobset)
    assert (e.kind, e.job) == ("JobSet", "train")
    assert "(JobSet train)" in render_text(render_explanation(e))


def test_a_pending_workload_is_explained_by_its_queue_message() -> None:
    e = wi.explain(PENDING)
    assert e.state == "Pending"
    assert e.summary.startswith("pending in its queue: couldn't assign flavors")
    assert "8 more needed" in e.summary
    assert e.decision is None


def test_a_reserved_workload_is_explained_by_its_admission_check() -> None:
    e = wi.explain(RESERVED)
    assert e.summary == (
        "quota reserved; admission check multikueue is Pending: dispatched to worker-2: fits"
    )
    assert e.cluster_queue == "cq"


def test_a_placed_workload_is_explained_by_the_recorded_decision() -> None:
    e = wi.explain(PLACED)
    assert e.summary == "runs on worker-2: fits in worker-cq (8 nvidia.com/gpu free)"
    assert e.job == "heavy-job"
    assert e.decision is not None
    assert e.decision.at == "2024-01-01T00:01:00Z"
    assert len(e.decision.candidates) == 2
    text = render_text(render_explanation(e))
    assert "Workload ml-jobs/placed (Job heavy-job)" in text
    assert "-> worker-2: fits in worker-cq" in text
    assert "   worker-1: ClusterQueue worker-cq has no flavor matching h100" in text
    assert "main: cpu=h100 (2), nvidia.com/gpu=h100 (8)" in text


def test_finished_and_evicted_workloads_say_so() -> None:
    assert wi.explain(FINISHED).summary == (
        "finished on worker-1 (Succeeded): Job finished successfully"
    )
    assert wi.explain(EVICTED).summary.startswith("evicted (AdmissionCheck): worker-1 was drained")


def test_an_unreadable_decision_is_a_note_not_a_crash() -> None:
    broken = workload("broken", annotations={PLACEMENT_ANNOTATION: "{not json"})
    e = wi.explain(broken)
    assert e.decision is None
    assert any(PLACEMENT_ANNOTATION in note for note in e.notes)


def test_a_decision_for_another_cluster_is_pointed_out() -> None:
    moved = json.loads(json.dumps(PLACED))
    moved["status"]["clusterName"] = "worker-3"
    e = wi.explain(moved)
    assert e.summary == "runs on worker-3"
    assert any("chose worker-2, but it runs on worker-3" in n for n in e.notes)


def test_a_finished_workload_names_its_worker_and_how_its_job_ended() -> None:
    """What `kfed explain` reads outlives the objects on the worker: the Workload's
    clusterName and the manager Job's status, copied from the worker's Job."""
    job = {
        "metadata": {"name": "light-job", "namespace": "ml-jobs"},
        "status": {
            "succeeded": 1,
            "completionTime": "2024-01-01T00:03:00Z",
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True"},
                {"type": "Complete", "status": "True"},
            ],
        },
    }
    e = wi.explain(FINISHED, job)
    assert e.cluster == "worker-1"
    assert e.result == "Complete at 2024-01-01T00:03:00Z (succeeded: 1)"
    text = render_text(render_explanation(e))
    assert "Cluster:     worker-1" in text
    assert "Result:      Complete at 2024-01-01T00:03:00Z (succeeded: 1)" in text
    assert wi.explain(PLACED, job).result == "", "only a finished workload has a result"


def test_a_run_that_ended_after_a_requeue_is_named_by_the_recorded_worker() -> None:
    """Finished on a worker the manager could not see after it was requeued: clusterName
    is empty, the dispatcher recorded where it ran (kfed.io/ran-on)."""
    requeued = json.loads(json.dumps(FINISHED))
    del requeued["status"]["clusterName"]
    requeued["metadata"]["annotations"][RAN_ON_ANNOTATION] = "worker-3"
    failed = {
        "status": {
            "failed": 2,
            "conditions": [{"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"}],
        }
    }
    e = wi.explain(requeued, failed)
    assert e.cluster == "worker-3"
    assert e.result == "Failed (failed: 2): BackoffLimitExceeded"
    assert e.summary == workload_row(requeued).reason, "the same sentence as the dashboard"
