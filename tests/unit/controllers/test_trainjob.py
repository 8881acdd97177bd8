"""The TrainJob adapter: pod sets from its runtime's JobSet as the trainer changes it, and the
flavors written as podTemplateOverrides of kfed's own, while suspended, then resumed."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from manager.controllers.jobkinds.base import MissingReference, PodSetPlacement
from manager.controllers.jobkinds.trainjob import (
    ADMISSION_OVERRIDE,
    ANCESTOR_LABEL,
    RUNTIME_KEY,
    TRAINJOB,
)

Obj = dict[str, Any]


def runtime(num_nodes: int | None = 1) -> Obj:
    """Like the trainer's stock torch-distributed runtime, with a dataset initializer."""

    def replicated(name: str, step: str, container: str) -> Obj:
        return {
            "name": name,
            "template": {
                "metadata": {"labels": {ANCESTOR_LABEL: step}},
                "spec": {"template": {"spec": {"containers": [{"name": container}]}}},
            },
        }

    policy = {"numNodes": num_nodes} if num_nodes is not None else {}
    return {
        "mlPolicy": policy,
        "template": {
            "spec": {
                "replicatedJobs": [
                    replicated("dataset-initializer", "dataset-initializer", "dataset-initializer"),
                    replicated("node", "trainer", "node"),
                ]
            }
        },
    }


def trainjob(**trainer: Any) -> Obj:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "ml", "uid": "abcdef"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": trainer,
            "suspend": True,
        },
    }


def resolved(job: Obj, spec: Obj | None = None) -> Obj:
    out = copy.deepcopy(job)
    out[RUNTIME_KEY] = spec if spec is not None else runtime()
    return out


H100 = {"nvidia.com/gpu": "1", "cpu": "4"}


def test_the_trainer_job_runs_num_nodes_pods_with_the_resources_per_node() -> None:
    job = trainjob(numNodes=4, resourcesPerNode={"requests": H100})
    sets = {ps.name: ps for ps in TRAINJOB.pod_sets(resolved(job))}
    assert {n: ps.count for n, ps in sets.items()} == {"dataset-initializer": 1, "node": 4}
    (node,) = sets["node"].template["spec"]["containers"]
    assert node["resources"] == {"requests": H100}
    assert "resources" not in sets["dataset-initializer"].template["spec"]["containers"][0]


@pytest.mark.parametrize(
    ("trainer", "policy", "expected"),
    [({}, 3, 3), ({"numNodes": 2}, 3, 2), ({}, None, 1)],
    ids=["the runtime's numNodes", "the TrainJob's wins", "one by default"],
)
def test_node_count(trainer: Obj, policy: int | None, expected: int) -> None:
    sets = TRAINJOB.pod_sets(resolved(trainjob(**trainer), runtime(policy)))
    assert {ps.name: ps.count for ps in sets}["node"] == expected


def test_the_users_overrides_place_the_pods() -> None:
    job = trainjob(numNodes=2)
    job["spec"]["podTemplateOverrides"] = [
        {"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"gpu.model": "h100"}}}
    ]
    sets = {ps.name: ps for ps in TRAINJOB.pod_sets(resolved(job))}
    assert sets["node"].template["spec"]["nodeSelector"] == {"gpu.model": "h100"}
    assert "nodeSelector" not in sets["dataset-initializer"].template["spec"]


def test_without_its_runtime_read_it_has_no_pod_sets() -> None:
    with pytest.raises(MissingReference):
        TRAINJOB.pod_sets(trainjob())


PLACED = PodSetPlacement(
    {"gpu.model": "h100"}, [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
)


def test_run_writes_kfeds_overrides_while_suspended_then_resumes() -> None:
    job = trainjob(numNodes=2)
    users = {"targetJobs": [{"name": "node"}], "spec": {"serviceAccountName": "trainer"}}
    job["spec"]["podTemplateOverrides"] = [users]
    overrides, resume = TRAINJOB.run_patches(job, {"node": PLACED, "dataset-initializer": PLACED})
    assert resume == {"spec": {"suspend": False}}
    assert "suspend" not in overrides["spec"], "the trainer refuses both in one write"
    written = overrides["spec"]["podTemplateOverrides"]
    assert written[0] == users, "the user's own override is kept first"
    ours = written[1:]
    assert [o["targetJobs"] for o in ours] == [
        [{"name": "dataset-initializer"}],
        [{"name": "node"}],
    ]
    assert all(ADMISSION_OVERRIDE in o["metadata"]["annotations"] for o in ours)
    assert ours[1]["spec"] == {
        "nodeSelector": PLACED.node_selector,
        "tolerations": PLACED.tolerations,
    }


def test_restore_removes_kfeds_overrides_only_and_the_worker_copy_has_none() -> None:
    job = trainjob()
    users = {"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"team": "a"}}}
    job["spec"]["podTemplateOverrides"] = [users]
    running = TRAINJOB.with_templates(job, {"node": PLACED})
    assert TRAINJOB.placements_of(running) == {"node": PLACED}
    assert TRAINJOB.restore_patch(running, {}) == {"spec": {"podTemplateOverrides": [users]}}
    assert TRAINJOB.restore_patch(job, {}) is None
    assert TRAINJOB.spec_for_worker(running)["podTemplateOverrides"] == [users]
    bare = TRAINJOB.with_templates(trainjob(), {"node": PLACED})
    assert "podTemplateOverrides" not in TRAINJOB.spec_for_worker(bare)
    assert "podTemplateOverrides" not in TRAINJOB.with_templates(bare, {})["spec"]


def test_a_topology_request_in_the_users_override_reaches_the_pod_set() -> None:
    """Issue #44 item 1: a TrainJob asks for a rack through its override's annotations (the
    trainer merges an override's metadata over the runtime's template): the pod set's
    template has it, so its Workload gets the topology request."""
    job = trainjob(numNodes=4)
    asked = {"kueue.x-k8s.io/podset-required-topology": "rack"}
    job["spec"]["podTemplateOverrides"] = [
        {"targetJobs": [{"name": "node"}], "metadata": {"annotations": asked}}
    ]
    sets = {ps.name: ps for ps in TRAINJOB.pod_sets(resolved(job))}
    assert sets["node"].template["metadata"]["annotations"] == asked
    assert "annotations" not in sets["dataset-initializer"].template.get("metadata", {})


def test_a_pod_set_placed_by_topology_gets_its_gate_labels_and_annotations_by_override() -> None:
    """What the topology ungater needs on a TrainJob's pods (the gate, the TAS labels, the
    Workload's name) goes into kfed's override, its marker kept, and leaves with it."""
    job = trainjob(numNodes=2)
    placed = PodSetPlacement(
        {"kfed.test/tas": "x"},
        [],
        labels={"kueue.x-k8s.io/tas": "true", "kueue.x-k8s.io/podset": "node"},
        annotations={"kueue.x-k8s.io/workload": "trainjob-tj-abcde"},
        scheduling_gates=[{"name": "kueue.x-k8s.io/topology"}],
    )
    running = TRAINJOB.with_templates(job, {"node": placed})
    (ours,) = running["spec"]["podTemplateOverrides"]
    assert ours["metadata"]["labels"] == placed.labels
    assert ours["metadata"]["annotations"] == {
        "kueue.x-k8s.io/workload": "trainjob-tj-abcde",
        ADMISSION_OVERRIDE: "flavors",
    }
    assert ours["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]
    assert TRAINJOB.restore_patch(running, {}) == {"spec": {"podTemplateOverrides": None}}
