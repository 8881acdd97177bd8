"""StatefulSets and Deployments federated as serving (the article's urgent inference recovery,
``jobkinds/serving.py``): on the full bed every cluster runs kube-controller-manager's
StatefulSet, Deployment and ReplicaSet controllers, the manager included (it has no nodes,
so a pod made there would show as Pending). Each set is held at zero replicas on the manager
for life (no pod there, ever), placed whole on one H100 worker with room for every pod, runs
there (kwok keeps its pods Running and Ready), and its replica counts come back to the
manager's annotation ``kfed.io/worker-status``; its Workload holds the quota until the set
is deleted. Cut off with its worker, the copy there is fenced (scaled to zero, its pods
gone) before the other H100 worker runs it, whole. The bed and helpers are
``test_job_kinds.py``'s."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from e2e.examples import JOBS
from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.heldbyreplicas import (
    HELD_REPLICAS_ANNOTATION,
    MANAGED_BY_ANNOTATION,
)
from manager.controllers.jobkinds.serving import (
    DEPLOYMENT,
    STATEFULSET,
    WORKER_STATUS_ANNOTATION,
    ServingKind,
)
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.controllers.builders import pod_template
from tests.integration.federation import article
from tests.integration.federation.bed import Bed
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
from tests.integration.federation.test_kubeflow_kinds import running_pods
from tests.integration.federation.test_never_twice_never_stuck import start

pytestmark = pytest.mark.full
NS = article.NS
Obj = dict[str, Any]
KINDS = {"statefulset": STATEFULSET, "deployment": DEPLOYMENT}
REPLICAS = 3


def serving_set(kind: ServingKind, name: str, replicas: int = REPLICAS) -> Obj:
    """``replicas`` pods of one H100 GPU each, in the H100 queue, serving until deleted."""
    template = pod_template(1, model="h100")
    template["spec"]["restartPolicy"] = "Always"  # the only one these kinds take
    template["metadata"] = {"labels": {"app": name}}
    spec: Obj = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": template,
    }
    if kind is STATEFULSET:
        spec["serviceName"] = name
    return {
        "apiVersion": "apps/v1",
        "kind": kind.resource.kind,
        "metadata": {"name": name, "namespace": NS, "labels": {C.QUEUE_NAME_LABEL: "gpu-lq"}},
        "spec": spec,
    }


async def manager_pods(api: KubeApi, name: str) -> list[str]:
    """Any pod of the set on the manager (by its own selector), in any phase."""
    pods = (await api.list(R.PODS, NS, label_selector=f"app={name}"))["items"]
    return [p["metadata"]["name"] for p in pods]


async def worker_counts(api: KubeApi, kind: ServingKind, name: str) -> Obj:
    """The worker's replica counts as the manager's object shows them."""
    return kind.mirrored_status(await api.get(kind.resource, name, NS))


async def all_running(bed: Bed, worker: str, kind: ServingKind, name: str, since: float) -> float:
    """Seconds from ``since`` until all its pods run on ``worker``."""

    async def there() -> bool:
        return await running_pods(bed.worker_apis[worker], kind, name) == REPLICAS

    await wait_for(there, timeout=90, interval=0.2, what=f"all {REPLICAS} pods on {worker}")
    return time.monotonic() - since


async def ready_on_manager(
    api: KubeApi, kind: ServingKind, name: str, since: float, replicas: int = REPLICAS
) -> float:
    async def ready() -> bool:
        return (await worker_counts(api, kind, name)).get("readyReplicas") == replicas

    await wait_for(ready, timeout=60, interval=0.2, what="readyReplicas back on the manager")
    return time.monotonic() - since


async def delete_everywhere(bed: Bed, kind: ServingKind, name: str) -> None:
    await bed.manager_api.delete(kind.resource, name, NS)

    async def gone() -> bool:
        return not await nothing_of(bed, kind, name)

    await wait_for(gone, timeout=60, what=f"the {kind.resource.kind} gone from the workers")


@pytest.mark.parametrize("which", sorted(KINDS))
async def test_upstream_a_serving_set_runs_whole_on_one_worker_its_counts_back_on_the_manager(
    article_bed: Bed, which: str
) -> None:
    """Upstream's MultiKueue "Should sync a StatefulSet to worker if admitted" (kfed does the
    same for a Deployment): held by the webhook (zero replicas, its size kept, MultiKueue's
    ``managedBy`` in an annotation), one Workload of pod set ``main`` of 3 pods, placed whole
    on one H100 worker where all 3 run; the manager never has a pod of it (upstream: gated
    pods) and shows the worker's readyReplicas; a resize there is undone; it holds its quota
    (it never finishes) until deleted, and its deletion reaches the worker."""
    kind = KINDS[which]
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    name = f"{which}-serve"
    async with RunWatch(bed.worker_apis, NS, label=kind.pod_label) as runs:
        submitted = time.monotonic()
        await api.create(kind.resource, serving_set(kind, name), NS)
        created = await api.get(kind.resource, name, NS)
        assert created["spec"]["replicas"] == 0
        annotations = created["metadata"]["annotations"]
        assert annotations[HELD_REPLICAS_ANNOTATION] == str(REPLICAS)
        assert annotations[MANAGED_BY_ANNOTATION] == C.MULTIKUEUE_MANAGED_BY
        wl = await wait_for(lambda: workload_of(api, kind, name), timeout=60, what="Workload")
        assert wl is not None
        assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("main", 3)]
        worker = await wait_for(lambda: placed_on(api, kind, name), timeout=60, what="placed")
        assert worker in H100_WORKERS
        running = await all_running(bed, worker, kind, name, submitted)
        print(f"{which}: submit -> all {REPLICAS} pods running on {worker}: {running:.1f}s")
        back = await ready_on_manager(api, kind, name, submitted)
        print(f"{which}: submit -> readyReplicas {REPLICAS} on the manager: {back:.1f}s")
        remote = await bed.worker_apis[worker].get(kind.resource, name, NS)
        assert remote["spec"]["replicas"] == REPLICAS
        remote_annotations = remote["metadata"].get("annotations") or {}
        assert MANAGED_BY_ANNOTATION not in remote_annotations
        assert HELD_REPLICAS_ANNOTATION not in remote_annotations
        assert (remote.get("status") or {}).get("readyReplicas") == REPLICAS
        mine = await api.get(kind.resource, name, NS)
        assert mine["spec"]["replicas"] == 0, "the manager's copy stays held"
        assert int((mine.get("status") or {}).get("replicas") or 0) == 0
        assert json.loads(mine["metadata"]["annotations"][WORKER_STATUS_ANNOTATION]) == {
            "replicas": 3,
            "readyReplicas": 3,
            "availableReplicas": 3,
            "updatedReplicas": 3,
        }
        assert await manager_pods(api, name) == [], "no pod of it on the manager, ever"
        wl = await workload_of(api, kind, name)
        assert wl is not None and ws.is_admitted(wl) and not ws.is_finished(wl)
        # A resize on the manager is undone: held again at the size it was queued with.
        await api.patch(kind.resource, name, {"spec": {"replicas": 5}}, NS)
        resized = time.monotonic()

        async def held_again() -> bool:
            return kind.is_suspended(await api.get(kind.resource, name, NS))

        await wait_for(held_again, timeout=30, interval=0.1, what="the resize undone")
        print(f"{which}: resize on the manager undone in {time.monotonic() - resized:.1f}s")
        mine = await api.get(kind.resource, name, NS)
        assert mine["metadata"]["annotations"][HELD_REPLICAS_ANNOTATION] == str(REPLICAS)

        async def none_on_manager() -> bool:
            return await manager_pods(api, name) == []

        await wait_for(none_on_manager, timeout=30, what="no pod of it left on the manager")
        assert await running_pods(bed.worker_apis[worker], kind, name) == REPLICAS
        assert runs.clusters_of(name) == {worker}
        assert not runs.double_runs()
        await delete_everywhere(bed, kind, name)
        assert await workload_of(api, kind, name) is None


@pytest.mark.parametrize("which", sorted(KINDS))
async def test_a_serving_set_cut_off_with_its_worker_is_fenced_and_serves_again_elsewhere(
    article_bed: Bed, which: str
) -> None:
    """The urgent inference recovery: all 3 pods serve on one H100 worker, which is cut off;
    that worker fences its copy (scaled to zero, its pods gone) before the other H100 worker
    runs it, whole; never on two workers at once; the manager shows the new worker's
    readyReplicas, and never had a pod of it."""
    kind = KINDS[which]
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    name = f"{which}-cut"
    async with RunWatch(bed.worker_apis, NS, label=kind.pod_label) as runs:
        await api.create(kind.resource, serving_set(kind, name), NS)
        first = await wait_for(lambda: placed_on(api, kind, name), timeout=60, what="placed")
        assert first is not None
        other = other_h100(first)
        await all_running(bed, first, kind, name, time.monotonic())
        bed.proxies[first].cut()
        cut = time.monotonic()
        try:
            moved = await all_running(bed, other, kind, name, cut)
            print(f"{which}: cut -> all {REPLICAS} pods running on {other}: {moved:.1f}s")
            back = await ready_on_manager(api, kind, name, cut)
            print(f"{which}: cut -> readyReplicas {REPLICAS} on the manager: {back:.1f}s")
            assert await running_pods(bed.worker_apis[first], kind, name) == 0, "fenced there"
            fenced = await bed.worker_apis[first].get(kind.resource, name, NS)
            assert fenced["spec"]["replicas"] == 0, "held at zero by the worker's fencing"
            run = runs.runs[name]
            stopped, started = run.stopped_at[first], run.first_running_at[other]
            print(
                f"{which}: fenced on {first} {stopped - cut:.1f}s after the cut, "
                f"first pod on {other} {started - cut:.1f}s after it"
            )
            assert stopped <= started, "fenced before it ran elsewhere"
        finally:
            bed.proxies[first].heal()
        assert await placed_on(api, kind, name) == other
        assert await manager_pods(api, name) == []
    assert not runs.double_runs(), f"pods of the {kind.resource.kind} ran on two workers at once"
    assert runs.clusters_of(name) == {first, other}
    await delete_everywhere(bed, kind, name)


async def test_the_serving_examples_run_through_kfed_submit(article_bed: Bed) -> None:
    """``examples/jobs/statefulset-inference-h100.yaml`` and
    ``deployment-inference-h100.yaml`` as documented: ``kfed submit`` each (it holds them;
    the webhook marks them for MultiKueue); each serves whole on one H100 worker, its
    readyReplicas back on the manager, and is deleted again before the next (the queue has
    4 H100 GPUs)."""
    bed = article_bed
    api = bed.manager_api
    await start(bed)
    for file, kind in (
        ("statefulset-inference-h100.yaml", STATEFULSET),
        ("deployment-inference-h100.yaml", DEPLOYMENT),
    ):
        manifest = example(file)
        name, replicas = manifest["metadata"]["name"], int(manifest["spec"]["replicas"])
        submitted = time.monotonic()
        code, out, err = await kfed(bed, "submit", str(JOBS / file), "--timeout", "90s")
        assert code == 0, (out, err)
        assert f"created {kind.resource.kind} {NS}/{name}" in out, out
        worker = await placed_on(api, kind, name)
        assert worker in H100_WORKERS
        back = await ready_on_manager(api, kind, name, submitted, replicas)
        print(f"{file}: submit -> readyReplicas {replicas} on the manager: {back:.1f}s")
        assert await running_pods(bed.worker_apis[worker], kind, name) == replicas
        assert await manager_pods(api, manifest["spec"]["selector"]["matchLabels"]["app"]) == []
        await delete_everywhere(bed, kind, name)
