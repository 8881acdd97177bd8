"""The TrainJob adapter: pod sets from its runtime's JobSet as the trainer changes it, and the
flavors written as podTemplateOverrides (Trainer 2.1) or a runtime patch (Trainer 2.2 and
after) of kfed's own, while suspended, then resumed; the shape a cluster takes read from its
TrainJob CRD."""

from __future__ import annotations

import copy
from typing import Any, cast

import pytest

from manager.controllers.jobkinds.base import MissingReference, PodSetPlacement
from manager.controllers.jobkinds.trainjob import (
    ANCESTOR_LABEL,
    RUNTIME_KEY,
    TRAINJOB,
    TRAINJOB_CRD,
    TrainJobKind,
    served_shape,
)
from manager.controllers.jobkinds.trainjob_overrides import (
    ADMISSION_MANAGER,
    ADMISSION_OVERRIDE,
    OVERRIDES,
    PATCHES,
)
from manager.kube import errors
from manager.kube.api import KubeApi
from manager.kube.resources import CRDS, Resource

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


# -- Trainer 2.2 and after: runtimePatches ------------------------------------------------------

PATCHING = TrainJobKind(PATCHES)
"""The adapter on a cluster whose TrainJob CRD has runtimePatches (``on_cluster``)."""


def users_patch(pod_spec: Obj, metadata: Obj | None = None, job: str = "node") -> Obj:
    template: Obj = {"spec": pod_spec}
    if metadata:
        template["metadata"] = metadata
    return {
        "manager": "example.com/team-a",
        "time": "2026-12-06T10:00:00Z",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [{"name": job, "template": {"spec": {"template": template}}}]
                }
            }
        },
    }


def with_runtime_tolerations(spec: Obj, tolerations: list[Obj]) -> Obj:
    for rj in spec["template"]["spec"]["replicatedJobs"]:
        rj["template"]["spec"]["template"]["spec"]["tolerations"] = copy.deepcopy(tolerations)
    return spec


TEAM = [{"key": "team", "operator": "Exists"}]
RUNTIME_TOLERATION = [{"key": "runtime", "operator": "Exists"}]


def test_the_users_runtime_patches_place_the_pods_as_the_trainer_merges_them() -> None:
    """A strategic merge patch per entry, in order: node selectors merged, tolerations
    replaced whole, scheduling gates and containers merged by name, metadata merged; the
    replicated jobs keep the runtime's order and only the named one changes."""
    job = trainjob(numNodes=2, resourcesPerNode={"requests": H100})
    first = users_patch(
        {
            "nodeSelector": {"gpu.model": "h100", "zone": "a"},
            "tolerations": TEAM,
            "schedulingGates": [{"name": "team/hold"}],
            "containers": [{"name": "node", "env": [{"name": "A", "value": "1"}]}],
        },
        {"annotations": {"kueue.x-k8s.io/podset-required-topology": "rack"}},
    )
    second = users_patch({"nodeSelector": {"zone": "b"}})
    second["manager"] = "example.com/team-b"
    job["spec"]["runtimePatches"] = [first, second]
    spec = with_runtime_tolerations(runtime(), RUNTIME_TOLERATION)
    sets = TRAINJOB.pod_sets(resolved(job, spec))
    assert [ps.name for ps in sets] == ["dataset-initializer", "node"]
    node = sets[1].template
    assert node["spec"]["nodeSelector"] == {"gpu.model": "h100", "zone": "b"}
    assert node["spec"]["tolerations"] == TEAM, "a patch's tolerations replace the runtime's"
    assert node["spec"]["schedulingGates"] == [{"name": "team/hold"}]
    (container,) = node["spec"]["containers"]
    assert container == {
        "name": "node",
        "env": [{"name": "A", "value": "1"}],
        "resources": {"requests": H100},
    }
    assert node["metadata"]["annotations"] == {"kueue.x-k8s.io/podset-required-topology": "rack"}
    assert sets[1].count == 2
    initializer = sets[0].template["spec"]
    assert initializer["tolerations"] == RUNTIME_TOLERATION
    assert "nodeSelector" not in initializer
    assert job["spec"]["runtimePatches"][0] == first, "the job itself is not changed"


def test_run_writes_kfeds_runtime_patch_last_while_suspended_then_resumes() -> None:
    job = trainjob(numNodes=2)
    users = users_patch({"serviceAccountName": "trainer"})
    job["spec"]["runtimePatches"] = [users]
    placed, resume = PATCHING.run_patches(job, {"node": PLACED, "dataset-initializer": PLACED})
    assert resume == {"spec": {"suspend": False}}
    assert "suspend" not in placed["spec"], "written while suspended, resumed after"
    assert "podTemplateOverrides" not in placed["spec"]
    written = placed["spec"]["runtimePatches"]
    assert written[0] == users, "the user's patch is kept as it is, first"
    ours = written[1]
    assert ours["manager"] == ADMISSION_MANAGER
    assert "time" not in ours, "the trainer's webhook stamps it"
    replicated = ours["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert [rj["name"] for rj in replicated] == ["dataset-initializer", "node"]
    assert replicated[1]["template"] == {
        "spec": {
            "template": {
                "spec": {"nodeSelector": PLACED.node_selector, "tolerations": PLACED.tolerations}
            }
        }
    }
    running = PATCHING.with_templates(job, {"node": PLACED})
    assert PATCHING.placements_of(running) == {"node": PLACED}
    assert TRAINJOB.placements_of(running) == {"node": PLACED}, "read in either shape"


def test_kfeds_patch_is_applied_last_so_its_tolerations_are_the_pod_sets() -> None:
    """The placement holds the pod set's whole tolerations (the submitted ones and the
    flavors'): written last, they are what the pods get."""
    job = trainjob()
    job["spec"]["runtimePatches"] = [users_patch({"tolerations": TEAM})]
    whole = PodSetPlacement({"gpu.model": "h100"}, [*TEAM, *PLACED.tolerations])
    running = resolved(PATCHING.with_templates(job, {"node": whole}))
    node = {ps.name: ps for ps in TRAINJOB.pod_sets(running)}["node"].template["spec"]
    assert node["tolerations"] == whole.tolerations
    assert node["nodeSelector"] == {"gpu.model": "h100"}


def test_restore_removes_kfeds_runtime_patch_only_and_the_worker_copy_has_none() -> None:
    job = trainjob()
    users = users_patch({"nodeSelector": {"team": "a"}})
    job["spec"]["runtimePatches"] = [users]
    running = PATCHING.with_templates(job, {"node": PLACED})
    assert len(running["spec"]["runtimePatches"]) == 2
    assert PATCHING.restore_patch(running, {}) == {"spec": {"runtimePatches": [users]}}
    assert PATCHING.restore_patch(job, {}) is None
    assert TRAINJOB.restore_patch(running, {}) == {"spec": {"runtimePatches": [users]}}
    assert TRAINJOB.spec_for_worker(running)["runtimePatches"] == [users]
    bare = PATCHING.with_templates(trainjob(), {"node": PLACED})
    assert "runtimePatches" not in TRAINJOB.spec_for_worker(bare)
    assert PATCHING.restore_patch(bare, {}) == {"spec": {"runtimePatches": None}}
    assert "runtimePatches" not in PATCHING.with_templates(trainjob(), {})["spec"]


def test_an_unchanged_runtime_patch_keeps_the_time_the_trainer_stamped() -> None:
    """Written again with the same placement (a second reconcile before the resume is
    seen), kfed's patch is left as the trainer's webhook stamped it: nothing to write."""
    stamped = PATCHING.with_templates(trainjob(), {"node": PLACED})
    stamped["spec"]["runtimePatches"][0]["time"] = "2026-12-06T23:00:00Z"
    (resume,) = PATCHING.run_patches(stamped, {"node": PLACED})
    assert resume == {"spec": {"suspend": False}}
    moved = PodSetPlacement({"gpu.model": "rtx-a1000"}, [])
    placed, _ = PATCHING.run_patches(stamped, {"node": moved})
    (ours,) = placed["spec"]["runtimePatches"]
    assert "time" not in ours


def test_a_pod_set_placed_by_topology_gets_its_gate_labels_and_annotations_by_patch() -> None:
    placed = PodSetPlacement(
        {"kfed.test/tas": "x"},
        [],
        labels={"kueue.x-k8s.io/tas": "true", "kueue.x-k8s.io/podset": "node"},
        annotations={"kueue.x-k8s.io/workload": "trainjob-tj-abcde"},
        scheduling_gates=[{"name": "kueue.x-k8s.io/topology"}],
    )
    running = PATCHING.with_templates(trainjob(numNodes=2), {"node": placed})
    node = {ps.name: ps for ps in TRAINJOB.pod_sets(resolved(running))}["node"].template
    assert node["metadata"]["labels"] == placed.labels
    assert node["metadata"]["annotations"] == placed.annotations
    assert node["spec"]["schedulingGates"] == placed.scheduling_gates
    assert PATCHING.restore_patch(running, {}) == {"spec": {"runtimePatches": None}}


def test_the_registered_adapter_writes_where_the_object_has_entries() -> None:
    """Without a cluster's answer (its CRD unreadable), the shape the object already uses,
    else podTemplateOverrides, the pinned Trainer's."""
    job = trainjob()
    job["spec"]["runtimePatches"] = [users_patch({})]
    assert "runtimePatches" in TRAINJOB.with_templates(job, {"node": PLACED})["spec"]
    assert "podTemplateOverrides" in TRAINJOB.with_templates(trainjob(), {"node": PLACED})["spec"]


# -- which shape a cluster takes ------------------------------------------------------------


def crd(*fields: str) -> Obj:
    spec_fields = {f: {"type": "array"} for f in ("runtimeRef", "suspend", *fields)}
    return {
        "metadata": {"name": TRAINJOB_CRD},
        "spec": {
            "versions": [
                {
                    "name": "v1alpha1",
                    "schema": {
                        "openAPIV3Schema": {"properties": {"spec": {"properties": spec_fields}}}
                    },
                }
            ]
        },
    }


class CrdApi:
    """Answers GET of the TrainJob CRD only, counting the reads."""

    def __init__(self, answer: Obj | errors.KubeError) -> None:
        self.answer = answer
        self.reads = 0

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> Obj:
        assert (res, name, namespace) == (CRDS, TRAINJOB_CRD, None)
        self.reads += 1
        if isinstance(self.answer, errors.KubeError):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (crd("runtimePatches"), PATCHES),
        (crd("podTemplateOverrides"), OVERRIDES),
        (crd(), None),
        (errors.Forbidden(403, "Forbidden", "customresourcedefinitions is forbidden"), None),
    ],
    ids=["Trainer 2.2+", "Trainer 2.1", "neither field", "not readable"],
)
async def test_a_clusters_shape_comes_from_its_crd_read_once(
    answer: Obj | errors.KubeError, expected: str | None
) -> None:
    api = CrdApi(answer)
    kube = cast(KubeApi, api)
    assert await served_shape(kube) == expected
    assert await served_shape(kube) == expected
    assert api.reads == 1, "kept per client"
    adapter = await TRAINJOB.on_cluster(kube)
    assert isinstance(adapter, TrainJobKind)
    assert adapter.shape == expected
    if expected is None:
        assert adapter is TRAINJOB


async def test_each_cluster_answers_for_itself() -> None:
    """A mixed fleet: the manager's Trainer and a worker's may differ."""
    old, new = CrdApi(crd("podTemplateOverrides")), CrdApi(crd("runtimePatches"))
    placed = {}
    for name, api in (("old", old), ("new", new)):
        adapter = await TRAINJOB.on_cluster(cast(KubeApi, api))
        (patch, _) = adapter.run_patches(trainjob(), {"node": PLACED})
        placed[name] = set(patch["spec"])
    assert placed == {"old": {"podTemplateOverrides"}, "new": {"runtimePatches"}}


async def test_a_passing_error_is_not_taken_for_an_answer() -> None:
    """The API server unreachable a moment: the error goes up (the job is retried), and the
    next start reads the CRD again."""
    api = CrdApi(errors.Unreachable("connection refused"))
    with pytest.raises(errors.Unreachable):
        await TRAINJOB.on_cluster(cast(KubeApi, api))
    api.answer = crd("runtimePatches")
    assert await served_shape(cast(KubeApi, api)) == PATCHES
    assert api.reads == 2
