"""The full bed's batch operators run for real on a worker, with no kfed involved: JobSet runs a
JobSet to completion, Kubeflow Trainer a TrainJob (through a JobSet) on a stock
ClusterTrainingRuntime the bed installed, KubeRay brings a RayCluster to ready, the
training-operator and the MPI operator a PyTorchJob and an MPIJob to Succeeded, lws a
LeaderWorkerSet to ready (and to no pod at all at zero groups); kwok plays the
kubelet (pods of Jobs and PyTorchJobs complete after their pod-complete delay, other pods stay
Running)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from e2e.local.federation import LocalFederation
from e2e.waiting import wait_for
from manager.kube import resources as R
from manager.kube.api import KubeApi

pytestmark = pytest.mark.full

WORKER = "worker-1"
JOBSETS = R.Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", True)
TRAINJOBS = R.Resource("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", True)
RUNTIMES = R.Resource(
    "trainer.kubeflow.org",
    "v1alpha1",
    "clustertrainingruntimes",
    "ClusterTrainingRuntime",
    False,
)
RAYCLUSTERS = R.Resource("ray.io", "v1", "rayclusters", "RayCluster", True)
# kwok completes a pod of a Job this long after it runs (e2e/local/kwok-stages.yaml).
QUICK = {"pod-complete.stage.kwok.x-k8s.io/delay": "500"}


@pytest.fixture
async def worker(
    full_federation: LocalFederation, unique: str
) -> AsyncIterator[tuple[KubeApi, str]]:
    """A client of one worker and a namespace of this test's own, deleted afterwards."""
    async with await KubeApi.from_kubeconfig_file(full_federation.kubeconfig(WORKER)) as api:
        ns = f"operators-{unique}"
        await api.create(R.NAMESPACES, {"metadata": {"name": ns}})
        try:
            yield api, ns
        finally:
            await api.delete(R.NAMESPACES, ns)


def condition(obj: dict[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


async def test_jobset_of_two_replicas_completes(worker: tuple[KubeApi, str]) -> None:
    api, ns = worker
    pod = {
        "metadata": {"annotations": QUICK},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox:1.36", "command": ["true"]}],
        },
    }
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "probe", "namespace": ns},
        "spec": {
            "replicatedJobs": [
                {"name": "workers", "replicas": 2, "template": {"spec": {"template": pod}}}
            ]
        },
    }
    created = await api.create(JOBSETS, jobset)
    # JobSet's defaulting webhook ran (the controller needs spec.network it fills in).
    assert "network" in created["spec"]

    async def completed() -> dict[str, Any] | None:
        js = await api.get(JOBSETS, "probe", ns)
        return js if condition(js, "Completed") else None

    done = await wait_for(completed, timeout=90, what="JobSet Completed")
    assert done["status"].get("terminalState") == "Completed"
    pods = await api.list(R.PODS, ns, label_selector="jobset.sigs.k8s.io/jobset-name=probe")
    assert len(pods["items"]) == 2
    assert {p["status"]["phase"] for p in pods["items"]} == {"Succeeded"}


async def test_trainjob_on_a_stock_runtime_completes(worker: tuple[KubeApi, str]) -> None:
    api, ns = worker
    # Installed by the bed from the trainer's cached runtimes/ (build-operators.sh).
    runtime = await api.get(RUNTIMES, "torch-distributed")
    assert runtime["spec"]["template"]["spec"]["replicatedJobs"]
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "probe", "namespace": ns},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": 2, "command": ["python", "-c", "print('hi')"]},
        },
    }
    await api.create(TRAINJOBS, trainjob)

    async def complete() -> bool:
        return condition(await api.get(TRAINJOBS, "probe", ns), "Complete")

    await wait_for(complete, timeout=120, what="TrainJob Complete")
    # It ran as a JobSet of the same name, which the JobSet controller completed.
    assert condition(await api.get(JOBSETS, "probe", ns), "Completed")


async def test_raycluster_with_one_worker_becomes_ready(worker: tuple[KubeApi, str]) -> None:
    api, ns = worker

    def group(name: str, cpu: str, memory: str) -> dict[str, Any]:
        resources = {"cpu": cpu, "memory": memory}
        container = {
            "name": name,
            "image": "rayproject/ray:2.46.0",
            "resources": {"requests": resources, "limits": resources},
        }
        return {"rayStartParams": {}, "template": {"spec": {"containers": [container]}}}

    raycluster = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "probe", "namespace": ns},
        "spec": {
            "rayVersion": "2.46.0",
            "headGroupSpec": group("ray-head", "1", "2Gi"),
            "workerGroupSpecs": [
                {
                    "groupName": "small",
                    "replicas": 1,
                    "minReplicas": 0,
                    "maxReplicas": 2,
                    **group("ray-worker", "1", "1Gi"),
                }
            ],
        },
    }
    await api.create(RAYCLUSTERS, raycluster)

    async def ready() -> dict[str, Any] | None:
        rc = await api.get(RAYCLUSTERS, "probe", ns)
        return rc if (rc.get("status") or {}).get("state") == "ready" else None

    done = await wait_for(ready, timeout=90, what="RayCluster ready")
    assert done["status"].get("availableWorkerReplicas") == 1
    pods = (await api.list(R.PODS, ns, label_selector="ray.io/cluster=probe"))["items"]
    assert sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in pods) == ["head", "worker"]


PYTORCHJOBS = R.Resource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", True)
MPIJOBS = R.Resource("kubeflow.org", "v2beta1", "mpijobs", "MPIJob", True)


def replica(replicas: int, container: str, annotations: dict[str, str] | None) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "spec": {
            "containers": [
                {"name": container, "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
            ]
        }
    }
    if annotations:
        pod["metadata"] = {"annotations": annotations}
    return {"replicas": replicas, "template": pod}


async def test_pytorchjob_of_a_master_and_two_workers_succeeds(
    worker: tuple[KubeApi, str],
) -> None:
    """The training-operator runs it (its pods are its own: kwok completes pods owned by a
    PyTorchJob as a Job's); it succeeds when its master does."""
    api, ns = worker
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "probe", "namespace": ns},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": replica(1, "pytorch", QUICK),
                "Worker": replica(2, "pytorch", QUICK),
            }
        },
    }
    await api.create(PYTORCHJOBS, job)

    async def succeeded() -> bool:
        return condition(await api.get(PYTORCHJOBS, "probe", ns), "Succeeded")

    await wait_for(succeeded, timeout=120, what="PyTorchJob Succeeded")
    status = (await api.get(PYTORCHJOBS, "probe", ns))["status"]
    # The master decides: the workers' own successes may be counted after it.
    assert status["replicaStatuses"]["Master"]["succeeded"] == 1


async def test_mpijob_succeeds_when_its_launcher_job_completes(
    worker: tuple[KubeApi, str],
) -> None:
    """The MPI operator runs its launcher as a batch/v1 Job (which kwok completes) beside its
    two worker pods (which stay Running); it succeeds with the launcher, and cleanPodPolicy
    Running removes the workers."""
    api, ns = worker
    job = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "probe", "namespace": ns},
        "spec": {
            "slotsPerWorker": 1,
            "runPolicy": {"cleanPodPolicy": "Running"},
            "mpiReplicaSpecs": {
                "Launcher": replica(1, "launcher", QUICK),
                "Worker": replica(2, "worker", None),
            },
        },
    }
    await api.create(MPIJOBS, job)

    async def succeeded() -> bool:
        return condition(await api.get(MPIJOBS, "probe", ns), "Succeeded")

    await wait_for(succeeded, timeout=120, what="MPIJob Succeeded")
    assert condition(await api.get(R.JOBS, "probe-launcher", ns), "Complete")

    async def workers_gone() -> bool:
        selector = "training.kubeflow.org/job-name=probe,training.kubeflow.org/job-role=worker"
        return not (await api.list(R.PODS, ns, label_selector=selector))["items"]

    await wait_for(workers_gone, timeout=60, what="its workers removed (cleanPodPolicy)")


LWS = R.Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", True)


async def test_leaderworkerset_of_two_groups_becomes_ready_and_scales_to_zero(
    worker: tuple[KubeApi, str],
) -> None:
    """The lws operator makes each group a leader pod and a StatefulSet of its workers; kwok
    keeps them Running and Ready, so both groups are ready. Scaled to zero groups (how kfed
    holds one), every pod goes: the leaders with their StatefulSet, each group's workers with
    theirs (owned by its leader pod, removed by the garbage collector)."""
    api, ns = worker
    pod = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "probe", "namespace": ns},
        "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3, "workerTemplate": pod}},
    }
    await api.create(LWS, lws)
    selector = "leaderworkerset.sigs.k8s.io/name=probe"

    async def ready() -> bool:
        status = (await api.get(LWS, "probe", ns)).get("status") or {}
        return status.get("readyReplicas") == 2

    await wait_for(ready, timeout=120, what="LeaderWorkerSet of 2 groups ready")
    assert len((await api.list(R.PODS, ns, label_selector=selector))["items"]) == 6
    await api.patch(LWS, "probe", {"spec": {"replicas": 0}}, ns)

    async def no_pods() -> bool:
        return not (await api.list(R.PODS, ns, label_selector=selector))["items"]

    await wait_for(no_pods, timeout=120, what="every pod gone at zero groups")
