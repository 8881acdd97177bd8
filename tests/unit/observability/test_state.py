"""The dashboard's rows, derived from hand-made objects and a real admission core: why each
workload waits or why it runs where it runs, queue counts and quotas, the JSON document."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from manager.api import constants as C
from manager.controllers.state import ClusterState
from manager.core import AdmissionCore, ClusterQueueName, StopPolicy
from manager.federation.decisions import capacity
from manager.federation.settings import PLACEMENT_ANNOTATION
from manager.kube.api import KubeApi
from manager.observability.clusterrows import ClusterRow
from manager.observability.queuerows import QueueRow, Quota, queue_row
from manager.observability.state import Snapshot, to_json
from manager.observability.units import human_age
from manager.observability.workloadrows import WorkloadList, workload_row, workload_rows
from tests import builders as b
from tests.unit.core.builders import (
    key,
    make_cluster_queue,
    make_flavor,
    make_flavor_quotas,
    make_local_queue,
    make_workload,
    run_until_quiet,
)

CQ = ClusterQueueName("cq")
CREATED = "2025-01-01T00:00:00Z"
CREATED_AT = 1735689600.0


def cluster_queue_obj(**meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "cq", **meta},
        "spec": {
            "cohortName": "co",
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "a100",
                            "resources": [
                                {"name": "nvidia.com/gpu", "nominalQuota": 2, "borrowingLimit": 1}
                            ],
                        }
                    ],
                }
            ],
        },
    }


def busy_core() -> AdmissionCore:
    """2 GPUs: one workload admitted, one too big (parked), one just queued."""
    core = AdmissionCore()
    core.upsert_flavor(make_flavor("a100"))
    core.upsert_cluster_queue(
        make_cluster_queue("cq")
        .resource_group(make_flavor_quotas("a100").resource("nvidia.com/gpu", 2).obj())
        .obj()
    )
    core.upsert_local_queue(make_local_queue("lq", "default", "cq"))
    core.add_workload(make_workload("running").request("nvidia.com/gpu", 1).obj())
    core.add_workload(make_workload("big").request("nvidia.com/gpu", 3).created(1).obj())
    run_until_quiet(core, now=10)
    core.set_admitted(key("running"))
    core.add_workload(make_workload("fresh").request("nvidia.com/gpu", 1).created(2).obj())
    return core


def test_queue_row_counts_pending_active_and_inadmissible_and_reads_quotas() -> None:
    core = busy_core()
    row = queue_row(
        cluster_queue_obj(), core.cluster_queue_status(CQ), pending=core.pending_counts(CQ)
    )
    assert (row.name, row.cohort, row.status) == ("cq", "co", "active")
    assert (row.pending_active, row.pending_inadmissible) == (1, 1)
    assert (row.reserving, row.admitted) == (1, 1)
    assert row.quotas == (Quota("a100", "nvidia.com/gpu", 2, 1, 1, borrowing_limit=1),)
    sample = row.sample()
    assert sample.quotas[0].borrowing_limit == 1.0
    assert row.to_json()["quotas"][0] == {
        "flavor": "a100",
        "resource": "nvidia.com/gpu",
        "nominal": "2",
        "reserved": "1",
        "usage": "1",
        "borrowing_limit": "1",
    }


def test_queue_row_says_why_a_queue_cannot_admit() -> None:
    core = busy_core()
    view = core.cluster_queue_status(CQ)
    assert queue_row(cluster_queue_obj(deletionTimestamp=CREATED), view).status == "terminating"
    invalid = queue_row(cluster_queue_obj(), view, invalid="spec.resourceGroups: bad")
    assert (invalid.status, invalid.message) == ("pending", "spec.resourceGroups: bad")
    unknown = queue_row(cluster_queue_obj(), None)
    assert unknown.status == "pending" and unknown.quotas[0].reserved == 0
    inactive_obj = cluster_queue_obj()
    inactive_obj["status"] = {
        "conditions": [
            {"type": C.ACTIVE, "status": "False", "message": "missing AdmissionCheck(s): mk"}
        ]
    }
    assert queue_row(inactive_obj, view).message == "missing AdmissionCheck(s): mk"


def test_a_stopped_queue_counts_every_pending_workload_inadmissible() -> None:
    core = busy_core()
    core.upsert_cluster_queue(
        make_cluster_queue("cq")
        .resource_group(make_flavor_quotas("a100").resource("nvidia.com/gpu", 2).obj())
        .stop_policy(StopPolicy.HOLD)
        .obj()
    )
    assert core.pending_counts(CQ) == (0, 2)
    assert core.pending_counts(ClusterQueueName("missing")) == (0, 0)


def test_quantities_become_natural_units_for_prometheus() -> None:
    row = QueueRow("cq", "", "active", "", 0, 0, 0, 0, (Quota("a100", "cpu", 4000, 500, 0),))
    assert row.sample().quotas[0].nominal == 4.0
    assert row.to_json()["quotas"][0]["reserved"] == "500m"
    cluster = ClusterRow("w", True, "Active", "", "", True, {("a100", "memory"): 2**30})
    assert cluster.sample().free == {("a100", "memory"): float(2**30)}
    assert cluster.to_json()["free"] == [{"flavor": "a100", "resource": "memory", "free": "1Gi"}]


def workload(**status: Any) -> dict[str, Any]:
    return b.workload(
        "job-light-job-1a2b3",
        namespace="ml-jobs",
        queue="gpu-lq",
        pod_sets=[],
        labels={},
        annotations={},
        created=CREATED,
        active=True,
        status=status,
    )


def cond(kind: str, status: str = "True", reason: str = "", message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message}


ADMISSION = {
    "clusterQueue": "gpu-cq",
    "podSetAssignments": [
        {"name": "main", "flavors": {"cpu": "rtx-a1000", "nvidia.com/gpu": "rtx-a1000"}}
    ],
}


def test_a_pending_workload_shows_the_cores_live_reason() -> None:
    wl = workload(conditions=[cond(C.QUOTA_RESERVED, "False", "Pending", "old message")])
    row = workload_row(wl, pending_reason="insufficient unused quota for nvidia.com/gpu")
    assert (row.state, row.reason) == (
        "Pending",
        "pending in its queue: insufficient unused quota for nvidia.com/gpu",
    )
    assert workload_row(wl).reason == "pending in its queue: old message", (
        "without the core: the written condition"
    )
    wl["spec"]["active"] = False
    assert workload_row(wl).reason == "deactivated (spec.active is false)"


def test_a_reserved_workload_shows_its_waiting_admission_check() -> None:
    wl = workload(
        admission=ADMISSION,
        conditions=[cond(C.QUOTA_RESERVED)],
        admissionChecks=[
            {"name": "multikueue", "state": "Pending", "message": "no worker can admit it now"}
        ],
        nominatedClusterNames=["worker-1"],
    )
    row = workload_row(wl)
    assert row.state == "Reserved"
    assert row.reason == (
        "quota reserved; admission check multikueue is Pending: no worker can admit it now"
    )
    assert (row.cluster, row.cluster_queue, row.flavors) == (
        "worker-1 (nominated)",
        "gpu-cq",
        ("rtx-a1000",),
    )


def test_an_admitted_workload_says_why_it_went_there() -> None:
    decision = {
        "cluster": "worker-1",
        "reason": "fits in gpu-cq (1 nvidia.com/gpu free)",
        "rule": "growing workers last, then best fit, then fewest waiting, then config order",
        "candidates": ["worker-1: fits", "worker-2: no flavor matching rtx-a1000"],
        "at": CREATED_AT,
    }
    wl = workload(
        admission=ADMISSION,
        clusterName="worker-1",
        conditions=[cond(C.QUOTA_RESERVED), cond(C.ADMITTED)],
    )
    wl["metadata"]["annotations"][PLACEMENT_ANNOTATION] = json.dumps(decision)
    row = workload_row(wl)
    assert (row.state, row.cluster) == ("Admitted", "worker-1")
    assert row.reason == "runs on worker-1: fits in gpu-cq (1 nvidia.com/gpu free)"
    assert row.placement is not None and row.placement.at == CREATED
    assert row.to_json(CREATED_AT + 90)["placement"]["candidates"] == decision["candidates"]

    wl["metadata"]["annotations"][PLACEMENT_ANNOTATION] = "{not json"
    assert workload_row(wl).reason == "runs on worker-1", "an unreadable decision is left out"


def test_a_workload_shows_the_kind_of_its_job() -> None:
    """JobSets, TrainJobs and RayClusters are listed as Jobs are, with their kind."""
    wl = workload(admission=ADMISSION, conditions=[cond(C.QUOTA_RESERVED)])
    assert workload_row(wl).kind == ""
    wl["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": "train",
            "uid": "u",
            "controller": True,
        }
    ]
    row = workload_row(wl)
    assert row.kind == "JobSet" and row.to_json(CREATED_AT)["kind"] == "JobSet"


def test_finished_evicted_and_worker_side_workloads() -> None:
    finished = workload(conditions=[cond(C.FINISHED, reason="Succeeded", message="done")])
    assert workload_row(finished).reason == "finished (Succeeded): done"
    evicted = workload(
        admission=ADMISSION,
        conditions=[cond(C.QUOTA_RESERVED), cond(C.EVICTED, reason="Preempted", message="x")],
    )
    assert workload_row(evicted).state == "Evicted"
    copy_ = workload(admission=ADMISSION, conditions=[cond(C.QUOTA_RESERVED), cond(C.ADMITTED)])
    copy_["metadata"]["labels"][C.MULTIKUEUE_ORIGIN_LABEL] = "multikueue"
    assert workload_row(copy_, role="worker").reason == (
        "admitted here; placed by the manager of origin multikueue"
    )
    assert workload_row(copy_).reason == (
        "admitted on the manager (its queue has no MultiKueue check)"
    )


def test_free_quota_of_a_worker_is_nominal_minus_reserved_minus_in_flight() -> None:
    cq = {
        "spec": {
            "resourceGroups": [
                {
                    "flavors": [
                        {
                            "name": "h100",
                            "resources": [
                                {"name": "nvidia.com/gpu", "nominalQuota": 4},
                                {"name": "cpu", "nominalQuota": "64"},
                            ],
                        }
                    ]
                }
            ]
        },
        "status": {
            "flavorsReservation": [
                {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "3"}]}
            ]
        },
    }
    view = capacity.WorkerView(
        "worker-2", {}, {"gpu-cq": cq}, {}, in_flight={("gpu-cq", "h100", "nvidia.com/gpu"): 2}
    )
    assert capacity.free_quota(view) == {("h100", "nvidia.com/gpu"): 0, ("h100", "cpu"): 64000}


def test_the_json_document() -> None:
    rows = [workload_row(workload())]
    snapshot = Snapshot(
        role="manager",
        identity="replica-a",
        ready=True,
        ready_reason="leading: informers synced",
        is_leader=True,
        leader="replica-a",
        clusters=[
            ClusterRow("worker-1", False, "ClientConnectionFailed", "lost", "drain", False, None)
        ],
        workloads=WorkloadList(rows, total=3, by_state={"Pending": 1, "Finished": 2}),
    )
    doc = to_json(snapshot, now=CREATED_AT + 150)
    assert doc["generated_at"] == "2025-01-01T00:02:30Z"
    assert doc["clusters"][0]["free"] is None
    assert doc["workloads"][0]["age"] == "2m"
    assert (doc["workloads_total"], doc["workloads_by_state"]) == (3, {"Pending": 1, "Finished": 2})
    json.dumps(doc)  # serialisable as it is


@pytest.mark.parametrize(
    ("seconds", "text"), [(5, "5s"), (119, "119s"), (600, "10m"), (7500, "2h5m"), (3 * 86400, "3d")]
)
def test_human_age(seconds: float, text: str) -> None:
    assert human_age(seconds) == text


def test_workload_rows_show_unfinished_first_and_count_every_one() -> None:
    state = ClusterState(cast(KubeApi, None))
    for name, conditions in (
        ("a-done", [cond(C.FINISHED, reason="Succeeded")]),
        ("b-waiting", []),
        ("c-waiting", []),
    ):
        wl = workload()
        wl["metadata"]["name"] = name
        wl["status"] = {"conditions": conditions}
        state.workloads.cache[f"ml-jobs/{name}"] = wl
    listed = workload_rows(state, role="manager", limit=2)
    assert [r.name for r in listed.rows] == ["b-waiting", "c-waiting"]
    assert (listed.total, listed.by_state) == (3, {"Finished": 1, "Pending": 2})


def test_a_quota_the_apiserver_should_have_refused_counts_as_zero() -> None:
    obj = cluster_queue_obj()
    obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "lots"
    assert queue_row(obj, None).quotas[0].nominal == 0


def test_pending_workloads_show_their_place_in_line() -> None:
    state = ClusterState(cast(KubeApi, None))
    state.core.upsert_flavor(make_flavor("rtx-a1000"))
    state.core.upsert_cluster_queue(
        make_cluster_queue("gpu-cq")
        .resource_group(make_flavor_quotas("rtx-a1000").resource("nvidia.com/gpu", 0).obj())
        .obj()
    )
    state.core.upsert_local_queue(make_local_queue("gpu-lq", "ml-jobs", "gpu-cq"))
    state.local_queues.cache["ml-jobs/gpu-lq"] = {
        "metadata": {"name": "gpu-lq", "namespace": "ml-jobs"},
        "spec": {"clusterQueue": "gpu-cq"},
    }
    state.cluster_queues.cache["gpu-cq"] = {"metadata": {"name": "gpu-cq"}, "spec": {}}
    for name, priority, at in (("low", 0, 1.0), ("high", 10, 2.0), ("later", 0, 3.0)):
        state.core.add_workload(
            make_workload(name, "ml-jobs")
            .queue("gpu-lq")
            .priority(priority)
            .created(at)
            .request("nvidia.com/gpu", 1)
            .obj()
        )
        wl = workload()
        wl["metadata"]["name"] = name
        wl["spec"]["priority"] = priority
        state.workloads.cache[f"ml-jobs/{name}"] = wl
    rows = {r.name: r for r in workload_rows(state, role="manager").rows}
    assert {n: (r.position_in_cluster_queue, r.in_line) for n, r in rows.items()} == {
        "high": (0, "in line: 1st in gpu-cq, 1st in gpu-lq"),
        "low": (1, "in line: 2nd in gpu-cq, 2nd in gpu-lq"),
        "later": (2, "in line: 3rd in gpu-cq, 3rd in gpu-lq"),
    }
    assert rows["high"].to_json(now=0)["position_in_local_queue"] == 0
