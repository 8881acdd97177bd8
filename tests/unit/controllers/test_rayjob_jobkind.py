"""The RayJob adapter: upstream Kueue v0.19.2's pod sets (its RayCluster's, then the
submitter in K8sJobMode, KubeRay's default one where the RayJob has none; the submitter
container on the head in SidecarMode), its outcome from ``jobDeploymentStatus`` and
``jobStatus``, what runs it on a worker, and the RayJobs upstream's webhook refuses, in its
words (rayjob_controller_test.go, rayjob_webhook_test.go)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from manager.api import constants as C
from manager.controllers.jobkinds import registry
from manager.controllers.jobkinds.base import PodSetPlacement
from manager.controllers.jobkinds.raycluster import RAYCLUSTER
from manager.controllers.jobkinds.rayjob import RAYJOB, SUBMITTER_RESOURCES
from manager.federation.webhooks.webhook import review_job

Obj = dict[str, Any]


def container(name: str, image: str | None = None) -> Obj:
    return {"name": name, **({"image": image} if image else {})}


def rayjob(
    *groups: tuple[str, int | None, int | None], mode: str | None = "K8sJobMode", **spec: Any
) -> Obj:
    """A RayJob of a head and worker groups ``(name, replicas, numOfHosts)``."""
    workers = []
    for name, replicas, hosts in groups:
        group: Obj = {"groupName": name, "template": {"spec": {"containers": [container(name)]}}}
        if replicas is not None:
            group["replicas"] = replicas
        if hosts is not None:
            group["numOfHosts"] = hosts
        workers.append(group)
    body: Obj = {
        "shutdownAfterJobFinishes": True,
        "rayClusterSpec": {
            "headGroupSpec": {"template": {"spec": {"containers": [container("head", "ray:2")]}}},
            "workerGroupSpecs": workers,
        },
        **spec,
    }
    if mode is not None:
        body["submissionMode"] = mode
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "rj", "namespace": "ns", "uid": "0123456789"},
        "spec": body,
    }


def test_registered_under_upstreams_integration_name_with_upstreams_workload_names() -> None:
    assert registry.KINDS["ray.io/rayjob"] is RAYJOB
    assert registry.by_group_version_kind("ray.io", "v1", "RayJob") is RAYJOB
    assert RAYJOB.workload_name("rj", "0123456789").startswith("rayjob-rj-")
    assert RAYJOB.managed_by_name() == "spec.managedBy"
    assert RAYJOB.suspend_fields(True) == {"spec": {"suspend": True}}


def test_upstream_pod_sets_with_num_of_hosts_above_one() -> None:
    """Upstream's "with NumOfHosts > 1" (no submitter: not K8sJobMode)."""
    job = rayjob(("group1", None, 4), ("group2", 3, 4), mode="HTTPMode")
    assert [(p.name, p.count) for p in RAYJOB.pod_sets(job)] == [
        ("head", 1),
        ("group1", 4),
        ("group2", 12),
    ]


def test_upstream_pod_sets_with_default_job_submitter() -> None:
    """Upstream's "with default job submitter": KubeRay's submitter, the head's image."""
    job = rayjob(("group1", None, None), ("group2", 3, None))
    sets = RAYJOB.pod_sets(job)
    assert [(p.name, p.count) for p in sets] == [
        ("head", 1),
        ("group1", 1),
        ("group2", 3),
        ("submitter", 1),
    ]
    assert sets[-1].template == {
        "spec": {
            "containers": [
                {"name": "ray-job-submitter", "resources": SUBMITTER_RESOURCES, "image": "ray:2"}
            ],
            "restartPolicy": "Never",
        }
    }
    assert sets[0].template is job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]
    assert "submitterPodTemplate" not in job["spec"], "reading pod sets changes nothing"


def test_upstream_pod_sets_with_submitter_job_pod_template_override() -> None:
    submitter = {"spec": {"containers": [container("ray-job-submitter")]}}
    job = rayjob(("group1", None, None), submitterPodTemplate=submitter)
    sets = RAYJOB.pod_sets(job)
    assert sets[-1].name == "submitter"
    assert sets[-1].template is job["spec"]["submitterPodTemplate"]


@pytest.mark.parametrize("mode", ["HTTPMode", "InteractiveMode"])
def test_no_submitter_pod_set_outside_k8s_job_mode(mode: str) -> None:
    assert [p.name for p in RAYJOB.pod_sets(rayjob(("g", 1, None), mode=mode))] == ["head", "g"]


def test_an_unset_submission_mode_is_the_crds_default_k8s_job_mode() -> None:
    """A RayJob read from the API server always has one; a manifest may not."""
    names = [p.name for p in RAYJOB.pod_sets(rayjob(("g", 1, None), mode=None))]
    assert names == ["head", "g", "submitter"]


def test_upstream_sidecar_mode_accounts_for_the_injected_submitter_on_the_head() -> None:
    job = rayjob(("group1", None, None), mode="SidecarMode")
    [head, group1] = RAYJOB.workload_pod_sets(job)
    assert [c["name"] for c in head["template"]["spec"]["containers"]] == [
        "head",
        "ray-job-submitter",
    ]
    assert head["template"]["spec"]["containers"][1]["resources"] == SUBMITTER_RESOURCES
    assert group1["name"] == "group1"
    assert (
        len(job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"]) == 1
    )


def test_upstream_k8s_job_mode_with_no_submitter_template_persists_admission_constraints() -> None:
    """Upstream's "K8sJobMode with nil SubmitterPodTemplate persists admission constraints":
    running it writes KubeRay's default submitter template, placed, into the RayJob."""
    job = rayjob(("g", 2, None), suspend=True)
    placements = {
        ps.name: PodSetPlacement({"gpu.model": "h100"}, [{"key": "k", "operator": "Exists"}])
        for ps in RAYJOB.pod_sets(job)
    }
    [patch] = RAYJOB.run_patches(job, placements)
    assert patch["spec"]["suspend"] is False
    submitter = patch["spec"]["submitterPodTemplate"]["spec"]
    assert submitter["nodeSelector"] == {"gpu.model": "h100"}
    assert submitter["containers"][0]["name"] == "ray-job-submitter"
    cluster = patch["spec"]["rayClusterSpec"]
    assert cluster["headGroupSpec"]["template"]["spec"]["nodeSelector"] == {"gpu.model": "h100"}
    assert cluster["workerGroupSpecs"][0]["template"]["spec"]["tolerations"] == [
        {"key": "k", "operator": "Exists"}
    ]
    ran = copy.deepcopy(job)
    ran["spec"]["submitterPodTemplate"] = patch["spec"]["submitterPodTemplate"]
    restore = RAYJOB.restore_patch(ran, RAYJOB.placements_of(job))
    assert restore is not None
    assert restore["spec"]["submitterPodTemplate"]["spec"] == {
        "nodeSelector": None,
        "tolerations": None,
    }


@pytest.mark.parametrize(
    ("job_status", "deployment", "expected"),
    [
        ("RUNNING", "Running", None),
        ("SUCCEEDED", "Complete", True),
        ("FAILED", "Complete", False),
        ("FAILED", "Failed", False),
        ("RUNNING", "Failed", False),  # activeDeadlineSeconds exceeded
        ("SUCCEEDED", "Running", None),  # the Ray job ended, KubeRay not yet
        (None, "Suspended", None),
    ],
)
def test_upstream_rayjob_finished(
    job_status: str | None, deployment: str, expected: bool | None
) -> None:
    job = rayjob()
    job["status"] = {"jobDeploymentStatus": deployment, "message": "m"}
    if job_status:
        job["status"]["jobStatus"] = job_status
    found = RAYJOB.outcome(job)
    assert (found.succeeded if found else None) is expected
    if found is not None:
        assert found.message == "m"


def test_the_outcome_without_a_message_says_how_it_ended() -> None:
    job = rayjob()
    job["status"] = {"jobDeploymentStatus": "Failed"}
    found = RAYJOB.outcome(job)
    assert found is not None and found.message == "RayJob Failed"


@pytest.mark.parametrize(
    ("deployment", "active"),
    [(None, False), ("New", False), ("Suspended", False), ("Initializing", True),
     ("Running", True), ("Suspending", True), ("Complete", True)],
)  # fmt: skip
def test_upstream_active_unless_suspended_or_new(deployment: str | None, active: bool) -> None:
    job = rayjob()
    if deployment:
        job["status"] = {"jobDeploymentStatus": deployment}
    assert RAYJOB.is_active(job) is active


def test_a_workers_copy_is_suspended_without_managed_by() -> None:
    job = rayjob(("g", 1, None), suspend=True, managedBy=C.MULTIKUEUE_MANAGED_BY)
    spec = RAYJOB.spec_for_worker(job)
    assert spec["suspend"] is True and "managedBy" not in spec
    assert spec["shutdownAfterJobFinishes"] is True
    assert job["spec"]["managedBy"] == C.MULTIKUEUE_MANAGED_BY


def test_a_rayjob_on_an_existing_cluster_is_not_queued_and_its_raycluster_is_the_rayjobs() -> None:
    """Upstream's Skip: a clusterSelector without a rayClusterSpec runs on a RayCluster that
    exists; and the RayCluster KubeRay makes for a RayJob (its labels, queue and all, copied)
    is answered for by the RayJob's Workload, not one of its own."""
    job = rayjob()
    assert RAYJOB.manages(job)
    del job["spec"]["rayClusterSpec"]
    job["spec"]["clusterSelector"] = {"ray.io/cluster": "c"}
    assert not RAYJOB.manages(job)
    child = {
        "metadata": {
            "ownerReferences": [{"kind": "RayJob", "name": "rj", "controller": True}],
            "labels": {C.QUEUE_NAME_LABEL: "lq"},
        }
    }
    assert not RAYCLUSTER.manages(child)
    assert RAYCLUSTER.manages({"metadata": {"labels": {C.QUEUE_NAME_LABEL: "lq"}}})


def request_for(job: Obj) -> Obj:
    job["metadata"]["labels"] = {C.QUEUE_NAME_LABEL: "lq"}
    return {
        "uid": "u",
        "kind": {"group": "ray.io", "version": "v1", "kind": "RayJob"},
        "operation": "CREATE",
        "namespace": "ns",
        "object": job,
    }


def test_the_webhook_suspends_it_and_sets_multikueue() -> None:
    verdict = review_job(request_for(rayjob(("g", 1, None))), lambda ns, q: True)
    assert verdict.allowed
    assert verdict.patch == [
        {"op": "add", "path": "/spec/suspend", "value": True},
        {"op": "add", "path": "/spec/managedBy", "value": C.MULTIKUEUE_MANAGED_BY},
    ]


def no_cluster_spec() -> Obj:
    job = rayjob()
    del job["spec"]["rayClusterSpec"]
    return job


def on_existing_cluster(with_spec: bool) -> Obj:
    job = rayjob() if with_spec else no_cluster_spec()
    job["spec"]["clusterSelector"] = {"k2": "v2", "k1": "v1"}
    return job


@pytest.mark.parametrize(
    ("job", "message"),
    [
        (
            rayjob(("g", 1, None), shutdownAfterJobFinishes=False),
            "spec.shutdownAfterJobFinishes: Invalid value: false: a kueue managed job should "
            "delete the cluster after finishing",
        ),
        (
            on_existing_cluster(with_spec=True),
            'spec.clusterSelector: Invalid value: map[string]string{"k1":"v1", "k2":"v2"}: '
            "a kueue managed job should not use an existing cluster",
        ),
        (
            no_cluster_spec(),
            "spec.rayClusterSpec: Required value: rayClusterSpec is required for "
            "Kueue-managed jobs that don't use clusterSelector",
        ),
        (
            rayjob(*((f"g{i}", 1, None) for i in range(8))),
            "spec.rayClusterSpec.workerGroupSpecs: Too many: 9: must have at most 8 items",
        ),
        (
            rayjob(("head", 1, None)),
            'spec.rayClusterSpec.workerGroupSpecs[0].groupName: Forbidden: "head" is reserved '
            "for the head group",
        ),
    ],
)
def test_upstream_the_webhook_refuses_what_upstreams_refuses_in_its_words(
    job: Obj, message: str
) -> None:
    verdict = review_job(request_for(copy.deepcopy(job)), lambda ns, q: True)
    assert not verdict.allowed
    assert verdict.message == message


def test_several_refusals_are_aggregated_as_upstream_does() -> None:
    job = rayjob(("head", 1, None), shutdownAfterJobFinishes=False)
    job["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
    assert RAYJOB.refusal(job) == (
        "[spec.shutdownAfterJobFinishes: Invalid value: false: a kueue managed job should "
        "delete the cluster after finishing, spec.rayClusterSpec.enableInTreeAutoscaling: "
        "Invalid value: true: a kueue managed job should only use autoscaling when workload "
        "slicing is enabled, spec.rayClusterSpec.workerGroupSpecs[0].groupName: Forbidden: "
        '"head" is reserved for the head group]'
    )


def test_the_webhook_leaves_a_rayjob_without_a_queue_and_one_on_an_existing_cluster() -> None:
    job = rayjob(shutdownAfterJobFinishes=False)
    request = request_for(job)
    del job["metadata"]["labels"]
    assert review_job(request, lambda ns, q: True).allowed
    verdict = review_job(request_for(on_existing_cluster(with_spec=False)), lambda ns, q: True)
    assert verdict.allowed
