"""Topology-aware scheduling on one real cluster (docs/tas.md): the worker shim's controllers
with ``--topology-aware-scheduling``, the real kube-scheduler and kwok nodes.

The test adds its own kwok nodes in two racks (rack ``a``: 2 nodes of 2 GPUs; rack ``b``: 3
nodes of 2 GPUs), tainted so that no other test's pods land on them, and a flavor of them
with a Topology of rack and hostname. A Job of 4 one-GPU pods that requires a rack lands on
rack ``a`` (BestFit: the tightest rack that holds it), every pod on the node the Workload's
topology assignment names; a Job of 6 goes to rack ``b``; a third Job of 2 waits with
upstream's reason, though quota is there.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from e2e.local.kwoknodes import KWOK_NODE_ANNOTATION
from e2e.waiting import wait_for
from manager.api import constants as C
from manager.api.tasprovisioning import Topology
from manager.controllers import taspods, topologyassignment
from manager.controllers import workloadstatus as ws
from manager.controllers.runtime import ClusterController
from manager.controllers.settings import ControllerSettings
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.tasks import stop_tasks
from tests import builders as b
from tests.integration.controllers.helpers import condition, workload_of

pytestmark = pytest.mark.full

RACK = "kfed.test/rack"
HOST = "kubernetes.io/hostname"
TOPOLOGIES = R.of(Topology.resource)


@dataclass
class Bed:
    flavor: str
    racks: dict[str, list[str]]
    """Rack -> its nodes."""


def node(name: str, unique: str, levels: dict[str, str], *, gpus: int = 2) -> dict[str, Any]:
    """A kwok node of ``gpus`` GPUs with these topology labels (its hostname added), tainted
    with the test's id so that only the test's pods land on it."""
    key, value = KWOK_NODE_ANNOTATION
    capacity = {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": str(gpus), "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {key: value},
            "labels": {"type": "kwok", HOST: name, **levels, "kfed.test/tas": unique},
        },
        "spec": {"taints": [{"key": "kfed.test/tas", "value": unique, "effect": "NoSchedule"}]},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


@pytest.fixture
async def bed(api: KubeApi, ns: str, unique: str) -> AsyncIterator[Bed]:
    racks = {
        "a": [f"tas-{unique}-a{i}" for i in range(2)],
        "b": [f"tas-{unique}-b{i}" for i in range(3)],
    }
    name = f"tas-{unique}"
    created: list[tuple[R.Resource, str, str | None]] = []

    async def create(res: R.Resource, body: dict[str, Any], namespace: str | None = None) -> None:
        await api.create(res, body, namespace)
        created.append((res, body["metadata"]["name"], namespace))

    try:
        for rack, names in racks.items():
            for n in names:
                await create(R.NODES, node(n, unique, {RACK: rack}))
        await create(
            TOPOLOGIES,
            {
                "apiVersion": C.API_VERSION,
                "kind": "Topology",
                "metadata": {"name": name},
                "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOST}]},
            },
        )
        toleration = {
            "key": "kfed.test/tas",
            "operator": "Equal",
            "value": unique,
            "effect": "NoSchedule",
        }
        await create(
            R.RESOURCE_FLAVORS,
            b.resource_flavor(
                name,
                node_labels={"kfed.test/tas": unique},
                tolerations=[toleration],
                topology=name,
            ),
        )
        quotas = {name: {"cpu": "100", "nvidia.com/gpu": "100"}}
        await create(R.CLUSTER_QUEUES, b.cluster_queue(name, quotas))
        await create(R.LOCAL_QUEUES, b.local_queue(ns, "lq", name), ns)

        async def nodes_ready() -> bool:
            for names in racks.values():
                for n in names:
                    obj = await api.get(R.NODES, n)
                    conditions = (obj.get("status") or {}).get("conditions") or []
                    if not any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                        return False
            return True

        await wait_for(nodes_ready, timeout=60, what="the test's kwok nodes Ready")
        yield Bed(name, racks)
    finally:
        for res, obj_name, namespace in reversed(created):
            with contextlib.suppress(errors.NotFound):
                await api.delete(res, obj_name, namespace)


def rack_job(namespace: str, name: str, pods: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {C.QUEUE_NAME_LABEL: "lq"}},
        "spec": {
            "suspend": True,
            "parallelism": pods,
            "completions": pods,
            "template": {
                "metadata": {
                    "annotations": {
                        taspods.REQUIRED_ANNOTATION: RACK,
                        "pod-complete.stage.kwok.x-k8s.io/delay": "600000",
                    }
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "train",
                            "image": "busybox",
                            "resources": {
                                "requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                                "limits": {"nvidia.com/gpu": "1"},
                            },
                        }
                    ],
                },
            },
        },
    }


async def bound_nodes(api: KubeApi, namespace: str, job: str, pods: int) -> list[str] | None:
    """The nodes the Job's pods are bound to, once all ``pods`` are."""
    listed = await api.list(R.PODS, namespace, label_selector=f"job-name={job}")
    nodes = [(p.get("spec") or {}).get("nodeName") for p in listed["items"]]
    if len(nodes) < pods or not all(nodes):
        return None
    return sorted(str(n) for n in nodes)


def assigned_hosts(wl: dict[str, Any]) -> list[str]:
    (psa,) = ws.status_of(wl)["admission"]["podSetAssignments"]
    assignment = topologyassignment.from_status(psa["topologyAssignment"])
    return sorted(d.values[-1] for d in assignment.domains for _ in range(d.count))


async def test_a_job_that_requires_a_rack_lands_on_one_rack_s_nodes(
    api: KubeApi, ns: str, bed: Bed
) -> None:
    controller = ClusterController(api, ControllerSettings(status_period=0.3, topology_aware=True))
    task = asyncio.create_task(controller.run())
    try:
        await asyncio.wait_for(controller.synced.wait(), timeout=30)

        # 4 pods: rack a holds them most tightly; each pod lands on the node its domain names.
        await api.create(R.JOBS, rack_job(ns, "four", 4), ns)
        four = await wait_for(
            lambda: bound_nodes(api, ns, "four", 4), timeout=90, what="four's pods bound"
        )
        assert four is not None and set(four) <= set(bed.racks["a"]), four
        wl = await workload_of(api, ns, "four")
        assert wl is not None
        assert assigned_hosts(wl) == four
        pods = (await api.list(R.PODS, ns, label_selector="job-name=four"))["items"]
        assert all(p["metadata"]["labels"][taspods.TAS_LABEL] == "true" for p in pods)
        assert not any(p["spec"].get("schedulingGates") for p in pods)

        # 6 pods: only rack b holds them now.
        await api.create(R.JOBS, rack_job(ns, "six", 6), ns)
        six = await wait_for(
            lambda: bound_nodes(api, ns, "six", 6), timeout=90, what="six's pods bound"
        )
        assert six is not None and set(six) <= set(bed.racks["b"]), six

        # 2 more: quota is there, no rack is: it waits with upstream's reason, its Job
        # suspended.
        await api.create(R.JOBS, rack_job(ns, "two", 2), ns)

        async def waiting() -> dict[str, Any] | None:
            found = condition(await workload_of(api, ns, "two"), C.QUOTA_RESERVED)
            return found if found and "topology" in found.get("message", "") else None

        said = await wait_for(waiting, timeout=60, what="two waits for a rack")
        assert said is not None and said["status"] == "False"
        assert said["message"].startswith(
            f"couldn't assign flavors to pod set main: topology \"{bed.flavor}\" doesn't allow "
            "to fit any of 2 pod(s)"
        ), said
        assert (await api.get(R.JOBS, "two", ns))["spec"]["suspend"] is True
    finally:
        await stop_tasks([task])


async def test_a_failed_node_evicts_its_gang_which_is_placed_again_on_ready_nodes(
    api: KubeApi, ns: str, bed: Bed
) -> None:
    """kfed's policy for a failed node (docs/tas.md): a node of a running gang is deleted;
    the gang is evicted with upstream's reason NodeFailures, its pods stopped, and placed
    again where every pod fits (rack b); at no point do its live pods (not terminating) sit
    on both racks."""
    controller = ClusterController(api, ControllerSettings(status_period=0.3, topology_aware=True))
    task = asyncio.create_task(controller.run())
    try:
        await asyncio.wait_for(controller.synced.wait(), timeout=30)
        await api.create(R.JOBS, rack_job(ns, "gang", 4), ns)
        first = await wait_for(
            lambda: bound_nodes(api, ns, "gang", 4), timeout=90, what="gang's pods bound"
        )
        assert first is not None and set(first) <= set(bed.racks["a"]), first

        await api.delete(R.NODES, bed.racks["a"][0])

        async def placed_again() -> list[str] | None:
            listed = await api.list(R.PODS, ns, label_selector="job-name=gang")
            alive = [
                p
                for p in listed["items"]
                if not p["metadata"].get("deletionTimestamp")
                and p["status"].get("phase") not in ("Succeeded", "Failed")
            ]
            nodes = sorted(str(p["spec"].get("nodeName") or "") for p in alive)
            if len(nodes) == 4 and all(nodes) and set(nodes) <= set(bed.racks["b"]):
                return nodes
            assert not (
                {n for n in nodes if n} & set(bed.racks["a"])
                and {n for n in nodes if n} & set(bed.racks["b"])
            ), f"the gang runs on both racks: {nodes}"
            return None

        again = await wait_for(placed_again, timeout=120, what="gang placed again on rack b")
        assert again is not None
        wl = await workload_of(api, ns, "gang")
        assert wl is not None and assigned_hosts(wl) == again
        evicted = condition(wl, C.EVICTED)
        assert evicted is not None and evicted["message"] == (
            "Previously: Workload was evicted as there was no replacement for unhealthy "
            f"node(s): {bed.racks['a'][0]}"
        ), evicted
    finally:
        await stop_tasks([task])


async def test_slices_of_a_gang_each_land_on_one_host(api: KubeApi, ns: str, bed: Bed) -> None:
    """6 pods in slices of 2 that must each share a host, all in one rack: the annotations
    reach the Workload's topology request, and rack b's three 2-GPU hosts take one slice
    each (the slice rules themselves are tested case by case in tests/unit/core)."""
    controller = ClusterController(api, ControllerSettings(status_period=0.3, topology_aware=True))
    task = asyncio.create_task(controller.run())
    try:
        await asyncio.wait_for(controller.synced.wait(), timeout=30)
        job = rack_job(ns, "sliced", 6)
        job["spec"]["template"]["metadata"]["annotations"].update(
            {taspods.SLICE_REQUIRED_ANNOTATION: HOST, taspods.SLICE_SIZE_ANNOTATION: "2"}
        )
        await api.create(R.JOBS, job, ns)
        nodes = await wait_for(
            lambda: bound_nodes(api, ns, "sliced", 6), timeout=90, what="sliced pods bound"
        )
        assert nodes == sorted(bed.racks["b"] * 2), nodes
        wl = await workload_of(api, ns, "sliced")
        assert wl is not None
        assert wl["spec"]["podSets"][0]["topologyRequest"] == {
            "required": RACK,
            "podSetSliceRequiredTopology": HOST,
            "podSetSliceSize": 2,
        }
    finally:
        await stop_tasks([task])
