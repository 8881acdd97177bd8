"""The plain Pod adapter (upstream Kueue's ``pod`` integration): held by the scheduling gate
``kueue.x-k8s.io/admission`` (added only at creation), one Workload ``pod-...`` of one pod
set ``main`` of 1, resumed by removing the gate and adding the flavor's node labels and
tolerations (a pod's may only grow), never restored (a started pod is deleted instead),
its worker copy gated and labelled for fencing, the worker's status back with the manager
pod's own ``PodScheduled``; pods made by a controller are their owner's, and upstream's
pod groups are refused."""

from __future__ import annotations

import copy
from typing import Any

from manager.api import constants as C
from manager.cli import jobfiles
from manager.controllers import jobworkload
from manager.controllers.jobkinds import registry
from manager.controllers.jobkinds.base import PodSetPlacement
from manager.controllers.jobkinds.pod import (
    ADMISSION_GATE,
    GROUP_NAME_LABEL,
    GROUP_TOTAL_COUNT_ANNOTATION,
    MANAGED_BY_ANNOTATION,
    MANAGED_LABEL,
    POD,
    POD_NAME_LABEL,
)
from manager.federation.decisions import jobsync
from manager.federation.engine.remoteobjects import remote_job
from manager.federation.webhooks.webhook import review_job

Obj = dict[str, Any]
GATE = {"name": ADMISSION_GATE}
TAS_GATE = {"name": "example.com/other"}


def pod(*, gated: bool = True, stored: bool = True, **meta: Any) -> Obj:
    spec: Obj = {
        "containers": [
            {"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "1"}}}
        ],
        "nodeSelector": {"gpu.model": "h100"},
        "tolerations": [{"key": "a", "operator": "Exists"}],
        "priority": 5,
    }
    if gated:
        spec["schedulingGates"] = [dict(TAS_GATE), dict(GATE)]
    metadata: Obj = {
        "name": "p",
        "namespace": "ns",
        "uid": "abcdef-123",
        "labels": {C.QUEUE_NAME_LABEL: "lq", "app": "x"},
        **meta,
    }
    if stored:
        metadata["resourceVersion"] = "7"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def test_it_is_upstreams_pod_integration() -> None:
    assert registry.KINDS["pod"] is POD
    assert registry.by_group_version_kind("", "v1", "Pod") is POD
    assert jobfiles.kind_of({"apiVersion": "v1", "kind": "Pod"}) is POD


def test_upstream_a_single_pod_is_one_workload_of_one_pod_named_pod() -> None:
    job = pod()
    body = jobworkload.workload_for_job(job, lambda _: None, POD)
    assert body["metadata"]["name"].startswith("pod-p-abcde")
    assert body["metadata"]["ownerReferences"][0]["kind"] == "Pod"
    assert body["metadata"]["ownerReferences"][0]["apiVersion"] == "v1"
    (pod_set,) = body["spec"]["podSets"]
    assert (pod_set["name"], pod_set["count"]) == ("main", 1)
    template = pod_set["template"]
    assert set(template) == {"metadata", "spec"}, "a pod template, not the pod"
    assert "schedulingGates" not in template["spec"]
    assert template["spec"]["nodeSelector"] == {"gpu.model": "h100"}
    assert template["metadata"]["labels"]["app"] == "x"
    assert body["spec"]["priority"] == 5


def test_held_by_the_admission_gate_added_only_at_creation() -> None:
    assert POD.is_suspended(pod())
    assert not POD.is_suspended(pod(gated=False))
    new = pod(gated=False, stored=False)
    assert POD.suspend_fields(True, new) == {
        "metadata": {"labels": {MANAGED_LABEL: "true"}},
        "spec": {"schedulingGates": [GATE]},
    }
    # Stored already: the API server allows no new gate, so none is asked for.
    assert POD.suspend_fields(True, pod(gated=False)) == {}
    assert POD.suspend_fields(True, pod()) == {}
    assert POD.stopped_by_deletion


def test_upstream_admitted_the_gate_goes_and_the_flavor_is_added() -> None:
    job = pod()
    placement = PodSetPlacement(
        {"gpu.model": "h100", "pool": "a"},
        [{"key": "a", "operator": "Exists"}, {"key": "gpu", "operator": "Exists"}],
    )
    (patch,) = POD.run_patches(job, {"main": placement})
    assert patch["spec"]["schedulingGates"] == [TAS_GATE], "other gates stay"
    assert patch["spec"]["nodeSelector"] == {"pool": "a"}, "added to the pod's own"
    assert patch["spec"]["tolerations"] == [
        {"key": "a", "operator": "Exists"},
        {"key": "gpu", "operator": "Exists"},
    ]
    assert "metadata" not in patch
    only_gate = pod()
    only_gate["spec"]["schedulingGates"] = [dict(GATE)]
    (patch,) = POD.run_patches(only_gate, {"main": PodSetPlacement({}, [])})
    assert patch == {"spec": {"schedulingGates": None}}


def test_a_pod_is_never_restored_nor_changed_once_started() -> None:
    job = pod(gated=False)
    assert POD.restore_patch(job, {"main": PodSetPlacement({}, [])}) is None
    assert not POD.templates_mutable(job)
    assert POD.templates_mutable(pod())
    assert POD.is_active(job)
    assert not POD.is_active(pod())


def test_upstream_it_ends_by_its_phase() -> None:
    job = pod(gated=False)
    assert POD.outcome(job) is None
    job["status"] = {"phase": "Succeeded"}
    outcome = POD.outcome(job)
    assert outcome is not None and outcome.succeeded
    assert not POD.is_active(job)
    job["status"] = {"phase": "Failed", "message": "OOMKilled"}
    outcome = POD.outcome(job)
    assert outcome is not None and (outcome.succeeded, outcome.message) == (False, "OOMKilled")


def test_upstream_the_worker_copy_is_the_pod_gated_with_multikueue_labels() -> None:
    job = pod(annotations={MANAGED_BY_ANNOTATION: C.MULTIKUEUE_MANAGED_BY, "team": "a"})
    job["spec"]["nodeName"] = "somewhere"
    body = remote_job(job, workload_name="wl", origin="mgr", kind=POD)
    assert (body["apiVersion"], body["kind"]) == ("v1", "Pod")
    labels = body["metadata"]["labels"]
    assert labels[C.PREBUILT_WORKLOAD_LABEL] == "wl"
    assert labels[C.MULTIKUEUE_ORIGIN_LABEL] == "mgr"
    assert labels[POD_NAME_LABEL] == "p"
    assert labels[C.QUEUE_NAME_LABEL] == "lq"
    assert body["metadata"]["annotations"] == {"team": "a"}
    assert GATE in body["spec"]["schedulingGates"]
    assert "nodeName" not in body["spec"]
    assert POD.pod_selector("p") == f"{POD_NAME_LABEL}=p"
    ungated = remote_job(pod(gated=False), workload_name="wl", origin="mgr", kind=POD)
    assert ungated["spec"]["schedulingGates"] == [GATE], "created gated on the worker"


def test_upstream_the_manager_pod_takes_the_worker_status_but_keeps_its_podscheduled() -> None:
    mine = pod()
    gated = {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
    mine["status"] = {"phase": "Pending", "conditions": [gated]}
    remote = pod(gated=False)
    remote["status"] = {
        "phase": "Running",
        "podIP": "10.0.0.1",
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "True"},
        ],
    }
    facts = jobsync.SyncFacts("w", POD.mirrored_status(mine), POD.status_for_manager(remote))
    patch = jobsync.status_patch(facts)
    assert patch is not None and patch["phase"] == "Running"
    body, subresource = POD.status_write(mine, patch)
    assert subresource == "status"
    assert body["status"]["conditions"] == [gated, {"type": "Ready", "status": "True"}]
    # Written, nothing more to write: no endless rewrites.
    mine["status"] = body["status"]
    again = jobsync.SyncFacts("w", POD.mirrored_status(mine), POD.status_for_manager(remote))
    assert jobsync.status_patch(again) is None


def request_for(job: Obj, operation: str = "CREATE") -> Obj:
    return {
        "uid": "u",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": operation,
        "namespace": "ns",
        "object": job,
    }


def test_upstream_the_webhook_gates_a_queued_pod_and_marks_it_for_multikueue() -> None:
    new = pod(gated=False, stored=False)
    verdict = review_job(request_for(copy.deepcopy(new)), lambda ns, q: True)
    assert verdict.allowed
    ops = {op["path"]: op["value"] for op in verdict.patch}
    assert ops["/metadata/labels/kueue.x-k8s.io~1managed"] == "true"
    assert ops["/spec/schedulingGates"] == [GATE]
    assert ops["/metadata/annotations"] == {MANAGED_BY_ANNOTATION: C.MULTIKUEUE_MANAGED_BY}
    local = review_job(request_for(copy.deepcopy(new)), lambda ns, q: False)
    assert "/metadata/annotations" not in {op["path"] for op in local.patch}


def test_upstream_the_webhook_leaves_a_pod_its_controller_made_alone() -> None:
    owned = pod(gated=False, stored=False)
    owned["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}
    ]
    verdict = review_job(request_for(owned), lambda ns, q: True)
    assert verdict.allowed and verdict.patch == []
    assert not POD.manages(owned)
    assert POD.manages(pod())
    unqueued = pod(gated=False, stored=False)
    del unqueued["metadata"]["labels"][C.QUEUE_NAME_LABEL]
    verdict = review_job(request_for(unqueued), lambda ns, q: True)
    assert verdict.allowed and verdict.patch == []


def test_a_pod_of_an_upstream_pod_group_is_refused_with_the_reason() -> None:
    grouped = pod(gated=False, stored=False)
    grouped["metadata"]["labels"][GROUP_NAME_LABEL] = "g"
    grouped["metadata"]["annotations"] = {GROUP_TOTAL_COUNT_ANNOTATION: "3"}
    verdict = review_job(request_for(grouped), lambda ns, q: True)
    assert not verdict.allowed
    assert "kfed does not queue pod groups" in verdict.message
    assert POD.refusal(pod()) is None
