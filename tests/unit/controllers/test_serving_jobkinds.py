"""The StatefulSet and Deployment adapters (``jobkinds/serving.py``): one Workload, pod set
``main`` of ``replicas`` pods (upstream's StatefulSet Workload); held at zero replicas with
the count in ``kfed.io/held-replicas``; MultiKueue's ``managedBy`` in ``kfed.io/managed-by``,
under which the manager's copy is never resumed; a worker's copy held, labelled for its pods,
without it; the worker's counts written in an annotation, never the manager's status."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from manager.api import constants as C
from manager.cli import jobfiles
from manager.controllers.jobkinds import registry
from manager.controllers.jobkinds.base import PodSetPlacement, merge_fields
from manager.controllers.jobkinds.heldbyreplicas import (
    HELD_REPLICAS_ANNOTATION,
    MANAGED_BY_ANNOTATION,
)
from manager.controllers.jobkinds.serving import (
    DEPLOYMENT,
    STATEFULSET,
    WORKER_STATUS_ANNOTATION,
    ServingKind,
)
from manager.federation.decisions import jobsync
from manager.federation.engine.remoteobjects import remote_job
from manager.federation.webhooks.webhook import review_job

Obj = dict[str, Any]
KINDS = pytest.mark.parametrize("kind", [STATEFULSET, DEPLOYMENT], ids=lambda k: k.resource.kind)


def serving(kind: ServingKind, *, replicas: int | None = 3, **annotations: str) -> Obj:
    template = {
        "metadata": {"labels": {"app": "infer"}},
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "1"}}}
            ]
        },
    }
    spec: Obj = {"selector": {"matchLabels": {"app": "infer"}}, "template": template}
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "apps/v1",
        "kind": kind.resource.kind,
        "metadata": {
            "name": "infer",
            "namespace": "ns",
            "uid": "0123456789",
            "annotations": dict(annotations),
        },
        "spec": spec,
    }


@KINDS
def test_one_pod_set_of_replicas_pods_held_or_not(kind: ServingKind) -> None:
    (main,) = kind.workload_pod_sets(serving(kind, replicas=3))
    assert (main["name"], main["count"]) == ("main", 3)
    assert main["template"]["spec"]["containers"][0]["name"] == "c"
    (unset,) = kind.pod_sets(serving(kind, replicas=None))
    assert unset.count == 1, "replicas unset: 1, as the API server defaults it"
    held = serving(kind, replicas=0, **{HELD_REPLICAS_ANNOTATION: "4"})
    assert [ps.count for ps in kind.pod_sets(held)] == [4], "the size it was queued with"


@KINDS
def test_registered_under_upstreams_integration_names(kind: ServingKind) -> None:
    name = kind.resource.kind.lower()
    assert registry.KINDS[name] is kind
    assert registry.by_group_version_kind("apps", "v1", kind.resource.kind) is kind
    assert kind.workload_name("infer", "0123456789").startswith(f"{name}-infer-")


@KINDS
def test_it_never_finishes_and_runs_while_its_controller_counts_pods(kind: ServingKind) -> None:
    job = serving(kind)
    job["status"] = {"replicas": 3, "readyReplicas": 3}
    assert kind.outcome(job) is None
    assert kind.is_active(job)
    job["status"] = {"replicas": 0}
    assert not kind.is_active(job)


@KINDS
def test_held_at_zero_replicas_with_its_size_kept_and_given_back(kind: ServingKind) -> None:
    job = serving(kind, replicas=3)
    assert not kind.is_suspended(job)
    held = merge_fields(job, kind.suspend_fields(True, job))
    assert held["spec"]["replicas"] == 0
    assert held["metadata"]["annotations"][HELD_REPLICAS_ANNOTATION] == "3"
    assert kind.is_suspended(held) and kind.templates_mutable(held)
    again = merge_fields(held, kind.suspend_fields(True, held))
    assert again["metadata"]["annotations"][HELD_REPLICAS_ANNOTATION] == "3", "kept, not 0"
    resumed = kind.suspend_fields(False, held)
    assert resumed == {
        "metadata": {"annotations": {HELD_REPLICAS_ANNOTATION: None}},
        "spec": {"replicas": 3},
    }
    # Scaled up while held (kubectl scale on the manager): no longer held, and held again
    # at the size it was queued with.
    scaled = copy.deepcopy(held)
    scaled["spec"]["replicas"] = 5
    assert not kind.is_suspended(scaled)
    assert kind.suspend_fields(True, scaled)["spec"] == {"replicas": 0}
    assert kind.pod_sets(scaled)[0].count == 3
    with pytest.raises(ValueError):
        kind.suspend_fields(True)


@KINDS
def test_run_patch_places_the_template_and_gives_its_size_back(kind: ServingKind) -> None:
    job = serving(kind, replicas=0, **{HELD_REPLICAS_ANNOTATION: "2"})
    placement = PodSetPlacement({"gpu.model": "h100"}, [{"key": "gpu", "operator": "Exists"}])
    (patch,) = kind.run_patches(job, {"main": placement})
    assert patch["spec"]["replicas"] == 2
    assert patch["spec"]["template"]["spec"]["nodeSelector"] == {"gpu.model": "h100"}
    assert patch["metadata"]["annotations"] == {HELD_REPLICAS_ANNOTATION: None}


@KINDS
def test_the_managers_copy_is_held_for_its_worker(kind: ServingKind) -> None:
    job = serving(kind, replicas=0, **{HELD_REPLICAS_ANNOTATION: "2"})
    assert not kind.held_for_worker(job), "a queue of this cluster: it runs here"
    job["metadata"]["annotations"][MANAGED_BY_ANNOTATION] = C.MULTIKUEUE_MANAGED_BY
    assert kind.held_for_worker(job)
    assert kind.managed_by(job) == C.MULTIKUEUE_MANAGED_BY


@KINDS
def test_a_workers_copy_is_held_labelled_and_without_managed_by(kind: ServingKind) -> None:
    job = serving(
        kind,
        replicas=0,
        **{
            HELD_REPLICAS_ANNOTATION: "3",
            MANAGED_BY_ANNOTATION: C.MULTIKUEUE_MANAGED_BY,
            WORKER_STATUS_ANNOTATION: '{"readyReplicas":3}',
            "team": "a",
        },
    )
    before = copy.deepcopy(job)
    body = remote_job(job, workload_name="wl", origin="mgr", kind=kind)
    annotations = body["metadata"]["annotations"]
    assert MANAGED_BY_ANNOTATION not in annotations
    assert WORKER_STATUS_ANNOTATION not in annotations, "a former worker's counts stay home"
    assert annotations[HELD_REPLICAS_ANNOTATION] == "3"
    assert annotations["team"] == "a"
    assert body["spec"]["replicas"] == 0
    assert body["spec"]["selector"] == {"matchLabels": {"app": "infer"}}
    labels = body["spec"]["template"]["metadata"]["labels"]
    assert labels == {"app": "infer", kind.pod_label: "infer"}
    assert kind.pod_selector("infer") == f"{kind.pod_label}=infer"
    assert body["metadata"]["labels"][C.PREBUILT_WORKLOAD_LABEL] == "wl"
    assert job == before, "the manager's object is left as it is"


def request_for(kind: ServingKind, job: Obj) -> Obj:
    job["metadata"]["labels"] = {C.QUEUE_NAME_LABEL: "lq"}
    return {
        "uid": "u",
        "kind": {"group": "apps", "version": "v1", "kind": kind.resource.kind},
        "operation": "CREATE",
        "namespace": "ns",
        "object": job,
    }


@KINDS
def test_the_webhook_holds_it_and_marks_it_for_multikueue(kind: ServingKind) -> None:
    job = serving(kind, replicas=2)
    del job["metadata"]["annotations"]
    verdict = review_job(request_for(kind, job), lambda ns, q: True)
    assert verdict.allowed
    assert verdict.patch == [
        {"op": "add", "path": "/metadata/annotations", "value": {HELD_REPLICAS_ANNOTATION: "2"}},
        {"op": "add", "path": "/spec/replicas", "value": 0},
        {
            "op": "add",
            "path": "/metadata/annotations/kfed.io~1managed-by",
            "value": C.MULTIKUEUE_MANAGED_BY,
        },
    ]
    job = serving(kind, replicas=1)
    verdict = review_job(request_for(kind, job), lambda ns, q: False)
    assert [op["path"] for op in verdict.patch] == [
        "/metadata/annotations/kfed.io~1held-replicas",
        "/spec/replicas",
    ], "a local queue: held, no managedBy"


@KINDS
def test_kfed_submit_prepares_it_held(kind: ServingKind) -> None:
    prepared, warnings = jobfiles.prepare(serving(kind, replicas=3), queue="lq")
    assert prepared["spec"]["replicas"] == 0
    assert prepared["metadata"]["annotations"][HELD_REPLICAS_ANNOTATION] == "3"
    assert not warnings


@KINDS
def test_the_workers_counts_go_to_an_annotation_not_the_status(kind: ServingKind) -> None:
    manager = serving(kind, replicas=0, **{HELD_REPLICAS_ANNOTATION: "3"})
    manager["status"] = {"replicas": 0, "observedGeneration": 1}  # its own controller's
    remote = {"status": {"replicas": 3, "readyReplicas": 2, "observedGeneration": 4}}
    back = kind.status_for_manager(remote)
    assert back == {"replicas": 3, "readyReplicas": 2, "availableReplicas": 0, "updatedReplicas": 0}
    assert kind.mirrored_status(manager) == {}
    facts = jobsync.SyncFacts(
        "worker-2", kind.mirrored_status(manager), back, counters=kind.status_counters
    )
    patch = jobsync.status_patch(facts)
    assert patch == back
    body, subresource = kind.status_write(manager, patch)
    assert subresource is None
    text = body["metadata"]["annotations"][WORKER_STATUS_ANNOTATION]
    assert json.loads(text) == back
    written = merge_fields(manager, body)
    assert kind.mirrored_status(written) == back
    again = jobsync.SyncFacts("worker-2", kind.mirrored_status(written), back)
    assert jobsync.status_patch(again) is None, "nothing to write twice"
    # Its pods gone from the worker: the counts are cleared.
    body, _ = kind.status_write(written, dict.fromkeys(kind.status_counters))
    assert body == {"metadata": {"annotations": {WORKER_STATUS_ANNOTATION: None}}}
    broken = serving(kind, replicas=3, **{WORKER_STATUS_ANNOTATION: "not json"})
    assert kind.mirrored_status(broken) == {}
