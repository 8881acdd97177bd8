"""What a fence stops on a worker: the pods of a fenced Job that still run, never one that
already finished (a run that succeeded just before the fence is the job's result); and a
fenced Job is never started again."""

from __future__ import annotations

import pytest

from e2e.waiting import wait_for
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj
from tests.integration.controllers import builders as b
from tests.integration.controllers.conftest import StartController, create_cluster_scoped
from tests.integration.controllers.helpers import workload_of
from worker_shim.fencing import FENCED_ANNOTATION
from worker_shim.podstopping import stop_pods

pytestmark = pytest.mark.full


def job_pod(name: str, job: str) -> Obj:
    """A pod of ``job`` that no node takes (it waits, as a pod not yet started does)."""
    return {
        "metadata": {"name": name, "labels": {BATCH_JOB.pod_label: job}},
        "spec": {
            "nodeSelector": {"kfed.test/no-such-node": "true"},
            "containers": [{"name": "main", "image": "busybox"}],
            "restartPolicy": "Never",
        },
    }


async def ended(api: KubeApi, ns: str, name: str, phase: str) -> None:
    await api.patch(R.PODS, name, {"status": {"phase": phase}}, ns, subresource="status")


async def test_a_fence_stops_the_pods_that_run_and_leaves_the_finished_ones(
    api: KubeApi, ns: str
) -> None:
    """Found by the 40-job burst drill: a pod that succeeded just before its copy was fenced
    was deleted by the fence; kwok (like any deleter that drops the Job's tracking finalizer
    first) took it away before the Job counted it, the Job never completed there, and the
    manager ran the job again elsewhere."""
    for name in ("waiting", "succeeded", "failed"):
        await api.create(R.PODS, job_pod(name, "fenced"), ns)
    await api.create(R.PODS, job_pod("other-job", "not-fenced"), ns)
    await ended(api, ns, "succeeded", "Succeeded")
    await ended(api, ns, "failed", "Failed")

    stopped = await stop_pods(api, ns, f"{BATCH_JOB.pod_label}=fenced", grace_seconds=1)

    assert stopped == 1
    for name in ("succeeded", "failed", "other-job"):
        pod = await api.get(R.PODS, name, ns)
        assert not pod["metadata"].get("deletionTimestamp"), f"{name} was deleted"
    try:
        waiting = await api.get(R.PODS, "waiting", ns)
    except errors.NotFound:
        return
    assert waiting["metadata"].get("deletionTimestamp"), "the waiting pod was not stopped"


async def test_a_delete_that_holds_a_version_refuses_a_pod_that_changed(
    api: KubeApi, ns: str
) -> None:
    """The precondition the fence relies on: a pod that finished between the fence's read and
    its delete is not deleted."""
    created = await api.create(R.PODS, job_pod("racing", "fenced"), ns)
    await ended(api, ns, "racing", "Succeeded")
    with pytest.raises(errors.Conflict):
        await api.delete(
            R.PODS,
            "racing",
            ns,
            uid=created["metadata"]["uid"],
            resource_version=created["metadata"]["resourceVersion"],
        )
    assert (await api.get(R.PODS, "racing", ns))["status"]["phase"] == "Succeeded"


async def test_a_job_marked_fenced_is_never_started_though_its_workload_is_admitted(
    api: KubeApi,
    ns: str,
    unique: str,
    start_controller: StartController,
    cluster_objects: list[tuple[R.Resource, str]],
) -> None:
    """A highly available shim fences in every replica: a standby may suspend a job (marked
    fenced) a moment before the leader's cache sees its copy deactivated. The leader's job
    controller must not start it again from that stale copy: a fenced job stays stopped."""
    flavor, cq = f"f-{unique}", f"cq-{unique}"
    await create_cluster_scoped(api, R.RESOURCE_FLAVORS, b.flavor(flavor, "h100"), cluster_objects)
    await create_cluster_scoped(
        api, R.CLUSTER_QUEUES, b.cluster_queue(cq, flavor, gpus=4), cluster_objects
    )
    await api.create(R.LOCAL_QUEUES, b.local_queue(ns, "q", cq), ns)
    await start_controller()
    fenced = b.job(ns, "fenced", "q", model="h100")
    fenced["metadata"]["annotations"] = {FENCED_ANNOTATION: "manager lease of origin o expired"}
    await api.create(R.JOBS, fenced, ns)

    async def admitted(name: str) -> bool:
        wl = await workload_of(api, ns, name)
        return wl is not None and ws.is_admitted(wl)

    await wait_for(
        lambda: admitted("fenced"), timeout=60, what="the fenced job's workload admitted"
    )
    # A job admitted after it is started: the controller has looked at the fenced one by then.
    await api.create(R.JOBS, b.job(ns, "control", "q", model="h100"), ns)

    async def started(name: str) -> bool:
        return not BATCH_JOB.is_suspended(await api.get(R.JOBS, name, ns))

    await wait_for(lambda: started("control"), timeout=60, what="the unfenced job started")
    assert not await started("fenced"), "a job marked fenced was started"
