"""A queued Job's queue, changed afterwards: the doors a namespace user found (issue "Never
stuck, never a wrong result", items 1 and 2), on real control planes.

- managedBy through the back door: a suspended Job created with ``spec.managedBy:
  kueue.x-k8s.io/multikueue`` and no queue label (the creation webhook's object selector never
  sees it), then labelled with a queue without a MultiKueue check. Before: admitted there,
  unsuspended, run by nothing, its quota held for ever. Now the update webhook refuses the
  label with the reason; and where the webhook is not in the way (it fails open), the
  admission core keeps the Workload out of that queue, saying why.
- A relabelled pending Job: its Workload follows the label while it holds no quota (as
  upstream's job reconciler does); a plain Job cannot be moved into a federated queue, where
  its immutable ``managedBy`` would make it run on the manager.

The manager here has the article's federated ``gpu-lq`` and two plain queues of its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.federation import article
from tests.integration.federation.bed import Bed
from tests.integration.federation.test_never_twice_never_stuck import start

pytestmark = pytest.mark.full
NS = article.NS
Obj = dict[str, Any]
FULL_CQ, FULL_LQ = "plain-full-cq", "plain-full-lq"
"""A plain (not federated) queue with no quota: its workloads stay pending."""
FREE_CQ, FREE_LQ = "plain-free-cq", "plain-free-lq"
"""A plain queue with room."""


def plain_queue(cq: str, lq: str, cpu: int) -> list[tuple[R.Resource, Obj]]:
    return [
        (
            R.CLUSTER_QUEUES,
            {
                "apiVersion": C.API_VERSION,
                "kind": "ClusterQueue",
                "metadata": {"name": cq},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory"],
                            "flavors": [
                                {
                                    "name": "rtx-a1000",
                                    "resources": [
                                        {"name": "cpu", "nominalQuota": cpu},
                                        {"name": "memory", "nominalQuota": "64Gi"},
                                    ],
                                }
                            ],
                        }
                    ],
                },
            },
        ),
        (
            R.LOCAL_QUEUES,
            {
                "apiVersion": C.API_VERSION,
                "kind": "LocalQueue",
                "metadata": {"name": lq, "namespace": NS},
                "spec": {"clusterQueue": cq},
            },
        ),
    ]


@pytest.fixture
async def doors_bed(article_bed: Bed) -> AsyncIterator[Bed]:
    api = article_bed.manager_api
    objects = plain_queue(FULL_CQ, FULL_LQ, 0) + plain_queue(FREE_CQ, FREE_LQ, 8)
    for res, body in objects:
        namespace = body["metadata"].get("namespace")
        with contextlib.suppress(errors.AlreadyExists):
            await api.create(res, body, namespace)
    await start(article_bed)
    try:
        yield article_bed
    finally:
        await article_bed.stop_all()
        for res, body in objects:
            await api.delete(res, body["metadata"]["name"], body["metadata"].get("namespace"))


def small_job(name: str, *, queue: str | None, managed_by: str | None = None) -> Obj:
    """A suspended one-pod cpu Job; ``queue=None``: no queue label (no webhook sees it)."""
    spec: Obj = {
        "suspend": True,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "c",
                        "image": "busybox",
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                    }
                ],
            }
        },
    }
    if managed_by:
        spec["managedBy"] = managed_by
    labels = {C.QUEUE_NAME_LABEL: queue} if queue else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": spec,
    }


async def relabel(api: KubeApi, name: str, queue: str) -> Obj:
    return await api.patch(R.JOBS, name, {"metadata": {"labels": {C.QUEUE_NAME_LABEL: queue}}}, NS)


async def workload(api: KubeApi, job_name: str) -> Obj | None:
    job = await api.get(R.JOBS, job_name, NS)
    with contextlib.suppress(errors.NotFound):
        return await api.get(
            R.WORKLOADS, ws.workload_name_for_job(job_name, job["metadata"]["uid"]), NS
        )
    return None


def quota_reserved(wl: Obj) -> Obj | None:
    for cond in ws.status_of(wl).get("conditions") or []:
        if cond.get("type") == C.QUOTA_RESERVED:
            return dict(cond)
    return None


async def test_a_multikueue_job_labelled_afterwards_with_a_plain_queue_is_refused(
    doors_bed: Bed,
) -> None:
    """Item 1 with the manager's webhook in place: the label is refused with the reason, and
    the Job stays out of every queue."""
    api = doors_bed.manager_api
    await api.create(
        R.JOBS, small_job("back-door", queue=None, managed_by=C.MULTIKUEUE_MANAGED_BY), NS
    )
    with pytest.raises(errors.KubeError) as refused:
        await relabel(api, "back-door", FREE_LQ)
    assert "nothing would ever run this Job" in str(refused.value), refused.value
    assert f"{NS}/{FREE_LQ}" in str(refused.value)
    job = await api.get(R.JOBS, "back-door", NS)
    assert C.QUEUE_NAME_LABEL not in (job["metadata"].get("labels") or {})
    assert await workload(api, "back-door") is None


async def test_a_multikueue_job_that_got_past_the_webhook_never_takes_a_plain_queues_quota(
    doors_bed: Bed,
) -> None:
    """Item 1 where the webhook is not in the way (its update hook fails open; a cluster
    may run without it): the Workload is made, but the core keeps it out of the plain queue,
    Inadmissible with a reason that names managedBy; nothing is reserved, the Job stays
    suspended. Moved to the federated queue, it runs on a worker."""
    bed = doors_bed
    api = bed.manager_api
    assert bed.webhook is not None
    await bed.webhook.unregister()
    await api.create(
        R.JOBS, small_job("escaped", queue=None, managed_by=C.MULTIKUEUE_MANAGED_BY), NS
    )
    await relabel(api, "escaped", FREE_LQ)

    async def held_out() -> Obj | None:
        wl = await workload(api, "escaped")
        cond = quota_reserved(wl) if wl is not None else None
        if cond is None or cond.get("status") != "False":
            return None
        return cond if "spec.managedBy" in str(cond.get("message")) else None

    cond = await wait_for(held_out, timeout=30, what="the Workload held out, saying why")
    assert cond is not None and cond["reason"] == C.REASON_INADMISSIBLE, cond
    assert FREE_CQ in cond["message"], cond
    wl = await workload(api, "escaped")
    assert wl is not None and not ws.has_reservation(wl)
    cq = await api.get(R.CLUSTER_QUEUES, FREE_CQ)
    assert not (cq.get("status") or {}).get("reservingWorkloads"), cq.get("status")
    assert (await api.get(R.JOBS, "escaped", NS))["spec"]["suspend"] is True

    await relabel(api, "escaped", "gpu-lq")

    async def placed() -> str | None:
        found = await workload(api, "escaped")
        return str(ws.status_of(found).get("clusterName") or "") or None if found else None

    assert await wait_for(placed, timeout=60, what="moved to gpu-lq and placed on a worker")


async def test_a_pending_jobs_workload_follows_its_queue_label(doors_bed: Bed) -> None:
    """Item 2. Before: the Workload's queue was written only at creation, so a Job moved from
    a full queue to a free one stayed pending in the full one (and ran there once it freed
    up, whatever its label said)."""
    api = doors_bed.manager_api
    await api.create(R.JOBS, small_job("relabelled", queue=FULL_LQ), NS)

    async def pending_in_full() -> bool:
        wl = await workload(api, "relabelled")
        cond = quota_reserved(wl) if wl is not None else None
        return cond is not None and cond.get("status") == "False"

    await wait_for(pending_in_full, timeout=30, what="pending in the full queue")
    await relabel(api, "relabelled", FREE_LQ)

    async def admitted_in_free() -> Obj | None:
        wl = await workload(api, "relabelled")
        if wl is None or ws.cluster_queue_of(wl) != FREE_CQ:
            return None
        return wl if ws.has_reservation(wl) else None

    wl = await wait_for(admitted_in_free, timeout=30, what="admitted through the new queue")
    assert wl is not None and wl["spec"]["queueName"] == FREE_LQ


async def test_a_plain_pending_job_cannot_be_moved_into_a_federated_queue(doors_bed: Bed) -> None:
    """Item 2's other half: without ``managedBy`` (immutable) a Job in a federated queue
    would run on the manager; the relabel is refused with what to do, and it stays put."""
    api = doors_bed.manager_api
    await api.create(R.JOBS, small_job("stays", queue=FULL_LQ), NS)
    await wait_for(lambda: workload(api, "stays"), timeout=30, what="its Workload")
    with pytest.raises(errors.KubeError) as refused:
        await relabel(api, "stays", "gpu-lq")
    assert "submit it again" in str(refused.value), refused.value
    wl = await workload(api, "stays")
    assert wl is not None and wl["spec"]["queueName"] == FULL_LQ
