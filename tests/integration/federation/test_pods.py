"""Plain Pods federated (upstream Kueue's ``pod`` integration under MultiKueue,
``jobkinds/pod.py``) on the shared bed: a Pod naming a queue is gated by the manager's
webhook (``kueue.x-k8s.io/admission``), gets one Workload ``pod-...`` of one pod, and runs
as a copy on one H100 worker (gated there until that worker admits it, then given the
flavor's nodeSelector and ungated); the manager's pod stays gated, never scheduled, and
shows the worker pod's status, its phase included, until it ends Succeeded. Cut off with its
worker, the copy there is fenced (deleted) before the other H100 worker runs it: never two
copies at once. Pods without the queue label, or made by a controller, are left alone.
The bed and helpers are ``test_job_kinds.py``'s."""

from __future__ import annotations

import time
from typing import Any

import pytest

from e2e.bench.federation.doublerun import RunningPods
from e2e.examples import JOBS
from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.pod import (
    ADMISSION_GATE,
    GROUP_NAME_LABEL,
    GROUP_TOTAL_COUNT_ANNOTATION,
    MANAGED_BY_ANNOTATION,
    MANAGED_LABEL,
    POD,
    POD_NAME_LABEL,
    is_gated,
)
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.controllers.builders import pod_template
from tests.integration.federation import article
from tests.integration.federation.bed import Bed
from tests.integration.federation.runs import RunWatch
from tests.integration.federation.test_drill import kfed
from tests.integration.federation.test_job_kinds import (
    H100_WORKERS,
    ended,
    example,
    other_h100,
    placed_on,
    workload_of,
)
from tests.integration.federation.test_kubeflow_kinds import running_pods
from tests.integration.federation.test_never_twice_never_stuck import start

pytestmark = pytest.mark.full
NS = article.NS
Obj = dict[str, Any]


def plain_pod(name: str, *, delay_ms: int, queue: str | None = "gpu-lq") -> Obj:
    """A pod of one H100 GPU that kwok completes ``delay_ms`` after it runs."""
    template = pod_template(1, model="h100", delay_ms=delay_ms)
    labels = {C.QUEUE_NAME_LABEL: queue} if queue else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**template["metadata"], "name": name, "namespace": NS, "labels": labels},
        "spec": template["spec"],
    }


async def running_on(bed: Bed, worker: str, name: str, since: float) -> float:
    """Seconds from ``since`` until its copy runs on ``worker``."""

    async def there() -> bool:
        return await running_pods(bed.worker_apis[worker], POD, name) == 1

    await wait_for(there, timeout=90, interval=0.1, what=f"pod {name} running on {worker}")
    return time.monotonic() - since


def seen_moved(runs: RunWatch, name: str, first: str, other: str) -> RunningPods | None:
    """The pod's runs once the watch has seen it stop on ``first`` and run on ``other``."""
    run = runs.runs.get(name)
    if run and first in run.stopped_at and other in run.first_running_at:
        return run
    return None


async def manager_phase(api: KubeApi, name: str) -> str | None:
    pod = await api.get(R.PODS, name, NS)
    return (pod.get("status") or {}).get("phase")


async def gone_from_workers(bed: Bed, name: str) -> bool:
    for wapi in bed.worker_apis.values():
        try:
            await wapi.get(R.PODS, name, NS)
            return False
        except errors.NotFound:
            pass
    return True


async def test_upstream_a_plain_pod_runs_on_one_h100_worker_and_ends_succeeded(
    article_bed: Bed,
) -> None:
    """Upstream's MultiKueue "Should run a pod on worker if admitted": gated and labelled
    managed by the webhook, one Workload of pod set ``main`` of 1, its copy run on an H100
    worker (the flavor's node label written, the gate gone there); the manager's pod stays
    gated and unscheduled, shows the worker's phase (Running, then Succeeded), its Workload
    finishes, and the worker's copy is removed."""
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    name = "pod-h100"
    async with RunWatch(bed.worker_apis, NS, label=POD_NAME_LABEL) as runs:
        submitted = time.monotonic()
        await api.create(R.PODS, plain_pod(name, delay_ms=3000), NS)
        created = await api.get(R.PODS, name, NS)
        assert {"name": ADMISSION_GATE} in created["spec"]["schedulingGates"]
        assert created["metadata"]["labels"][MANAGED_LABEL] == "true"
        assert created["metadata"]["annotations"][MANAGED_BY_ANNOTATION] == (
            C.MULTIKUEUE_MANAGED_BY
        )
        wl = await wait_for(lambda: workload_of(api, POD, name), timeout=60, what="Workload")
        assert wl is not None and wl["metadata"]["name"].startswith(f"pod-{name}-")
        assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("main", 1)]
        worker = await wait_for(lambda: placed_on(api, POD, name), timeout=60, what="placed")
        assert worker in H100_WORKERS
        running = await running_on(bed, worker, name, submitted)
        print(f"pod: submit -> running on {worker}: {running:.1f}s")
        remote = await bed.worker_apis[worker].get(R.PODS, name, NS)
        assert not is_gated(remote)
        assert remote["spec"]["nodeSelector"]["gpu.model"] == "h100"
        labels = remote["metadata"]["labels"]
        assert labels[C.PREBUILT_WORKLOAD_LABEL] == wl["metadata"]["name"]
        assert C.MULTIKUEUE_ORIGIN_LABEL in labels
        assert MANAGED_BY_ANNOTATION not in (remote["metadata"].get("annotations") or {})

        async def running_on_manager() -> bool:
            return await manager_phase(api, name) in ("Running", "Succeeded")

        await wait_for(running_on_manager, timeout=60, interval=0.1, what="Running back")
        print(f"pod: submit -> Running on the manager's pod: {time.monotonic() - submitted:.1f}s")
        assert await ended(api, POD, name) is True
        print(f"pod: submit -> Succeeded on the manager's pod: {time.monotonic() - submitted:.1f}s")
        mine = await api.get(R.PODS, name, NS)
        assert is_gated(mine), "the manager's pod stays gated"
        assert not mine["spec"].get("nodeName"), "never scheduled on the manager"
        scheduled = [c for c in mine["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert all(c["status"] == "False" for c in scheduled), scheduled

        async def finished() -> bool:
            found = await workload_of(api, POD, name)
            return found is not None and ws.is_finished(found)

        await wait_for(finished, timeout=60, what="its Workload Finished")
        await wait_for(lambda: gone_from_workers(bed, name), timeout=60, what="copy removed")
        assert runs.clusters_of(name) == {worker}
        assert not runs.double_runs()
    await api.delete(R.PODS, name, NS)


async def test_a_plain_pod_cut_off_with_its_worker_is_fenced_and_runs_once_elsewhere(
    article_bed: Bed,
) -> None:
    """Its worker cut off: that worker's shim deletes its copy (a pod cannot be suspended),
    and the other H100 worker runs a new copy only after that; never two at once."""
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    name = "pod-cut"
    async with RunWatch(bed.worker_apis, NS, label=POD_NAME_LABEL) as runs:
        await api.create(R.PODS, plain_pod(name, delay_ms=600_000), NS)
        first = await wait_for(lambda: placed_on(api, POD, name), timeout=60, what="placed")
        assert first is not None
        other = other_h100(first)
        await running_on(bed, first, name, time.monotonic())
        bed.proxies[first].cut()
        cut = time.monotonic()
        try:
            moved = await running_on(bed, other, name, cut)
            print(f"pod: cut -> running on {other}: {moved:.1f}s")
            assert await running_pods(bed.worker_apis[first], POD, name) == 0, "fenced there"
            # The poll above can see the move before the watch's events arrive.
            run = await wait_for(
                lambda: seen_moved(runs, name, first, other),
                timeout=30,
                what=f"the watch saw {name} stop on {first} and run on {other}",
            )
            assert run is not None
            stopped, started = run.stopped_at[first], run.first_running_at[other]
            print(
                f"pod: fenced on {first} {stopped - cut:.1f}s after the cut, "
                f"running on {other} {started - cut:.1f}s after it"
            )
            assert stopped <= started, "fenced before it ran elsewhere"
        finally:
            bed.proxies[first].heal()
        assert await placed_on(api, POD, name) == other
        mine = await api.get(R.PODS, name, NS)
        assert is_gated(mine) and not mine["spec"].get("nodeName")
    assert not runs.double_runs(), "the pod ran on two workers at once"
    assert runs.clusters_of(name) == {first, other}
    await api.delete(R.PODS, name, NS)
    await wait_for(lambda: gone_from_workers(bed, name), timeout=60, what="copies removed")


async def test_pods_without_a_queue_or_made_by_a_controller_are_left_alone(
    article_bed: Bed,
) -> None:
    """Upstream's webhook leaves a pod without the queue label, and one whose controller
    is another object, as they are: no gate, no managed label, no Workload; a pod of an
    upstream pod group is refused (kfed does not queue groups, docs/jobs.md)."""
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    owner = await api.create(
        R.CONFIGMAPS,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pod-owner"}},
        NS,
    )
    owned = plain_pod("pod-owned", delay_ms=1000)
    owned["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "pod-owner",
            "uid": owner["metadata"]["uid"],
            "controller": True,
        }
    ]
    for body in (plain_pod("pod-unqueued", delay_ms=1000, queue=None), owned):
        name = body["metadata"]["name"]
        created = await api.create(R.PODS, body, NS)
        assert not created["spec"].get("schedulingGates"), name
        assert MANAGED_LABEL not in (created["metadata"].get("labels") or {}), name
        assert MANAGED_BY_ANNOTATION not in (created["metadata"].get("annotations") or {}), name
    # A pod of an upstream pod group is refused, saying why (kfed does not queue groups).
    grouped = plain_pod("pod-grouped", delay_ms=1000)
    grouped["metadata"]["labels"][GROUP_NAME_LABEL] = "g"
    grouped["metadata"]["annotations"][GROUP_TOTAL_COUNT_ANNOTATION] = "3"
    with pytest.raises(errors.KubeError) as refused:
        await api.create(R.PODS, grouped, NS)
    assert "kfed does not queue pod groups" in str(refused.value)
    # The queued pod made after them is gated and queued: by then the two would have been.
    await api.create(R.PODS, plain_pod("pod-queued", delay_ms=600_000), NS)
    await wait_for(lambda: workload_of(api, POD, "pod-queued"), timeout=60, what="Workload")
    for name in ("pod-unqueued", "pod-owned"):
        assert await workload_of(api, POD, name) is None, name
        assert not (await api.get(R.PODS, name, NS))["spec"].get("schedulingGates"), name
    for name in ("pod-unqueued", "pod-owned", "pod-queued"):
        await api.delete(R.PODS, name, NS)


async def test_the_pod_example_runs_through_kfed_submit(article_bed: Bed) -> None:
    """``examples/jobs/pod-h100.yaml`` as documented: ``kfed submit`` gates it (as the
    webhook would), it runs on one H100 worker and the manager's pod ends Succeeded."""
    bed = article_bed
    await start(bed)
    api = bed.manager_api
    file = "pod-h100.yaml"
    name = example(file)["metadata"]["name"]
    submitted = time.monotonic()
    code, out, err = await kfed(bed, "submit", str(JOBS / file), "--timeout", "90s")
    assert code == 0, (out, err)
    assert f"created Pod {NS}/{name}" in out, out
    assert await placed_on(api, POD, name) in H100_WORKERS
    assert await ended(api, POD, name) is True
    print(f"{file}: submit -> Succeeded on the manager's pod: {time.monotonic() - submitted:.1f}s")
    await api.delete(R.PODS, name, NS)
    await wait_for(lambda: gone_from_workers(bed, name), timeout=60, what="copy removed")
