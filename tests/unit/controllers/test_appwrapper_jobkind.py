"""The AppWrapper adapter (``workload.codeflare.dev/v1beta2``): pod sets named and counted as
upstream Kueue's integration counts them (the operator's recorded, declared or inferred pod
sets of each component, at their ``path`` inside the wrapped object), flavors written into
those templates in place, ``spec.suspend`` and ``spec.managedBy``, the outcome from
``status.phase``, and what goes to a worker and back."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from manager.api import constants as C
from manager.api.view import MalformedObject
from manager.cli import jobfiles
from manager.controllers.jobkinds import registry
from manager.controllers.jobkinds.appwrapper import (
    APPWRAPPER,
    APPWRAPPER_CONTROLLER,
    inferred,
    path_steps,
    template_at,
)
from manager.controllers.jobkinds.base import PodSetPlacement
from manager.federation.webhooks.webhook import review_job

Obj = dict[str, Any]


def pod_template(gpus: int = 1) -> Obj:
    requests = {"cpu": "1", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    return {
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}],
        }
    }


def batch_job(
    parallelism: int | None = 2,
    completions: int | None = None,
    labels: dict[str, str] | None = None,
) -> Obj:
    spec: Obj = {"template": pod_template()}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    meta: Obj = {"name": "job"}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def pytorchjob(master: int = 1, workers: int = 4) -> Obj:
    def replica(count: int) -> Obj:
        return {"replicas": count, "template": pod_template()}

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "pytorchjob"},
        "spec": {"pytorchReplicaSpecs": {"Master": replica(master), "Worker": replica(workers)}},
    }


def appwrapper(*components: Obj, name: str = "aw", **spec: Any) -> Obj:
    return {
        "apiVersion": APPWRAPPER.resource.api_version,
        "kind": "AppWrapper",
        "metadata": {"name": name, "namespace": "ns", "uid": "0123456789"},
        "spec": {"components": list(components), **spec},
    }


def component(template: Obj, *pod_sets: Obj) -> Obj:
    found: Obj = {"template": template}
    if pod_sets:
        found["podSets"] = list(pod_sets)
    return found


def test_upstream_pod_sets_of_a_pytorchjob_and_a_job_named_by_index_over_components() -> None:
    """Upstream's TestPodSets "no annotations": an AppWrapper of a PyTorchJob (1 master, 4
    workers) and a Job of parallelism 2 has pod sets aw-0 (1), aw-1 (4) and aw-2 (2), the
    wrapped objects' pod templates."""
    aw = appwrapper(component(pytorchjob()), component(batch_job(parallelism=2)))
    pod_sets = APPWRAPPER.pod_sets(aw)
    assert [(ps.name, ps.count) for ps in pod_sets] == [("aw-0", 1), ("aw-1", 4), ("aw-2", 2)]
    specs = aw["spec"]["components"][0]["template"]["spec"]["pytorchReplicaSpecs"]
    # The templates are the object's own, inside the wrapped object (written in place).
    assert pod_sets[0].template is specs["Master"]["template"]
    assert pod_sets[1].template is specs["Worker"]["template"]
    assert pod_sets[2].template is aw["spec"]["components"][1]["template"]["spec"]["template"]


@pytest.mark.parametrize(
    ("parallelism", "completions", "count"),
    [(2, None, 2), (None, None, 1), (4, 3, 3), (1, 5, 1)],
)
def test_a_wrapped_job_counts_min_of_parallelism_and_completions(
    parallelism: int | None, completions: int | None, count: int
) -> None:
    aw = appwrapper(component(batch_job(parallelism, completions)))
    assert [(ps.name, ps.count) for ps in APPWRAPPER.pod_sets(aw)] == [("aw-0", count)]


def test_declared_pod_sets_with_paths_into_lists_are_read_as_declared() -> None:
    widget: Obj = {
        "apiVersion": "example.com/v1",
        "kind": "Unknown",
        "spec": {
            "groups": [
                {"template": pod_template(gpus=0)},
                {"template": pod_template(gpus=2)},
            ]
        },
    }
    aw = appwrapper(
        component(
            widget,
            {"path": "template.spec.groups[1].template", "replicas": 3},
            {"path": "template.spec.groups[0].template"},
        )
    )
    pod_sets = APPWRAPPER.pod_sets(aw)
    assert [(ps.name, ps.count) for ps in pod_sets] == [("aw-0", 3), ("aw-1", 1)]
    assert pod_sets[0].template is widget["spec"]["groups"][1]["template"]


def test_the_operators_recorded_pod_sets_win_over_the_spec_once_one_per_component() -> None:
    aw = appwrapper(component(batch_job(parallelism=2)))
    aw["status"] = {
        "componentStatus": [
            {"name": "job", "podSets": [{"path": "template.spec.template", "replicas": 5}]}
        ]
    }
    assert [ps.count for ps in APPWRAPPER.pod_sets(aw)] == [5]
    aw["spec"]["components"].append(component(batch_job(parallelism=1)))
    assert [ps.count for ps in APPWRAPPER.pod_sets(aw)] == [2, 1], "not one per component"


def test_a_path_to_no_pod_template_is_no_pod_set() -> None:
    job = batch_job()
    aw = appwrapper(
        component(
            job,
            {"path": "template.spec.nothing"},
            {"path": "spec.template"},  # must start with template
            {"path": "template.spec.parallelism"},  # not a pod template
            {"path": "template.spec.template", "replicas": 2},
        )
    )
    assert [(ps.name, ps.count) for ps in APPWRAPPER.pod_sets(aw)] == [("aw-0", 2)]


@pytest.mark.parametrize(
    ("path", "steps"),
    [
        ("template", ["template"]),
        ("template.spec.template", ["template", "spec", "template"]),
        (
            "template.spec.replicatedJobs[10].template",
            ["template", "spec", "replicatedJobs", 10, "template"],
        ),
        ("spec.template", None),
        ("template.spec[x]", None),
        ("template..spec", None),
    ],
)
def test_path_steps(path: str, steps: list[str | int] | None) -> None:
    assert path_steps(path) == steps


def test_an_out_of_range_index_leads_nowhere() -> None:
    holder = {"template": {"spec": {"groups": [{"template": pod_template()}]}}}
    assert template_at(holder, "template.spec.groups[0].template") is not None
    assert template_at(holder, "template.spec.groups[1].template") is None
    assert template_at(holder, "template.spec[0]") is None


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "spec": {
                    "replicatedJobs": [
                        {"replicas": 2, "template": {"spec": {"parallelism": 3}}},
                        {"template": {"spec": {}}},
                    ]
                },
            },
            [
                ("template.spec.replicatedJobs[0].template.spec.template", 6),
                ("template.spec.replicatedJobs[1].template.spec.template", 1),
            ],
        ),
        (
            pytorchjob(workers=2),
            [
                ("template.spec.pytorchReplicaSpecs.Master.template", 1),
                ("template.spec.pytorchReplicaSpecs.Worker.template", 2),
            ],
        ),
        (
            {
                "apiVersion": "ray.io/v1",
                "kind": "RayCluster",
                "spec": {"workerGroupSpecs": [{"replicas": 3, "template": {}}, {"template": {}}]},
            },
            [
                ("template.spec.headGroupSpec.template", 1),
                ("template.spec.workerGroupSpecs[0].template", 3),
                ("template.spec.workerGroupSpecs[1].template", 1),
            ],
        ),
        (
            {"apiVersion": "ray.io/v1", "kind": "RayJob", "spec": {"rayClusterSpec": {}}},
            [("template.spec.rayClusterSpec.headGroupSpec.template", 1)],
        ),
        ({"apiVersion": "v1", "kind": "Pod", "spec": {}}, [("template", 1)]),
        (
            {"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {"replicas": 4}},
            [("template.spec.template", 4)],
        ),
        (
            {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {}},
            [("template.spec.template", 1)],
        ),
        ({"apiVersion": "example.com/v1", "kind": "Widget", "spec": {}}, []),
    ],
)
def test_pod_sets_inferred_for_the_kinds_the_operator_knows(
    template: Obj, expected: list[tuple[str, int]]
) -> None:
    """The operator's InferPodSets (v1.1.2): Job, JobSet, PyTorchJob, RayCluster, RayJob,
    Pod, Deployment, StatefulSet; another kind must declare its pod sets."""
    assert [(p["path"], p["replicas"]) for p in inferred({"template": template})] == expected


def test_registered_under_upstreams_integration_name_with_upstreams_workload_names() -> None:
    assert registry.KINDS["workload.codeflare.dev/appwrapper"] is APPWRAPPER
    found = registry.by_group_version_kind("workload.codeflare.dev", "v1beta2", "AppWrapper")
    assert found is APPWRAPPER
    assert APPWRAPPER.workload_name("aw", "0123456789").startswith("appwrapper-aw-")
    assert APPWRAPPER.default_managed_by == APPWRAPPER_CONTROLLER
    assert APPWRAPPER.pod_selector("aw") == "workload.codeflare.dev/appwrapper=aw"


def test_suspend_and_managed_by_are_in_spec() -> None:
    aw = appwrapper(component(batch_job()), suspend=True, managedBy="x/y")
    assert APPWRAPPER.is_suspended(aw)
    assert APPWRAPPER.managed_by(aw) == "x/y"
    assert not APPWRAPPER.is_suspended(appwrapper(component(batch_job())))
    assert APPWRAPPER.suspend_fields(False) == {"spec": {"suspend": False}}


@pytest.mark.parametrize(
    ("phase", "conditions", "expected"),
    [
        (None, [], None),
        ("Running", [], None),
        ("Resetting", [], None),
        ("Succeeded", [], (True, "AppWrapper finished successfully")),
        (
            "Failed",
            [{"type": "ResourcesDeployed", "status": "False"}],
            (False, "AppWrapper failed"),
        ),
        ("Failed", [], (False, "AppWrapper failed")),
        # Upstream: "Still deleting resources for failed AppWrapper": not finished yet.
        ("Failed", [{"type": "ResourcesDeployed", "status": "True"}], None),
    ],
)
def test_upstream_finished_by_phase_succeeded_or_failed_once_its_resources_are_deleted(
    phase: str | None, conditions: list[Obj], expected: tuple[bool, str] | None
) -> None:
    aw = appwrapper(component(batch_job()))
    aw["status"] = {"conditions": conditions, **({"phase": phase} if phase else {})}
    found = APPWRAPPER.outcome(aw)
    assert (found.succeeded, found.message) == expected if found else expected is None


def test_upstream_active_while_quota_reserved() -> None:
    aw = appwrapper(component(batch_job()), suspend=True)
    assert not APPWRAPPER.is_active(aw)
    assert APPWRAPPER.templates_mutable(aw), "a fresh suspended copy may be placed"
    aw["status"] = {"conditions": [{"type": "QuotaReserved", "status": "True"}]}
    assert APPWRAPPER.is_active(aw)
    assert not APPWRAPPER.templates_mutable(aw), "until the operator deleted what it wraps"
    aw["status"]["conditions"][0]["status"] = "False"
    assert not APPWRAPPER.is_active(aw)


def test_run_patch_places_each_pod_set_inside_the_wrapped_object_and_resumes_it() -> None:
    aw = appwrapper(component(pytorchjob(workers=2)), component(batch_job()), suspend=True)
    placements = {
        ps.name: PodSetPlacement({"gpu.model": "h100"}, [{"key": "k", "operator": "Exists"}])
        for ps in APPWRAPPER.pod_sets(aw)
    }
    before = copy.deepcopy(aw)
    [patch] = APPWRAPPER.run_patches(aw, placements)
    assert aw == before, "the job itself is left as it is"
    assert patch["spec"]["suspend"] is False
    # spec.components is a list: a merge patch replaces it whole, each template placed.
    ran = copy.deepcopy(aw)
    ran["spec"]["components"] = patch["spec"]["components"]
    placed = {"gpu.model": "h100"}
    for ps in APPWRAPPER.pod_sets(ran):
        assert ps.template["spec"]["nodeSelector"] == placed
        assert ps.template["spec"]["tolerations"] == [{"key": "k", "operator": "Exists"}]
        assert ps.template["spec"]["containers"][0]["image"] == "x", "the rest kept"
    assert ran["spec"]["components"][1]["template"]["kind"] == "Job"
    restore = APPWRAPPER.restore_patch(ran, APPWRAPPER.placements_of(aw))
    assert restore is not None
    ran["spec"]["components"] = restore["spec"]["components"]
    assert ran["spec"]["components"] == aw["spec"]["components"]


def test_a_workers_copy_is_suspended_without_managed_by_and_no_wrapped_queue_label() -> None:
    """The worker admits the AppWrapper; the Job its operator makes from it must not be
    queued there again (a queue label on the wrapped Job or its pods is dropped)."""
    job = batch_job(labels={C.QUEUE_NAME_LABEL: "lq", "team": "a"})
    job["spec"]["template"]["metadata"] = {"labels": {C.QUEUE_NAME_LABEL: "lq", "app": "x"}}
    aw = appwrapper(component(job), suspend=False, managedBy=C.MULTIKUEUE_MANAGED_BY)
    before = copy.deepcopy(aw)
    spec = APPWRAPPER.spec_for_worker(aw)
    assert spec["suspend"] is True
    assert "managedBy" not in spec
    wrapped = spec["components"][0]["template"]
    assert wrapped["metadata"]["labels"] == {"team": "a"}
    assert wrapped["spec"]["template"]["metadata"]["labels"] == {"app": "x"}
    assert aw == before, "the manager's object is left as it is"


def test_status_for_the_manager_writes_out_the_retry_count_the_operator_omits() -> None:
    remote: Obj = {"status": {"phase": "Running", "conditions": []}}
    status = APPWRAPPER.status_for_manager(remote)
    assert status == {"phase": "Running", "conditions": [], "resettingCount": 0}
    assert "resettingCount" not in remote["status"]
    remote["status"]["resettingCount"] = 2
    assert APPWRAPPER.status_for_manager(remote)["resettingCount"] == 2


def request_for(job: Obj) -> Obj:
    job["metadata"]["labels"] = {C.QUEUE_NAME_LABEL: "lq"}
    return {
        "uid": "u",
        "kind": {"group": "workload.codeflare.dev", "version": "v1beta2", "kind": "AppWrapper"},
        "operation": "CREATE",
        "namespace": "ns",
        "object": job,
    }


def test_the_webhook_suspends_it_and_sets_multikueue() -> None:
    verdict = review_job(request_for(appwrapper(component(batch_job()))), lambda ns, q: True)
    assert verdict.allowed
    assert verdict.patch == [
        {"op": "add", "path": "/spec/suspend", "value": True},
        {"op": "add", "path": "/spec/managedBy", "value": C.MULTIKUEUE_MANAGED_BY},
    ]


def test_kfed_submit_prepares_it_suspended() -> None:
    prepared, warnings = jobfiles.prepare(appwrapper(component(batch_job())), queue="lq")
    assert prepared["spec"]["suspend"] is True and not warnings
    assert prepared["metadata"]["labels"][C.QUEUE_NAME_LABEL] == "lq"


def test_malformed_components_are_named_or_skipped_never_a_crash() -> None:
    aw = appwrapper()
    aw["spec"]["components"] = "x"
    with pytest.raises(MalformedObject, match=r"AppWrapper ns/aw: spec.components is not a list"):
        APPWRAPPER.pod_sets(aw)
    aw = appwrapper("x", component(batch_job(), {"replicas": 2}, "y"), component("z"))  # type: ignore[arg-type]
    assert APPWRAPPER.pod_sets(aw) == []
    assert APPWRAPPER.outcome(aw) is None and not APPWRAPPER.is_active(aw)
