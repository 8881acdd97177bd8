"""RayJobs federated like Jobs, under the real KubeRay operator on the workers (v1.6.2, the
bed's newest set; the manager has only its CRDs): placed whole on one H100 worker with room
for every pod set (head, worker group, submitter), their RayCluster and pods made and run
there by KubeRay, their status back on the manager's RayJob, finished from it, and moved
once, never twice, when their worker is cut off.

No Ray runs on kwok: the head's dashboard (port 8265), which KubeRay asks how the Ray job
goes, never answers. What the real operator then decides on its own is
``test_the_rayjob_example_runs_through_kfed_submit_and_kuberay_fails_it_without_ray``: the
submitter Job (``ray job submit``) that kwok completes, and 30 s later KubeRay fails the
RayJob, its Ray job never seen to end. To reach a RayJob that succeeded,
``test_upstream_a_rayjob_runs_on_one_h100_worker_and_ends_complete_with_its_status``
stands in for the Ray runtime: it writes on the worker's RayJob what KubeRay copies from
the dashboard when a Ray job ends (``jobStatus: SUCCEEDED``, ``rayJobInfo.endTime``), and
KubeRay itself, by its own rule for a Ray job ended while the RayJob still runs (with the
bed's grace period of 0 s, ``RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS``),
makes it ``Complete``. Everything else (placement, the RayCluster, the submitter Job, the
pods, suspension, fencing, the status back) is the real operator's and kfed's."""

from __future__ import annotations

import datetime
import time
from collections.abc import Awaitable
from typing import Any

import pytest

from e2e.examples import JOBS
from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.base import Outcome
from manager.controllers.jobkinds.raycluster import RAYCLUSTER
from manager.controllers.jobkinds.rayjob import RAYJOB
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.controllers.builders import pod_template
from tests.integration.federation import article
from tests.integration.federation.bed import Bed
from tests.integration.federation.cutting import cut_until_moved
from tests.integration.federation.runs import RunWatch
from tests.integration.federation.test_drill import kfed
from tests.integration.federation.test_job_kinds import (
    H100_WORKERS,
    ended,
    example,
    nothing_of,
    other_h100,
    placed_on,
    workload_of,
)
from tests.integration.federation.test_never_twice_never_stuck import start

pytestmark = pytest.mark.full
NS = article.NS
Obj = dict[str, Any]
LABEL = "kfed-test/rayjob"
"""Each pod template's label naming its RayJob (KubeRay's own pod labels name the RayCluster,
whose name it generates anew on each worker)."""
CLUSTER_PODS = 3
"""A head and two GPU workers."""


def rayjob(name: str, *, submitter_ms: int = 600_000, **spec: Any) -> Obj:
    """A head (cpu) and a group of two one-H100 workers, and a submitter that kwok keeps
    running for ``submitter_ms``."""

    def template(gpus: int) -> Obj:
        pod = pod_template(gpus, model="h100")
        pod["spec"].pop("restartPolicy")
        pod["spec"]["containers"][0].update(name="ray", image="rayproject/ray")
        pod["metadata"] = {"labels": {LABEL: name}}
        return pod

    submitter = pod_template(0, delay_ms=submitter_ms)
    submitter["spec"]["containers"][0].update(name="ray-job-submitter", image="rayproject/ray")
    submitter["metadata"]["labels"] = {LABEL: name}
    return {
        "apiVersion": RAYJOB.resource.api_version,
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": NS, "labels": {C.QUEUE_NAME_LABEL: "gpu-lq"}},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "shutdownAfterJobFinishes": True,
            "submitterPodTemplate": submitter,
            "rayClusterSpec": {
                "headGroupSpec": {"rayStartParams": {}, "template": template(0)},
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "replicas": 2,
                        "minReplicas": 0,
                        "maxReplicas": 2,
                        "rayStartParams": {},
                        "template": template(1),
                    }
                ],
            },
            **spec,
        },
    }


async def cluster_pods(api: KubeApi, selector: str) -> int:
    """Pods of its RayCluster (not its submitter) Running there, not deleting."""
    pods = (await api.list(R.PODS, NS, label_selector=f"{selector},ray.io/node-type"))["items"]
    return sum(
        1
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    )


async def deployment_status(api: KubeApi, name: str) -> str:
    try:
        job = await api.get(RAYJOB.resource, name, NS)
    except errors.NotFound:
        return ""
    return str((job.get("status") or {}).get("jobDeploymentStatus") or "")


async def delete_everywhere(bed: Bed, name: str) -> None:
    """Delete it on the manager; its copies go from the workers."""
    await bed.manager_api.delete(RAYJOB.resource, name, NS)

    async def gone() -> bool:
        return not await nothing_of(bed, RAYJOB, name)

    await wait_for(gone, timeout=60, what=f"RayJob {name} gone from the workers")


async def test_upstream_a_rayjob_runs_on_one_h100_worker_and_ends_complete_with_its_status(
    article_bed: Bed,
) -> None:
    """Upstream's MultiKueue "Should run a RayJob on worker if admitted": suspended and given
    MultiKueue's ``managedBy`` by the webhook, its Workload has upstream's pod sets (head,
    the worker group, the submitter); placed whole on one H100 worker, where KubeRay makes
    its RayCluster (3 pods running) and its submitter Job, all under the H100 flavor's node
    selector; the worker's status comes back to the manager's RayJob. The test then stands
    in for Ray (module docstring): it writes the Ray job's end as KubeRay copies it from the
    dashboard; KubeRay makes the RayJob Complete and deletes its RayCluster
    (``shutdownAfterJobFinishes``); the manager's RayJob is Complete, its Workload Finished,
    its copies removed."""
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    name = "rayjob-one"
    async with RunWatch(bed.worker_apis, NS, label=LABEL) as runs:
        submitted = time.monotonic()
        await api.create(RAYJOB.resource, rayjob(name), NS)
        created = await api.get(RAYJOB.resource, name, NS)
        assert created["spec"]["suspend"] is True
        assert created["spec"]["managedBy"] == C.MULTIKUEUE_MANAGED_BY
        wl = await wait_for(lambda: workload_of(api, RAYJOB, name), timeout=60, what="Workload")
        assert wl is not None
        pod_sets = {ps["name"]: ps["count"] for ps in wl["spec"]["podSets"]}
        assert pod_sets == {"head": 1, "gpu": 2, "submitter": 1}
        worker = await wait_for(lambda: placed_on(api, RAYJOB, name), timeout=60, what="placed")
        assert worker in H100_WORKERS
        wapi = bed.worker_apis[worker]

        async def all_running() -> bool:
            return await cluster_pods(wapi, f"{LABEL}={name}") == CLUSTER_PODS

        await wait_for(all_running, timeout=90, interval=0.2, what="the RayCluster's pods running")
        print(f"rayjob: submit -> RayCluster pods running on {worker}: "
              f"{time.monotonic() - submitted:.1f}s")  # fmt: skip

        async def running_on_manager() -> bool:
            return await deployment_status(api, name) == "Running"

        await wait_for(running_on_manager, timeout=60, what="the manager's RayJob Running")
        remote = await wapi.get(RAYJOB.resource, name, NS)
        # Resumed (KubeRay's own writes drop a false ``suspend``: omitempty), no managedBy.
        assert not remote["spec"].get("suspend") and "managedBy" not in remote["spec"]
        cluster = remote["status"]["rayClusterName"]
        assert (await api.get(RAYJOB.resource, name, NS))["status"]["rayClusterName"] == cluster
        submitter = await wapi.get(R.JOBS, name, NS)  # KubeRay's, named as the RayJob
        assert submitter["spec"]["template"]["spec"]["nodeSelector"] == {"gpu.model": "h100"}
        here = (await api.list(RAYCLUSTER.resource, NS))["items"]
        assert not [c for c in here if c["metadata"]["name"] == cluster], "none on the manager"

        # Ray's part, as KubeRay would copy it from the dashboard: the Ray job ended.
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        ray_ended = {"jobStatus": "SUCCEEDED", "message": "ran", "rayJobInfo": {"endTime": now}}
        await wapi.patch(RAYJOB.resource, name, {"status": ray_ended}, NS, subresource="status")
        done = await ended(api, RAYJOB, name)
        assert done is True
        print(f"rayjob: submit -> Complete on the manager: {time.monotonic() - submitted:.1f}s")
        status = (await api.get(RAYJOB.resource, name, NS))["status"]
        assert status["jobDeploymentStatus"] == "Complete" and status["jobStatus"] == "SUCCEEDED"

        async def finished() -> bool:
            found = await workload_of(api, RAYJOB, name)
            return found is not None and ws.is_finished(found)

        await wait_for(finished, timeout=30, what="its Workload Finished")
        assert runs.clusters_of(name) == {worker}, "every pod set ran on that one worker"
        assert not runs.double_runs()

        async def copies_gone() -> bool:
            return not await nothing_of(bed, RAYJOB, name)

        await wait_for(copies_gone, timeout=60, what="its copies removed once finished")
    await api.delete(RAYJOB.resource, name, NS)


async def test_a_running_rayjob_cut_off_with_its_worker_is_fenced_and_runs_once_elsewhere(
    article_bed: Bed,
) -> None:
    """The fast policy's partition failover, as for a Job: its RayCluster runs on one H100
    worker, which is cut off; the worker fences the RayJob (suspended: KubeRay deletes its
    RayCluster and submitter, their pods stop), and only then does it run on the other H100
    worker, whole (a new RayCluster there), never on two workers at once."""
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    name = "rayjob-cut"
    selector = f"{LABEL}={name}"
    async with RunWatch(bed.worker_apis, NS, label=LABEL) as runs:
        await api.create(RAYJOB.resource, rayjob(name), NS)
        first = await wait_for(lambda: placed_on(api, RAYJOB, name), timeout=60, what="placed")
        assert first is not None
        other = other_h100(first)

        def count(worker: KubeApi) -> Awaitable[int]:
            return cluster_pods(worker, selector)

        async with cut_until_moved(bed, first, other, count, CLUSTER_PODS, what="rayjob"):
            fenced = await bed.worker_apis[first].get(RAYJOB.resource, name, NS)
            assert fenced["spec"]["suspend"] is True
            assert C.FENCED_ANNOTATION in fenced["metadata"].get("annotations", {})
        assert await placed_on(api, RAYJOB, name) == other
    assert not runs.double_runs(), "pods of the RayJob ran on two workers at once"
    assert runs.clusters_of(name) == {first, other}
    await delete_everywhere(bed, name)


async def test_upstream_a_rayjob_that_keeps_its_cluster_is_refused_with_upstreams_reason(
    article_bed: Bed,
) -> None:
    """Upstream's RayJob webhook: a queued RayJob must delete its cluster once it finishes
    (else it holds the queue's quota): refused, in upstream's words; nothing is made."""
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    with pytest.raises(errors.KubeError) as refused:
        await api.create(
            RAYJOB.resource, rayjob("rayjob-keeps", shutdownAfterJobFinishes=False), NS
        )
    assert (
        "spec.shutdownAfterJobFinishes: Invalid value: false: a kueue managed job should "
        "delete the cluster after finishing" in refused.value.message
    ), refused.value.message
    with pytest.raises(errors.NotFound):
        await api.get(RAYJOB.resource, "rayjob-keeps", NS)


async def test_the_rayjob_example_runs_through_kfed_submit_and_kuberay_fails_it_without_ray(
    article_bed: Bed,
) -> None:
    """``examples/jobs/rayjob-h100.yaml`` as documented: ``kfed submit``; it runs whole on one
    H100 worker (KubeRay's default submitter, placed by kfed as upstream places it). With no
    Ray there, the real operator decides the end: kwok completes the submitter Job, the Ray
    job is never seen to end, and 30 s later KubeRay fails the RayJob; that Failed status
    comes back to the manager's RayJob and finishes its Workload, failed."""
    bed = article_bed
    api = bed.manager_api
    await start(bed)
    file = "rayjob-h100.yaml"
    name = example(file)["metadata"]["name"]
    submitted = time.monotonic()
    code, out, err = await kfed(bed, "submit", str(JOBS / file), "--timeout", "90s")
    assert code == 0, (out, err)
    assert f"created RayJob {NS}/{name}" in out, out
    worker = await placed_on(api, RAYJOB, name)
    assert worker in H100_WORKERS
    wapi = bed.worker_apis[worker]
    remote = await wapi.get(RAYJOB.resource, name, NS)
    submitter = remote["spec"]["submitterPodTemplate"]["spec"]
    assert submitter["containers"][0]["name"] == "ray-job-submitter"
    assert submitter["nodeSelector"] == {"gpu.model": "h100"}

    async def how_it_ended() -> Outcome | None:
        return RAYJOB.outcome(await api.get(RAYJOB.resource, name, NS))

    found = await wait_for(how_it_ended, timeout=90, what=f"RayJob {name} ended")
    assert found is not None and not found.succeeded
    print(f"rayjob example: submit -> Failed by KubeRay: {time.monotonic() - submitted:.1f}s")
    status = (await api.get(RAYJOB.resource, name, NS))["status"]
    assert status["jobDeploymentStatus"] == "Failed", status
    assert "did not reach terminal state" in status["message"], status

    async def finished_failed() -> bool:
        found = await workload_of(api, RAYJOB, name)
        return found is not None and ws.is_finished(found)

    await wait_for(finished_failed, timeout=30, what="its Workload Finished")
    await delete_everywhere(bed, name)
