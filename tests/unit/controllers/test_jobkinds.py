"""The job framework's adapters: pod sets as upstream Kueue counts them, outcomes, and the
merge patches that run a job with its placement and restore it, for every kind."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from manager.controllers.jobkinds.base import JobKind, PodSetPlacement, merge_patch
from manager.controllers.jobkinds.batchjob import BatchJob
from manager.controllers.jobkinds.jobset import JobSetKind
from manager.controllers.jobkinds.raycluster import RayClusterKind

Obj = dict[str, Any]


def pod(gpus: int = 0, **spec: Any) -> Obj:
    resources = {"requests": {"cpu": "1", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}}
    return {"spec": {"containers": [{"name": "c", "image": "x", "resources": resources}], **spec}}


def job(parallelism: int | None = None, completions: int | None = None, **tmpl: Any) -> Obj:
    spec: Obj = {"suspend": True, "template": pod(**tmpl)}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "uid": "abcdef"},
        "spec": spec,
    }


def jobset(*replicated: tuple[str, int | None, int | None, int | None]) -> Obj:
    rjs = []
    for name, replicas, parallelism, completions in replicated:
        job_spec: Obj = {"template": pod(gpus=1)}
        if parallelism is not None:
            job_spec["parallelism"] = parallelism
        if completions is not None:
            job_spec["completions"] = completions
        rj: Obj = {"name": name, "template": {"spec": job_spec}}
        if replicas is not None:
            rj["replicas"] = replicas
        rjs.append(rj)
    return {
        "metadata": {"name": "js", "uid": "12345678"},
        "spec": {"suspend": True, "replicatedJobs": rjs},
    }


def raycluster(*groups: tuple[str, int | None, int | None]) -> Obj:
    workers = []
    for name, replicas, hosts in groups:
        group: Obj = {"groupName": name, "template": pod(gpus=1)}
        if replicas is not None:
            group["replicas"] = replicas
        if hosts is not None:
            group["numOfHosts"] = hosts
        workers.append(group)
    return {
        "metadata": {"name": "rc", "uid": "99999999"},
        "spec": {"headGroupSpec": {"template": pod()}, "workerGroupSpecs": workers},
    }


@pytest.mark.parametrize(
    ("kind", "obj", "expected"),
    [
        pytest.param(BatchJob(), job(), [("main", 1)], id="job: parallelism unset is 1"),
        pytest.param(BatchJob(), job(4), [("main", 4)], id="job: parallelism"),
        pytest.param(BatchJob(), job(4, 2), [("main", 2)], id="job: at most completions"),
        pytest.param(
            JobSetKind(),
            jobset(("driver", None, None, None), ("workers", 2, 2, None)),
            [("driver", 1), ("workers", 4)],
            id="jobset: replicas x parallelism per replicated job",
        ),
        pytest.param(
            JobSetKind(), jobset(("w", 3, 4, 2)), [("w", 6)], id="jobset: completions cap each job"
        ),
        pytest.param(
            RayClusterKind(),
            raycluster(("gpu", 2, None), ("tpu", 2, 4), ("idle", None, None)),
            [("head", 1), ("gpu", 2), ("tpu", 8), ("idle", 1)],
            id="raycluster: head plus replicas x numOfHosts per group",
        ),
    ],
)
def test_pod_sets_counted_as_upstream(
    kind: JobKind, obj: Obj, expected: list[tuple[str, int]]
) -> None:
    assert [(ps.name, ps.count) for ps in kind.pod_sets(obj)] == expected


def test_reading_pod_sets_never_changes_the_object() -> None:
    for kind, obj in (
        (BatchJob(), {"metadata": {}}),
        (JobSetKind(), {"spec": {"replicatedJobs": [{"name": "a"}]}}),
    ):
        before: Obj = copy.deepcopy(obj)
        kind.pod_sets(obj)
        kind.workload_pod_sets(obj)
        assert obj == before


def test_workload_names_follow_upstreams_kind_prefix() -> None:
    assert BatchJob().workload_name("train", "abcdef12") == "job-train-abcde"
    assert JobSetKind().workload_name("train", "abcdef12") == "jobset-train-abcde"
    assert RayClusterKind().workload_name("r", "0123456") == "raycluster-r-01234"


H100 = PodSetPlacement(
    {"gpu.model": "h100"}, [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
)


def test_run_patch_of_a_job_sets_its_template_and_resumes_it() -> None:
    original = job()
    original["spec"]["template"]["spec"]["nodeSelector"] = {"team": "a"}
    merged = PodSetPlacement({"team": "a", **H100.node_selector}, H100.tolerations)
    (patch,) = BatchJob().run_patches(original, {"main": merged})
    assert patch == {
        "spec": {
            "suspend": False,
            "template": {
                "spec": {"nodeSelector": {"gpu.model": "h100"}, "tolerations": H100.tolerations}
            },
        }
    }


def test_restore_patch_removes_what_admission_added_and_is_none_when_nothing_to_do() -> None:
    kind = BatchJob()
    submitted = job()
    submitted["spec"]["template"]["spec"]["nodeSelector"] = {"team": "a"}
    originals = kind.placements_of(submitted)
    running = kind.with_templates(
        submitted, {"main": PodSetPlacement({"team": "a", "gpu.model": "h100"}, H100.tolerations)}
    )
    patch = kind.restore_patch(running, originals)
    assert patch == {
        "spec": {"template": {"spec": {"nodeSelector": {"gpu.model": None}, "tolerations": None}}}
    }
    assert kind.restore_patch(submitted, originals) is None


def test_run_patch_of_a_jobset_places_every_replicated_job() -> None:
    kind = JobSetKind()
    js = jobset(("driver", 1, None, None), ("workers", 2, 2, None))
    cpu = PodSetPlacement({"node": "cpu"}, [])
    (patch,) = kind.run_patches(js, {"driver": cpu, "workers": H100})
    assert patch["spec"]["suspend"] is False
    templates = [
        rj["template"]["spec"]["template"]["spec"] for rj in patch["spec"]["replicatedJobs"]
    ]
    assert templates[0]["nodeSelector"] == {"node": "cpu"} and "tolerations" not in templates[0]
    assert templates[1]["nodeSelector"] == {"gpu.model": "h100"}
    assert templates[1]["tolerations"] == H100.tolerations
    assert (
        js["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"].get("nodeSelector")
        is None
    )


@pytest.mark.parametrize(
    ("kind", "status", "expected"),
    [
        (BatchJob(), {}, None),
        (
            BatchJob(),
            {"conditions": [{"type": "Complete", "status": "True"}]},
            (True, "Job finished successfully"),
        ),
        (
            BatchJob(),
            {
                "conditions": [
                    {"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"}
                ]
            },
            (False, "BackoffLimitExceeded"),
        ),
        (BatchJob(), {"conditions": [{"type": "Complete", "status": "False"}]}, None),
        (
            JobSetKind(),
            {
                "conditions": [
                    {
                        "type": "Completed",
                        "status": "True",
                        "message": "jobset completed successfully",
                    }
                ]
            },
            (True, "jobset completed successfully"),
        ),
        (
            JobSetKind(),
            {"conditions": [{"type": "Failed", "status": "True"}]},
            (False, "JobSet failed"),
        ),
        (RayClusterKind(), {"state": "ready"}, None),
    ],
)
def test_outcome(kind: JobKind, status: Obj, expected: tuple[bool, str] | None) -> None:
    outcome = kind.outcome({"status": status})
    assert (None if outcome is None else (outcome.succeeded, outcome.message)) == expected


def test_merge_patch_nulls_removed_keys_and_replaces_lists_whole() -> None:
    old = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    new = {"a": {"c": [1, 3]}, "e": 2}
    assert merge_patch(old, new) == {"a": {"b": None, "c": [1, 3]}, "d": None, "e": 2}
    assert merge_patch(new, new) == {}
