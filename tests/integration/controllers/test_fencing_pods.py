"""What a fence stops on a worker: the pods of a fenced Job that still run, never one that
already finished (a run that succeeded just before the fence is the job's result)."""

from __future__ import annotations

import pytest

from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj
from worker_shim.fencing import stop_pods

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
