"""LeaderWorkerSets federated under the real lws operator on the workers (the bed runs it,
``e2e/local/operators.py``; the manager has only its CRD): held at zero groups by the
manager's webhook (a LeaderWorkerSet has no ``suspend``), placed whole on one worker with room
for every group, served there, its status (``readyReplicas``, ...) back on the manager's
object, and moved once, never twice, when its worker is cut off: the lost worker scales its
copy to zero before the other one runs it. The bed and helpers are ``test_job_kinds.py``'s."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Any

import pytest

from e2e.examples import JOBS
from e2e.waiting import wait_for
from manager.api import constants as C
from manager.api.view import annotations_of, at
from manager.controllers.jobkinds.heldbyreplicas import (
    HELD_REPLICAS_ANNOTATION,
    MANAGED_BY_ANNOTATION,
)
from manager.controllers.jobkinds.leaderworkerset import LEADERWORKERSET
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.federation import article
from tests.integration.federation.bed import Bed
from tests.integration.federation.cutting import cut_until_moved
from tests.integration.federation.runs import RunWatch
from tests.integration.federation.test_drill import kfed
from tests.integration.federation.test_job_kinds import (
    H100_WORKERS,
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
LWS = LEADERWORKERSET
GROUPS, SIZE = 2, 3
PODS = GROUPS * SIZE
"""Two groups of a cpu-only leader and two workers of one H100 GPU each: 6 pods, 4 GPUs."""


def pod(gpus: int) -> Obj:
    requests = {"cpu": "1", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    resources: Obj = {"requests": requests, **({"limits": limits} if limits else {})}
    container = {"name": "serve", "image": "busybox", "resources": resources}
    spec: Obj = {"containers": [container]}  # a StatefulSet's pods: restartPolicy Always
    if gpus:
        spec["nodeSelector"] = {"gpu.model": "h100"}
    return {"spec": spec}


def leaderworkerset(name: str) -> Obj:
    return {
        "apiVersion": LWS.resource.api_version,
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": NS, "labels": {C.QUEUE_NAME_LABEL: "gpu-lq"}},
        "spec": {
            "replicas": GROUPS,
            "leaderWorkerTemplate": {
                "size": SIZE,
                "leaderTemplate": pod(0),
                "workerTemplate": pod(1),
            },
        },
    }


async def running_pods(api: KubeApi, name: str) -> int:
    pods = (await api.list(R.PODS, NS, label_selector=LWS.pod_selector(name)))["items"]
    return sum(
        1
        for p in pods
        if at(p, "status").get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    )


async def ready_groups(api: KubeApi, name: str) -> int:
    return int(at(await api.get(LWS.resource, name, NS), "status").get("readyReplicas") or 0)


async def test_a_leaderworkerset_serves_whole_on_one_worker_with_its_status_on_the_manager(
    article_bed: Bed,
) -> None:
    """Held by the webhook (zero groups, the two it asks for in ``kfed.io/held-replicas``,
    MultiKueue's ``managedBy`` in ``kfed.io/managed-by``); ONE Workload of upstream's pod sets
    with both groups in them; placed whole on one H100 worker, where the copy (held, without
    ``managedBy``) is given its two groups once admitted and all six pods serve; the manager's
    object stays held (nothing of it may run there) and shows the worker's status (both
    groups ready). Deleted on the manager, it goes from the worker."""
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    name = "lws-one"
    async with RunWatch(bed.worker_apis, NS, label=LWS.pod_label) as runs:
        submitted = time.monotonic()
        await api.create(LWS.resource, leaderworkerset(name), NS)
        created = await api.get(LWS.resource, name, NS)
        assert created["spec"]["replicas"] == 0
        assert annotations_of(created)[HELD_REPLICAS_ANNOTATION] == str(GROUPS)
        assert annotations_of(created)[MANAGED_BY_ANNOTATION] == C.MULTIKUEUE_MANAGED_BY
        wl = await wait_for(lambda: workload_of(api, LWS, name), timeout=60, what="its Workload")
        assert wl is not None
        pod_sets = {ps["name"]: ps["count"] for ps in wl["spec"]["podSets"]}
        assert pod_sets == {"leader": GROUPS, "worker": GROUPS * (SIZE - 1)}
        worker = await wait_for(lambda: placed_on(api, LWS, name), timeout=60, what="placed")
        assert worker in H100_WORKERS
        wapi = bed.worker_apis[worker]

        async def all_running() -> bool:
            return await running_pods(wapi, name) == PODS

        await wait_for(all_running, timeout=120, interval=0.2, what=f"all {PODS} pods running")
        print(
            f"lws: submit -> all {PODS} pods running on {worker}: "
            f"{time.monotonic() - submitted:.1f}s"
        )
        remote = await wapi.get(LWS.resource, name, NS)
        assert remote["spec"]["replicas"] == GROUPS
        assert HELD_REPLICAS_ANNOTATION not in annotations_of(remote)
        assert MANAGED_BY_ANNOTATION not in annotations_of(remote)

        async def ready_on_manager() -> bool:
            return await ready_groups(api, name) == GROUPS

        await wait_for(ready_on_manager, timeout=90, what="the manager's object: 2 groups ready")
        print(
            f"lws: submit -> readyReplicas {GROUPS} on the manager: "
            f"{time.monotonic() - submitted:.1f}s"
        )
        mine = await api.get(LWS.resource, name, NS)
        assert mine["spec"]["replicas"] == 0, "held on the manager: its worker serves it"
        assert annotations_of(mine)[HELD_REPLICAS_ANNOTATION] == str(GROUPS)
        assert at(mine, "status").get("replicas") == GROUPS
        assert runs.clusters_of(name) == {worker}, "every group on that one worker"
        assert await nothing_of(bed, LWS, name) == [worker]
    await api.delete(LWS.resource, name, NS)

    async def gone_everywhere() -> bool:
        return not await nothing_of(bed, LWS, name)

    await wait_for(gone_everywhere, timeout=60, what="the LeaderWorkerSet gone from the worker")


async def test_a_serving_leaderworkerset_cut_off_with_its_worker_serves_once_elsewhere(
    article_bed: Bed,
) -> None:
    """The fast policy's partition failover, as for a Job: all six pods serve on one H100
    worker, which is cut off; the worker fences its copy (scaled to zero groups, its pods
    stop), and only then does it serve on the other H100 worker, whole, never on two workers
    at once; the manager's object shows the new worker's ready groups."""
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    name = "lws-cut"
    async with RunWatch(bed.worker_apis, NS, label=LWS.pod_label) as runs:
        await api.create(LWS.resource, leaderworkerset(name), NS)
        first = await wait_for(lambda: placed_on(api, LWS, name), timeout=60, what="placed")
        assert first is not None
        other = other_h100(first)

        def count(worker: KubeApi) -> Awaitable[int]:
            return running_pods(worker, name)

        moving = cut_until_moved(bed, first, other, count, PODS, what="lws", timeout=120)
        async with moving as cut:
            fenced = await bed.worker_apis[first].get(LWS.resource, name, NS)
            assert fenced["spec"]["replicas"] == 0
            assert annotations_of(fenced)[HELD_REPLICAS_ANNOTATION] == str(GROUPS)

        async def moved_on_manager() -> bool:
            return await placed_on(api, LWS, name) == other and (
                await ready_groups(api, name) == GROUPS
            )

        await wait_for(moved_on_manager, timeout=90, what=f"the manager's object on {other}")
        print(
            f"lws: cut -> readyReplicas {GROUPS} from {other} on the manager: "
            f"{time.monotonic() - cut:.1f}s"
        )
    assert not runs.double_runs(), "pods of the LeaderWorkerSet served on two workers at once"
    assert runs.clusters_of(name) == {first, other}
    await api.delete(LWS.resource, name, NS)


async def test_the_leaderworkerset_example_serves_through_kfed_submit(article_bed: Bed) -> None:
    """``examples/jobs/leaderworkerset-h100.yaml`` as documented: ``kfed submit`` holds it (zero
    groups) and it serves whole on one H100 worker, its groups ready on the manager."""
    bed = article_bed
    api = bed.manager_api
    await start(bed)
    file = "leaderworkerset-h100.yaml"
    body = example(file)
    name = body["metadata"]["name"]
    groups = int(body["spec"]["replicas"])
    code, out, err = await kfed(bed, "submit", str(JOBS / file), "--timeout", "90s")
    assert code == 0, (out, err)
    assert f"created LeaderWorkerSet {NS}/{name}" in out, out
    assert await placed_on(api, LWS, name) in H100_WORKERS

    async def ready_on_manager() -> bool:
        return await ready_groups(api, name) == groups

    await wait_for(ready_on_manager, timeout=120, what=f"{name}: {groups} groups ready")
    await api.delete(LWS.resource, name, NS)
