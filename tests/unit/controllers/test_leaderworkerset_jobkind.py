"""The LeaderWorkerSet adapter: one Workload for the whole set (upstream's pod sets with every
group in them), held at zero replicas with the count kept in ``kfed.io/held-replicas`` (it has
no ``suspend``), MultiKueue's ``managedBy`` in ``kfed.io/managed-by`` (it has no
``managedBy``), a worker's copy held and without it, and what fencing writes."""

from __future__ import annotations

import copy
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
from manager.controllers.jobkinds.leaderworkerset import LEADERWORKERSET
from manager.federation.engine.remoteobjects import remote_job
from manager.federation.webhooks.webhook import review_job

Obj = dict[str, Any]
LWS = LEADERWORKERSET


def template(gpus: int = 0) -> Obj:
    requests = {"cpu": "1", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    return {
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}]}
    }


def lws(
    *,
    replicas: int | None = 2,
    size: int | None = 3,
    leader: bool = True,
    annotations: dict[str, str] | None = None,
) -> Obj:
    lwt: Obj = {"workerTemplate": template(gpus=1)}
    if leader:
        lwt["leaderTemplate"] = template()
    if size is not None:
        lwt["size"] = size
    spec: Obj = {"leaderWorkerTemplate": lwt}
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {
            "name": "serve",
            "namespace": "ns",
            "uid": "0123456789",
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
    }


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (lws(replicas=2, size=3), [("leader", 2), ("worker", 4)]),
        (lws(replicas=None, size=None), [("leader", 1)]),
        (lws(replicas=1, size=4, leader=False), [("main", 4)]),
        (lws(replicas=3, size=2, leader=False), [("main", 6)]),
        # Held by kfed: the count it asked for, not the zero it is scaled to.
        (
            lws(replicas=0, size=2, annotations={HELD_REPLICAS_ANNOTATION: "3"}),
            [("leader", 3), ("worker", 3)],
        ),
    ],
)
def test_one_workload_holds_every_group_in_upstreams_pod_sets(
    job: Obj, expected: list[tuple[str, int]]
) -> None:
    assert [(ps.name, ps.count) for ps in LWS.pod_sets(job)] == expected


def test_the_pod_set_templates_are_the_sets_own() -> None:
    job = lws()
    leader, worker = LWS.pod_sets(job)
    assert leader.template is job["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    assert worker.template is job["spec"]["leaderWorkerTemplate"]["workerTemplate"]


def test_registered_under_upstreams_integration_name() -> None:
    assert registry.KINDS["leaderworkerset.x-k8s.io/leaderworkerset"] is LWS
    found = registry.by_group_version_kind("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet")
    assert found is LWS
    assert LWS.workload_name("serve", "0123456789").startswith("leaderworkerset-serve-")
    assert LWS.pod_selector("serve") == "leaderworkerset.sigs.k8s.io/name=serve"


def test_it_never_finishes_and_runs_while_the_operator_counts_groups() -> None:
    job = lws()
    assert LWS.outcome(job) is None
    assert not LWS.is_active(job)
    job["status"] = {"replicas": 2, "readyReplicas": 1}
    assert LWS.is_active(job)
    job["status"] = {"conditions": []}
    assert not LWS.is_active(job)


def test_held_at_zero_replicas_with_its_count_kept_and_given_back() -> None:
    job = lws(replicas=2)
    assert not LWS.is_suspended(job)
    hold = LWS.suspend_fields(True, job)
    assert hold == {
        "metadata": {"annotations": {HELD_REPLICAS_ANNOTATION: "2"}},
        "spec": {"replicas": 0},
    }
    held = merge_fields(job, hold)
    assert LWS.is_suspended(held)
    assert LWS.suspend_fields(True, held) == hold, "holding again keeps the count"
    assert LWS.suspend_fields(False, held) == {
        "metadata": {"annotations": {HELD_REPLICAS_ANNOTATION: None}},
        "spec": {"replicas": 2},
    }
    with pytest.raises(ValueError, match="pass the job"):
        LWS.suspend_fields(True)


def test_run_patch_places_both_templates_and_gives_its_groups_back() -> None:
    held = lws(replicas=0, annotations={HELD_REPLICAS_ANNOTATION: "2"})
    placements = {
        name: PodSetPlacement({"gpu.model": "h100"}, [{"key": "k", "operator": "Exists"}])
        for name in ("leader", "worker")
    }
    [patch] = LWS.run_patches(held, placements)
    assert patch["spec"]["replicas"] == 2
    assert patch["metadata"] == {"annotations": {HELD_REPLICAS_ANNOTATION: None}}
    for which in ("leaderTemplate", "workerTemplate"):
        spec = patch["spec"]["leaderWorkerTemplate"][which]["spec"]
        assert spec == {
            "nodeSelector": {"gpu.model": "h100"},
            "tolerations": [{"key": "k", "operator": "Exists"}],
        }
    assert LWS.templates_mutable(held)
    held["status"] = {"replicas": 1}
    assert not LWS.templates_mutable(held), "not until its groups are gone"


def test_the_managers_own_stays_held_while_a_worker_serves_it() -> None:
    assert LWS.held_for_worker(lws(annotations={MANAGED_BY_ANNOTATION: C.MULTIKUEUE_MANAGED_BY}))
    assert not LWS.held_for_worker(lws()), "a worker's copy, or one queued on its own cluster"


def test_a_workers_copy_is_held_and_without_managed_by() -> None:
    job = lws(replicas=2, annotations={MANAGED_BY_ANNOTATION: C.MULTIKUEUE_MANAGED_BY, "team": "a"})
    before = copy.deepcopy(job)
    body = remote_job(job, workload_name="wl", origin="mgr", kind=LWS)
    annotations = body["metadata"]["annotations"]
    assert MANAGED_BY_ANNOTATION not in annotations
    assert annotations[HELD_REPLICAS_ANNOTATION] == "2"
    assert annotations["team"] == "a"
    assert body["spec"]["replicas"] == 0
    assert body["metadata"]["labels"][C.PREBUILT_WORKLOAD_LABEL] == "wl"
    assert job == before, "the manager's object is left as it is"
    # The manager's own, held while it waited: the copy asks for the same groups.
    held = merge_fields(job, LWS.suspend_fields(True, job))
    body = remote_job(held, workload_name="wl", origin="mgr", kind=LWS)
    assert body["metadata"]["annotations"][HELD_REPLICAS_ANNOTATION] == "2"
    assert body["spec"]["replicas"] == 0


def request_for(job: Obj) -> Obj:
    job["metadata"]["labels"] = {C.QUEUE_NAME_LABEL: "lq"}
    return {
        "uid": "u",
        "kind": {"group": "leaderworkerset.x-k8s.io", "version": "v1", "kind": "LeaderWorkerSet"},
        "operation": "CREATE",
        "namespace": "ns",
        "object": job,
    }


def test_the_webhook_holds_it_and_sets_multikueue_in_an_annotation() -> None:
    job = lws(replicas=2)
    del job["metadata"]["annotations"]
    verdict = review_job(request_for(job), lambda ns, q: True)
    assert verdict.allowed
    assert verdict.patch == [
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {HELD_REPLICAS_ANNOTATION: "2"},
        },
        {"op": "add", "path": "/spec/replicas", "value": 0},
        {
            "op": "add",
            "path": "/metadata/annotations/kfed.io~1managed-by",
            "value": C.MULTIKUEUE_MANAGED_BY,
        },
    ]
    # Held already (kfed submit did it): only managedBy.
    job = lws(replicas=0, annotations={HELD_REPLICAS_ANNOTATION: "2"})
    verdict = review_job(request_for(job), lambda ns, q: True)
    assert [op["path"] for op in verdict.patch] == ["/metadata/annotations/kfed.io~1managed-by"]
    # A local queue: held, no managedBy.
    job = lws(replicas=1)
    verdict = review_job(request_for(job), lambda ns, q: False)
    assert [op["path"] for op in verdict.patch] == [
        "/metadata/annotations/kfed.io~1held-replicas",
        "/spec/replicas",
    ]


def test_kfed_submit_prepares_it_held() -> None:
    prepared, warnings = jobfiles.prepare(lws(replicas=3), queue="lq")
    assert prepared["spec"]["replicas"] == 0
    assert prepared["metadata"]["annotations"][HELD_REPLICAS_ANNOTATION] == "3"
    assert not warnings
    again, _ = jobfiles.prepare(prepared, queue="lq")
    assert again["metadata"]["annotations"][HELD_REPLICAS_ANNOTATION] == "3"
