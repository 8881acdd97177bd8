"""The copies the manager creates on a worker: ours by origin, naming their Workload,
suspended, and run by the worker's own controller of the kind (``managedBy`` cleared)."""

from __future__ import annotations

from typing import Any

from manager.api import constants as C
from manager.controllers.jobkinds.jobset import JobSetKind
from manager.federation.engine.remoteobjects import remote_job

Obj = dict[str, Any]


def manager_job() -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "ml",
            "uid": "u1",
            "resourceVersion": "7",
            "labels": {C.QUEUE_NAME_LABEL: "q", "batch.kubernetes.io/job-name": "train"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "a"},
        },
        "spec": {
            "suspend": False,
            "managedBy": C.MULTIKUEUE_MANAGED_BY,
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}},
            "template": {
                "metadata": {"labels": {"controller-uid": "u1", "app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
        "status": {"active": 1},
    }


def test_a_jobs_copy_is_ours_names_its_workload_and_leaves_the_managers_bookkeeping() -> None:
    copy_ = remote_job(
        manager_job(), workload_name="job-train-u1", origin="mk", annotations={"trace": "t"}
    )
    meta, spec = copy_["metadata"], copy_["spec"]
    assert (copy_["apiVersion"], copy_["kind"]) == ("batch/v1", "Job")
    assert meta["labels"] == {
        C.QUEUE_NAME_LABEL: "q",
        C.MULTIKUEUE_ORIGIN_LABEL: "mk",
        C.PREBUILT_WORKLOAD_LABEL: "job-train-u1",
    }
    assert meta["annotations"] == {"team": "a", "trace": "t"}
    assert "uid" not in meta and "resourceVersion" not in meta and "status" not in copy_
    assert spec["suspend"] is True and "managedBy" not in spec and "selector" not in spec
    assert spec["template"]["metadata"]["labels"] == {"app": "x"}


def test_a_jobsets_copy_keeps_its_replicated_jobs_suspended_for_the_workers_controller() -> None:
    js: Obj = {
        "metadata": {"name": "js", "namespace": "ml", "labels": {C.QUEUE_NAME_LABEL: "q"}},
        "spec": {
            "managedBy": C.MULTIKUEUE_MANAGED_BY,
            "replicatedJobs": [{"name": "w", "replicas": 2, "template": {"spec": {}}}],
        },
    }
    copy_ = remote_job(js, workload_name="jobset-js-1", origin="mk", kind=JobSetKind())
    assert (copy_["apiVersion"], copy_["kind"]) == ("jobset.x-k8s.io/v1alpha2", "JobSet")
    assert copy_["spec"] == {
        "suspend": True,
        "replicatedJobs": [{"name": "w", "replicas": 2, "template": {"spec": {}}}],
    }
    assert js["spec"]["managedBy"] == C.MULTIKUEUE_MANAGED_BY  # the manager's is untouched
