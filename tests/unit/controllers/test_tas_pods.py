"""TAS on the job and pod side: what a template's annotations ask, what an admitted pod set's
template gets (the gate, the label, the Workload's name) and gives back on eviction, and which
gated pod the ungater sends to which domain."""

from __future__ import annotations

from typing import Any

from manager import core
from manager.controllers import jobplacement, jobworkload, taspods
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.topologyungater import is_gated, plan

HOST = "kubernetes.io/hostname"
RACK = "example.com/rack"


def template(annotations: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"annotations": annotations}, "spec": {"containers": []}}


def test_the_annotations_upstream_reads_become_the_topology_request() -> None:
    assert taspods.topology_request(template({taspods.REQUIRED_ANNOTATION: RACK})) == {
        "required": RACK
    }
    assert taspods.topology_request(
        template(
            {
                taspods.PREFERRED_ANNOTATION: RACK,
                taspods.SLICE_REQUIRED_ANNOTATION: HOST,
                taspods.SLICE_SIZE_ANNOTATION: "4",
            }
        )
    ) == {"preferred": RACK, "podSetSliceRequiredTopology": HOST, "podSetSliceSize": 4}
    assert taspods.topology_request(template({taspods.UNCONSTRAINED_ANNOTATION: "true"})) == {
        "unconstrained": True
    }
    assert taspods.topology_request(template({})) is None


def test_a_slice_size_that_is_not_a_number_is_left_out_for_the_core_to_refuse() -> None:
    request = taspods.topology_request(
        template({taspods.SLICE_REQUIRED_ANNOTATION: HOST, taspods.SLICE_SIZE_ANNOTATION: "four"})
    )
    assert request == {"podSetSliceRequiredTopology": HOST}


def _job() -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ns", "uid": "u-1", "labels": {}},
        "spec": {
            "suspend": True,
            "parallelism": 4,
            "completions": 4,
            "template": {
                "metadata": {
                    "labels": {"app": "train"},
                    "annotations": {taspods.REQUIRED_ANNOTATION: RACK},
                },
                "spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"},
            },
        },
    }


def test_an_admitted_pod_set_s_pods_are_gated_labelled_and_given_back_on_eviction() -> None:
    job = _job()
    wl = jobworkload.workload_for_job(job, lambda _: None)
    assert wl["spec"]["podSets"][0]["topologyRequest"] == {"required": RACK}
    wl["status"] = {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {
                    "name": "main",
                    "flavors": {},
                    "count": 4,
                    "topologyAssignment": {
                        "levels": [HOST],
                        "slices": [
                            {
                                "domainCount": 1,
                                "podCounts": {"universal": 4},
                                "valuesPerLevel": [{"universal": "n1"}],
                            }
                        ],
                    },
                }
            ],
        }
    }
    placements = jobplacement.submitted(wl)
    started = BATCH_JOB.with_templates(
        job,
        {
            "main": jobplacement.placed_by_topology(
                placements["main"], placements["main"], "main", wl
            )
        },
    )
    pod_template = started["spec"]["template"]
    assert pod_template["spec"]["schedulingGates"] == [{"name": taspods.TOPOLOGY_GATE}]
    assert pod_template["metadata"]["labels"] == {
        "app": "train",
        taspods.TAS_LABEL: "true",
        taspods.PODSET_LABEL: "main",
    }
    assert (
        pod_template["metadata"]["annotations"][taspods.WORKLOAD_ANNOTATION]
        == wl["metadata"]["name"]
    )
    restore = BATCH_JOB.restore_patch(started, jobplacement.submitted(wl))
    assert restore is not None
    restored = BATCH_JOB.with_templates(started, jobplacement.submitted(wl))
    assert restored["spec"]["template"] == job["spec"]["template"]


def test_a_worker_s_copy_of_a_job_keeps_its_own_controller_uid_when_placed_by_topology() -> None:
    """Issue #44 item 1: the manager's Workload carries the manager Job's generated labels in
    its template; the worker's copy of the Job has the worker's. Placing a topology pod set
    writes the template's labels exactly, and must keep the worker Job's own (the API server
    refuses a template whose controller-uid is not the Job's), and give them back so."""
    manager_job = _job()
    manager_uid = {
        "batch.kubernetes.io/controller-uid": "manager-uid",
        "controller-uid": "manager-uid",
        "batch.kubernetes.io/job-name": "train",
        "job-name": "train",
    }
    manager_job["spec"]["template"]["metadata"]["labels"].update(manager_uid)
    wl = jobworkload.workload_for_job(manager_job, lambda _: None)
    assert wl["spec"]["podSets"][0]["template"]["metadata"]["labels"]["controller-uid"] == (
        "manager-uid"
    )
    worker_job = _job()
    worker_uid = {k: ("worker-uid" if "uid" in k else v) for k, v in manager_uid.items()}
    worker_job["spec"]["template"]["metadata"]["labels"].update(worker_uid)
    submitted = jobplacement.submitted(wl)["main"]
    placed = jobplacement.placed_by_topology(submitted, submitted, "main", wl)
    started = BATCH_JOB.with_templates(worker_job, {"main": placed})
    labels = started["spec"]["template"]["metadata"]["labels"]
    assert {k: labels[k] for k in worker_uid} == worker_uid
    assert labels[taspods.TAS_LABEL] == "true"
    restored = BATCH_JOB.with_templates(started, jobplacement.submitted(wl))
    assert restored["spec"]["template"] == worker_job["spec"]["template"]


def pod(
    name: str, *, gated: bool, node: str | None = None, phase: str = "Pending"
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if gated:
        spec["schedulingGates"] = [{"name": taspods.TOPOLOGY_GATE}]
    if node is not None:
        spec["nodeSelector"] = {HOST: node}
    return {"metadata": {"name": name}, "spec": spec, "status": {"phase": phase}}


ASSIGNMENT = core.TopologyAssignment(
    (HOST,), (core.DomainAssignment(("n1",), 2), core.DomainAssignment(("n2",), 2))
)


def test_gated_pods_fill_the_domains_in_order() -> None:
    pods = [pod(f"p{i}", gated=True) for i in range(4)]
    moves = plan(ASSIGNMENT, pods)
    assert [(p["metadata"]["name"], s[HOST]) for p, s in moves] == [
        ("p0", "n1"),
        ("p1", "n1"),
        ("p2", "n2"),
        ("p3", "n2"),
    ]


def test_a_replacement_pod_goes_where_the_pod_it_replaces_ran() -> None:
    pods = [
        pod("p0", gated=False, node="n1"),
        pod("p1", gated=False, node="n1", phase="Failed"),
        pod("p2", gated=False, node="n2"),
        pod("p3", gated=False, node="n2"),
        pod("p4", gated=True),
    ]
    assert [(p["metadata"]["name"], s[HOST]) for p, s in plan(ASSIGNMENT, pods)] == [("p4", "n1")]


def test_no_domain_gets_more_pods_than_its_count() -> None:
    pods = [pod(f"p{i}", gated=False, node="n1") for i in range(2)] + [
        pod(f"q{i}", gated=True) for i in range(5)
    ]
    moves = plan(ASSIGNMENT, pods)
    assert [s[HOST] for _, s in moves] == ["n2", "n2"]
    assert all(is_gated(p) for p, _ in moves)
