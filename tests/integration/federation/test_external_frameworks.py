"""A kind kfed has no adapter for, federated by configuration (upstream's
``multiKueue.externalFrameworks``, ``jobkinds/external.py``): the test's own CRD, Widget,
installed on the manager and on every worker of the bed, and the test's own controller of
it, as a platform team would run theirs beside Kueue (it makes each Widget's Workload on the
manager; on a worker it runs a Widget's pods once the Workload named by its prebuilt label is
admitted, stops them when that Workload is deactivated, and finishes it when its run is
over). kfed copies the Widget to the one worker chosen, its status back, finishes the
manager's Workload from the worker's, and moves it once, never twice, when its worker is cut
off."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from e2e.waiting import WaitTimeout, wait_for
from manager.api import constants as C
from manager.api.view import at, labels_of
from manager.controllers import conditions
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.external import ExternalKind
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.controllers.builders import pod_template
from tests.integration.federation import article
from tests.integration.federation.bed import CHECK, Bed
from tests.integration.federation.runs import RunWatch
from tests.integration.federation.test_job_kinds import H100_WORKERS, other_h100
from tests.integration.federation.test_never_twice_never_stuck import start

pytestmark = pytest.mark.full
NS = article.NS
Obj = dict[str, Any]
GROUP = "widgets.kfed-test.io"
WIDGETS = R.Resource(GROUP, "v1", "widgets", "Widget", True)
WIDGET = ExternalKind(WIDGETS)
NAME = f"Widget.v1.{GROUP}"
"""How the configuration names it (``Kind.version.group``)."""
POD_LABEL = "widgets.kfed-test.io/name"
PODS = 2

CRD: Obj = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            }
        ],
    },
}


async def install(api: KubeApi) -> None:
    with contextlib.suppress(errors.AlreadyExists):
        await api.create(R.CRDS, CRD)

    async def served() -> bool:
        try:
            await api.list(WIDGETS, NS)
        except errors.NotFound:
            return False
        return True

    await wait_for(served, timeout=60, what=f"widgets served by {api}", ignore=(errors.KubeError,))


@pytest.fixture
async def widget_bed(article_bed: Bed) -> AsyncIterator[Bed]:
    """The article's bed with the Widget CRD on the manager and every worker, the test's
    controller of Widgets running on every worker, and a manager federating Widgets."""
    bed = article_bed
    apis = [bed.manager_api, *bed.worker_apis.values()]
    await asyncio.gather(*(install(api) for api in apis))
    controller = asyncio.create_task(run_widgets(bed.worker_apis), name="widget-controller")
    try:
        await start(bed, external_frameworks=(NAME,))
        yield bed
    finally:
        controller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await controller
        await bed.stop_all()
        for api in apis:
            await api.delete(R.CRDS, CRD["metadata"]["name"])


def widget(name: str, *, run_seconds: float) -> Obj:
    """A Widget of ``PODS`` pods of one H100 GPU each, left to MultiKueue (upstream's
    generic adapter federates an object only so)."""
    return {
        "apiVersion": WIDGETS.api_version,
        "kind": "Widget",
        "metadata": {"name": name, "namespace": NS, "labels": {C.QUEUE_NAME_LABEL: "gpu-lq"}},
        "spec": {
            "managedBy": C.MULTIKUEUE_MANAGED_BY,
            "pods": PODS,
            "runSeconds": run_seconds,
            "template": pod_template(1, model="h100"),
        },
    }


async def submit(api: KubeApi, body: Obj) -> Obj:
    """Create a Widget and, as its controller does, its Workload on the manager (named as
    the controller likes: kfed relies on its owner, not on its name)."""
    job = await api.create(WIDGETS, body, NS)
    name = job["metadata"]["name"]
    template = job["spec"]["template"]
    return await api.create(
        R.WORKLOADS,
        {
            "apiVersion": C.API_VERSION,
            "kind": "Workload",
            "metadata": {
                "name": f"wl-of-{name}",
                "namespace": NS,
                "ownerReferences": [
                    {
                        "apiVersion": WIDGETS.api_version,
                        "kind": "Widget",
                        "name": name,
                        "uid": job["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "queueName": "gpu-lq",
                "podSets": [{"name": "main", "count": PODS, "template": template}],
            },
        },
        NS,
    )


# -- the test's controller of Widgets on the workers --------------------------------------


async def run_widgets(workers: dict[str, KubeApi]) -> None:
    """Reconcile every worker's Widgets five times a second until cancelled."""
    running_since: dict[str, float] = {}
    while True:
        for api in workers.values():
            with contextlib.suppress(errors.KubeError):
                for job in (await api.list(WIDGETS, NS))["items"]:
                    await reconcile(api, job, running_since)
        await asyncio.sleep(0.2)


async def reconcile(api: KubeApi, job: Obj, running_since: dict[str, float]) -> None:
    """One Widget on a worker: run while its Workload is admitted and active, stop when it
    is not, and end it (its Workload Finished) ``runSeconds`` after all its pods ran."""
    meta = job["metadata"]
    name, uid = meta["name"], meta["uid"]
    workload = labels_of(job).get(C.PREBUILT_WORKLOAD_LABEL)
    if not workload:
        return
    try:
        wl = await api.get(R.WORKLOADS, workload, NS)
    except errors.NotFound:
        return
    phase = at(job, "status").get("phase")
    if ws.is_finished(wl) or phase == "Succeeded":
        return
    pods = (await api.list(R.PODS, NS, label_selector=f"{POD_LABEL}={name}"))["items"]
    pods = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    wanted = int(job["spec"]["pods"])
    if not ws.is_admitted(wl) or not ws.is_active(wl) or ws.is_evicted(wl):
        for pod in pods:
            await api.delete(R.PODS, pod["metadata"]["name"], NS)
        running_since.pop(uid, None)
        if phase == "Running":
            await set_phase(api, name, "Suspended", 0)
        return
    for index in range(len(pods), wanted):
        await api.create(R.PODS, pod_of(job, index), NS)
    running = sum(1 for p in pods if at(p, "status").get("phase") == "Running")
    if phase != "Running" and running == wanted:
        running_since[uid] = time.monotonic()
        await set_phase(api, name, "Running", running)
    elif uid in running_since and (
        time.monotonic() - running_since[uid] >= float(job["spec"]["runSeconds"])
    ):
        for pod in pods:
            await api.delete(R.PODS, pod["metadata"]["name"], NS)
        await set_phase(api, name, "Succeeded", 0)
        finished = ws.finish(wl, True, f"Widget {name} ran for {job['spec']['runSeconds']}s")
        if finished is not None:
            await api.patch(R.WORKLOADS, workload, finished, NS, subresource="status")


def pod_of(job: Obj, index: int) -> Obj:
    meta = job["metadata"]
    template = job["spec"]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{meta['name']}-{index}",
            "labels": {POD_LABEL: meta["name"]},
            "ownerReferences": [
                {
                    "apiVersion": WIDGETS.api_version,
                    "kind": "Widget",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": template["spec"],
    }


async def set_phase(api: KubeApi, name: str, phase: str, running: int) -> None:
    status = {"phase": phase, "runningPods": running}
    await api.patch(WIDGETS, name, {"status": status}, NS, subresource="status")


# -- what the tests read ----------------------------------------------------------------


async def placed_on(api: KubeApi, name: str) -> str | None:
    wl = await api.get(R.WORKLOADS, f"wl-of-{name}", NS)
    return str(ws.status_of(wl).get("clusterName") or "") or None


async def phase_on_manager(api: KubeApi, name: str, phase: str) -> bool:
    return at(await api.get(WIDGETS, name, NS), "status").get("phase") == phase


async def widgets_on(bed: Bed, name: str) -> list[str]:
    """The workers that hold a Widget ``name`` or a copy of its Workload."""
    found = []
    for worker, wapi in bed.worker_apis.items():
        copies = [
            c for c in (await wapi.list(R.WORKLOADS, NS))["items"] if name in c["metadata"]["name"]
        ]
        jobs = [j for j in (await wapi.list(WIDGETS, NS))["items"] if j["metadata"]["name"] == name]
        if copies or jobs:
            found.append(worker)
    return found


async def none_left(bed: Bed, name: str, *, what: str) -> None:
    async def gone() -> bool:
        return not await widgets_on(bed, name)

    await wait_for(gone, timeout=60, what=what)


async def test_a_kind_kfed_does_not_know_runs_on_one_worker_by_configuration(
    widget_bed: Bed,
) -> None:
    """Upstream's generic adapter's flow: the Widget (``spec.managedBy`` MultiKueue's) and the
    Workload its controller made are admitted on the manager; the Widget goes to ONE worker
    as upstream's adapter copies it (the spec less ``managedBy``, labelled with its origin and
    Workload, no owners nor status), and only once that worker admitted its Workload; the
    worker's status comes back to the manager's Widget; the worker's Workload's end finishes
    the manager's; the copies go."""
    bed = widget_bed
    api = bed.manager_api
    name = "widget-one"
    async with RunWatch(bed.worker_apis, NS, label=POD_LABEL) as runs:
        submitted = time.monotonic()
        await submit(api, widget(name, run_seconds=4))
        worker = await wait_for(lambda: placed_on(api, name), timeout=60, what="placed")
        assert worker in H100_WORKERS
        wapi = bed.worker_apis[worker]
        copy = await wait_for(lambda: wapi.get(WIDGETS, name, NS), timeout=30, what="its copy",
                              ignore=(errors.NotFound,))  # fmt: skip
        assert copy["spec"] == {
            k: v for k, v in widget(name, run_seconds=4)["spec"].items() if k != "managedBy"
        }
        labels = labels_of(copy)
        assert labels[C.PREBUILT_WORKLOAD_LABEL] == f"wl-of-{name}"
        assert labels[C.MULTIKUEUE_ORIGIN_LABEL] == bed.settings.origin
        assert labels[C.QUEUE_NAME_LABEL] == "gpu-lq"
        assert not copy["metadata"].get("ownerReferences")
        remote_wl = await wapi.get(R.WORKLOADS, f"wl-of-{name}", NS)
        assert ws.is_admitted(remote_wl), "the Widget is created once its worker admitted it"
        await wait_for(lambda: phase_on_manager(api, name, "Running"), timeout=60,
                       what="Running on the manager")  # fmt: skip
        print(f"widget: submit -> Running on the manager: {time.monotonic() - submitted:.1f}s")
        for other in set(bed.worker_apis) - {worker}:
            assert not [j for j in (await bed.worker_apis[other].list(WIDGETS, NS))["items"]]
        await wait_for(lambda: phase_on_manager(api, name, "Succeeded"), timeout=60,
                       what="Succeeded on the manager")  # fmt: skip

        async def finished() -> Obj | None:
            wl = await api.get(R.WORKLOADS, f"wl-of-{name}", NS)
            return wl if ws.is_finished(wl) else None

        wl = await wait_for(finished, timeout=60, what="the manager's Workload Finished")
        assert wl is not None
        print(f"widget: submit -> Finished on the manager: {time.monotonic() - submitted:.1f}s")
        [done] = [c for c in ws.status_of(wl)["conditions"] if c["type"] == C.FINISHED]
        assert done["reason"] == C.REASON_SUCCEEDED and "ran for 4" in done["message"], done
        assert runs.clusters_of(name) == {worker}
        assert not runs.double_runs()
        await none_left(bed, name, what="its copies removed once finished")


async def test_a_widget_without_multikueues_managed_by_is_refused_in_upstreams_words(
    widget_bed: Bed,
) -> None:
    """Upstream's generic adapter federates an object only with ``spec.managedBy``
    MultiKueue's (its controller would run it on the manager otherwise): the check says why,
    in upstream's words, and nothing of it stays on a worker."""
    bed = widget_bed
    api = bed.manager_api
    name = "widget-own"
    body = widget(name, run_seconds=1)
    del body["spec"]["managedBy"]
    await submit(api, body)
    expected = f'Expecting .spec.managedBy to be "{C.MULTIKUEUE_MANAGED_BY}" not ""'

    seen: list[Obj] = []

    async def rejected() -> bool:
        """Deactivated, its eviction saying why (the check's own message is reset to Pending
        right after the eviction, as upstream resets it)."""
        seen[:] = [await api.get(R.WORKLOADS, f"wl-of-{name}", NS)]
        evicted = conditions.find(ws.status_of(seen[0]).get("conditions"), C.EVICTED) or {}
        message = str(evicted.get("message") or "")
        return not ws.is_active(seen[0]) and f"{CHECK}: " in message and expected in message

    try:
        await wait_for(rejected, timeout=60, what="rejected, saying why")
    except WaitTimeout:
        raise AssertionError(f"never rejected saying why: {ws.status_of(seen[0])}") from None
    await none_left(bed, name, what="nothing of it on any worker")


async def test_a_running_widget_cut_off_with_its_worker_runs_once_elsewhere(
    widget_bed: Bed,
) -> None:
    """What kfed can do for a kind it does not know: the cut-off worker's shim deactivates
    the Widget's Workload there (kfed cannot suspend a Widget nor find its pods: the Widget's
    controller stops them, as for any deactivated Workload), and only after the fencing
    window does the manager copy the Widget to the other H100 worker; it runs there, never
    on two workers at once, and ends Succeeded; the first worker's copies go once it is
    back."""
    bed = widget_bed
    api = bed.manager_api
    name = "widget-cut"
    async with RunWatch(bed.worker_apis, NS, label=POD_LABEL) as runs:
        await submit(api, widget(name, run_seconds=30))
        first = await wait_for(lambda: placed_on(api, name), timeout=60, what="placed")
        assert first is not None
        other = other_h100(first)
        await wait_for(lambda: phase_on_manager(api, name, "Running"), timeout=60,
                       what=f"Running on {first}")  # fmt: skip
        bed.proxies[first].cut()
        cut = time.monotonic()
        try:

            async def running_elsewhere() -> bool:
                there = await bed.worker_apis[other].get(WIDGETS, name, NS)
                return bool(at(there, "status").get("phase") == "Running")

            await wait_for(running_elsewhere, timeout=90, what=f"running on {other}",
                           ignore=(errors.NotFound,))  # fmt: skip
            print(f"widget: cut -> Running on {other}: {time.monotonic() - cut:.1f}s")
            fenced = await bed.worker_apis[first].get(R.WORKLOADS, f"wl-of-{name}", NS)
            assert not ws.is_active(fenced), "deactivated by the shim there"
        finally:
            bed.proxies[first].heal()

        async def first_cleaned() -> bool:
            return first not in await widgets_on(bed, name)

        await wait_for(first_cleaned, timeout=60, what=f"its copies gone from {first}")
        await wait_for(lambda: phase_on_manager(api, name, "Succeeded"), timeout=90,
                       what="Succeeded on the manager")  # fmt: skip
    assert not runs.double_runs(), "a Widget's pods ran on two workers at once"
    assert runs.clusters_of(name) == {first, other}
