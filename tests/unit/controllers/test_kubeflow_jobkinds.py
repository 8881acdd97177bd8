"""The Kubeflow adapters (PyTorchJob, MPIJob): pod sets per replica type in upstream Kueue's
order and count, ``spec.runPolicy.suspend`` and ``managedBy``, the outcome from the
Succeeded/Failed conditions, and what goes to a worker and back."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from manager.api import constants as C
from manager.cli import jobfiles
from manager.controllers.jobkinds import registry
from manager.controllers.jobkinds.base import PodSetPlacement
from manager.controllers.jobkinds.kubeflow import KubeflowJobKind
from manager.controllers.jobkinds.mpijob import MPIJOB
from manager.controllers.jobkinds.pytorchjob import PYTORCHJOB
from manager.federation.webhooks.webhook import review_job

Obj = dict[str, Any]


def template(gpus: int = 0) -> Obj:
    requests = {"cpu": "1", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    return {
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}]}
    }


def kubeflow_job(kind: KubeflowJobKind, replicas: dict[str, int | None], **run_policy: Any) -> Obj:
    specs: Obj = {}
    for replica_type, count in replicas.items():
        spec: Obj = {"template": template(gpus=0 if replica_type == "Launcher" else 1)}
        if count is not None:
            spec["replicas"] = count
        specs[replica_type] = spec
    return {
        "apiVersion": kind.resource.api_version,
        "kind": kind.resource.kind,
        "metadata": {"name": "train", "namespace": "ns", "uid": "0123456789"},
        "spec": {kind.replica_specs_field: specs, "runPolicy": dict(run_policy)},
    }


@pytest.mark.parametrize(
    ("kind", "replicas", "expected"),
    [
        (PYTORCHJOB, {"Worker": 3, "Master": 1}, [("master", 1), ("worker", 3)]),
        (PYTORCHJOB, {"Master": None}, [("master", 1)]),
        (PYTORCHJOB, {"Worker": 0}, [("worker", 0)]),
        (MPIJOB, {"Worker": 2, "Launcher": 1}, [("launcher", 1), ("worker", 2)]),
        (MPIJOB, {"Launcher": None, "Worker": None}, [("launcher", 1), ("worker", 1)]),
    ],
)
def test_pod_sets_per_replica_type_in_upstreams_order(
    kind: KubeflowJobKind, replicas: dict[str, int | None], expected: list[tuple[str, int]]
) -> None:
    job = kubeflow_job(kind, replicas)
    assert [(ps.name, ps.count) for ps in kind.pod_sets(job)] == expected
    # The templates are the job's own (admission writes into them in place on a copy).
    first = next(iter(sorted(replicas, key=kind.replica_types.index)))
    assert (
        kind.pod_sets(job)[0].template is job["spec"][kind.replica_specs_field][first]["template"]
    )


def test_an_unknown_replica_type_is_no_pod_set() -> None:
    job = kubeflow_job(PYTORCHJOB, {"Master": 1, "Chief": 2})
    assert [ps.name for ps in PYTORCHJOB.pod_sets(job)] == ["master"]


def test_registered_under_upstreams_integration_names_with_upstreams_workload_names() -> None:
    assert registry.KINDS["kubeflow.org/pytorchjob"] is PYTORCHJOB
    assert registry.KINDS["kubeflow.org/mpijob"] is MPIJOB
    assert registry.by_group_version_kind("kubeflow.org", "v1", "PyTorchJob") is PYTORCHJOB
    assert registry.by_group_version_kind("kubeflow.org", "v2beta1", "MPIJob") is MPIJOB
    assert registry.by_group_version_kind("kubeflow.org", "v1", "MPIJob") is None
    assert PYTORCHJOB.workload_name("train", "0123456789").startswith("pytorchjob-train-")
    assert MPIJOB.workload_name("train", "0123456789").startswith("mpijob-train-")


@pytest.mark.parametrize("kind", [PYTORCHJOB, MPIJOB])
def test_suspend_and_managed_by_are_in_run_policy(kind: KubeflowJobKind) -> None:
    job = kubeflow_job(kind, {kind.replica_types[0]: 1}, suspend=True, managedBy="x/y")
    assert kind.is_suspended(job)
    assert kind.managed_by(job) == "x/y"
    assert not kind.is_suspended(kubeflow_job(kind, {kind.replica_types[0]: 1}))
    assert kind.suspend_fields(False) == {"spec": {"runPolicy": {"suspend": False}}}
    assert kind.managed_by_name() == "spec.runPolicy.managedBy"


@pytest.mark.parametrize("kind", [PYTORCHJOB, MPIJOB])
def test_a_workers_copy_is_suspended_without_managed_by_keeping_its_run_policy(
    kind: KubeflowJobKind,
) -> None:
    job = kubeflow_job(
        kind,
        {kind.replica_types[0]: 1},
        suspend=True,
        managedBy=C.MULTIKUEUE_MANAGED_BY,
        backoffLimit=3,
    )
    before = copy.deepcopy(job)
    spec = kind.spec_for_worker(job)
    assert spec["runPolicy"] == {"suspend": True, "backoffLimit": 3}
    assert job == before, "the manager's object is left as it is"


@pytest.mark.parametrize("kind", [PYTORCHJOB, MPIJOB])
def test_run_patch_places_every_replica_type_and_resumes_it(kind: KubeflowJobKind) -> None:
    job = kubeflow_job(kind, dict.fromkeys(kind.replica_types, 2), suspend=True)
    placements = {
        ps.name: PodSetPlacement({"gpu.model": "h100"}, [{"key": "k", "operator": "Exists"}])
        for ps in kind.pod_sets(job)
    }
    [patch] = kind.run_patches(job, placements)
    assert patch["spec"]["runPolicy"] == {"suspend": False}
    for replica_type in kind.replica_types:
        spec = patch["spec"][kind.replica_specs_field][replica_type]["template"]["spec"]
        assert spec == {
            "nodeSelector": {"gpu.model": "h100"},
            "tolerations": [{"key": "k", "operator": "Exists"}],
        }
    originals = kind.placements_of(job)
    ran = copy.deepcopy(job)
    for replica_type in kind.replica_types:
        tmpl = ran["spec"][kind.replica_specs_field][replica_type]["template"]["spec"]
        tmpl["nodeSelector"] = {"gpu.model": "h100"}
    restore = kind.restore_patch(ran, originals)
    assert restore is not None
    for replica_type in kind.replica_types:
        spec = restore["spec"][kind.replica_specs_field][replica_type]["template"]["spec"]
        assert spec == {"nodeSelector": None}


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([], None),
        ([{"type": "Running", "status": "True"}], None),
        ([{"type": "Succeeded", "status": "False"}], None),
        (
            [
                {"type": "Running", "status": "False"},
                {"type": "Succeeded", "status": "True", "message": "done"},
            ],
            (True, "done"),
        ),
        ([{"type": "Failed", "status": "True", "message": "boom"}], (False, "boom")),
        ([{"type": "Failed", "status": "True"}], (False, "{kind} failed")),
    ],
)
@pytest.mark.parametrize("kind", [PYTORCHJOB, MPIJOB])
def test_outcome_by_succeeded_or_failed_condition(
    kind: KubeflowJobKind, conditions: list[Obj], expected: tuple[bool, str] | None
) -> None:
    job = kubeflow_job(kind, {kind.replica_types[0]: 1})
    job["status"] = {"conditions": conditions}
    found = kind.outcome(job)
    if expected is None:
        assert found is None
    else:
        assert found is not None
        assert (found.succeeded, found.message) == (
            expected[0],
            expected[1].format(kind=kind.resource.kind),
        )


@pytest.mark.parametrize("kind", [PYTORCHJOB, MPIJOB])
def test_active_while_a_replica_type_counts_active_pods(kind: KubeflowJobKind) -> None:
    job = kubeflow_job(kind, {kind.replica_types[0]: 1})
    assert not kind.is_active(job)
    job["status"] = {"replicaStatuses": {"Worker": {"active": 2}, kind.replica_types[0]: {}}}
    assert kind.is_active(job)
    job["status"]["replicaStatuses"]["Worker"] = {"succeeded": 2}
    assert not kind.is_active(job)


def test_status_for_the_manager_writes_out_the_counts_the_operator_omits() -> None:
    remote: Obj = {
        "status": {
            "conditions": [{"type": "Succeeded", "status": "True"}],
            "replicaStatuses": {"Master": {"succeeded": 1}, "Worker": {"active": 1}},
        }
    }
    status = PYTORCHJOB.status_for_manager(remote)
    assert status["replicaStatuses"] == {
        "Master": {"active": 0, "succeeded": 1, "failed": 0},
        "Worker": {"active": 1, "succeeded": 0, "failed": 0},
    }
    assert remote["status"]["replicaStatuses"]["Master"] == {"succeeded": 1}


def test_pods_are_selected_by_job_name_and_operator() -> None:
    assert PYTORCHJOB.pod_selector("t") == (
        "training.kubeflow.org/job-name=t,training.kubeflow.org/operator-name=pytorchjob-controller"
    )
    assert MPIJOB.pod_selector("t") == (
        "training.kubeflow.org/job-name=t,training.kubeflow.org/operator-name=mpi-operator"
    )


def request_for(job: Obj) -> Obj:
    group, _, version = job["apiVersion"].rpartition("/")
    job["metadata"]["labels"] = {C.QUEUE_NAME_LABEL: "lq"}
    return {
        "uid": "u",
        "kind": {"group": group, "version": version, "kind": job["kind"]},
        "operation": "CREATE",
        "namespace": "ns",
        "object": job,
    }


@pytest.mark.parametrize("kind", [PYTORCHJOB, MPIJOB])
def test_the_webhook_suspends_it_and_sets_multikueue_in_run_policy(kind: KubeflowJobKind) -> None:
    job = kubeflow_job(kind, {kind.replica_types[0]: 1})
    del job["spec"]["runPolicy"]
    verdict = review_job(request_for(job), lambda ns, q: True)
    assert verdict.allowed
    assert verdict.patch == [
        {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}},
        {"op": "add", "path": "/spec/runPolicy/managedBy", "value": C.MULTIKUEUE_MANAGED_BY},
    ]
    job = kubeflow_job(kind, {kind.replica_types[0]: 1}, managedBy=kind.default_managed_by)
    verdict = review_job(request_for(job), lambda ns, q: True)
    assert verdict.patch == [
        {"op": "add", "path": "/spec/runPolicy/suspend", "value": True},
        {"op": "add", "path": "/spec/runPolicy/managedBy", "value": C.MULTIKUEUE_MANAGED_BY},
    ]


def test_the_webhook_refuses_multikueue_in_run_policy_in_a_local_queue() -> None:
    job = kubeflow_job(PYTORCHJOB, {"Master": 1}, managedBy=C.MULTIKUEUE_MANAGED_BY)
    verdict = review_job(request_for(job), lambda ns, q: False)
    assert not verdict.allowed
    assert verdict.message.startswith("spec.runPolicy.managedBy is 'kueue.x-k8s.io/multikueue'")


def test_kfed_submit_prepares_it_suspended_in_run_policy() -> None:
    job = kubeflow_job(MPIJOB, {"Launcher": 1, "Worker": 2}, suspend=False)
    prepared, warnings = jobfiles.prepare(job, queue="lq")
    assert prepared["spec"]["runPolicy"]["suspend"] is True
    assert "suspend" not in prepared["spec"]
    assert warnings and "spec.runPolicy.suspend: false" in warnings[0]
    job = kubeflow_job(PYTORCHJOB, {"Master": 1})
    del job["spec"]["runPolicy"]
    prepared, warnings = jobfiles.prepare(job, queue="lq")
    assert prepared["spec"]["runPolicy"] == {"suspend": True} and not warnings
