"""Topology-aware placement across workers (docs/tas.md, issue #35), on real control planes:
the manager picks the worker by the racks its shim reports, the worker's shim picks the
hosts, and the real kube-scheduler binds the pods there.

Each test adds its own kwok nodes (tainted with the test's id, so no other test's pods land
on them) in racks of one block, a Topology of block, rack and hostname, a TAS flavor of those
nodes and its queues on the manager and on worker-2 and worker-3 (worker-1 has none of them):

- worker-2: rack ``a`` of 2 hosts with 3 free GPUs each (6), rack ``b`` of 1 host with 2;
- worker-3: rack ``a`` of 2 hosts with 4 GPUs each (8), rack ``b`` of 1 host with 4.

Quota is never the limit (64 GPUs on every side): only the racks decide.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from e2e.waiting import wait_for
from manager.api import constants as C
from manager.api.tasprovisioning import Topology
from manager.controllers import taspods
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.jobset import JOBSET
from manager.federation.decisions import checkstatus
from manager.federation.engine.topologyback import ANNOTATION as TOPOLOGY_ANNOTATION
from manager.federation.settings import PLACEMENT_ANNOTATION
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj
from tests.integration.controllers.test_tas import node
from tests.integration.federation.bed import CHECK, Bed

pytestmark = pytest.mark.full

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
GPU = "nvidia.com/gpu"
TOPOLOGIES = R.of(Topology.resource)
RACKS = {
    "worker-2": {"a": [3, 3], "b": [2]},
    "worker-3": {"a": [4, 4], "b": [4]},
}
"""Worker -> rack -> GPUs of each of its hosts."""


@dataclass
class TasBed:
    bed: Bed
    name: str
    """The test's flavor, queues, Topology and namespace."""
    hosts: dict[str, dict[str, str]]
    """Worker -> host -> its rack."""


def queues(name: str, unique: str, *, check: bool) -> list[tuple[R.Resource, Obj]]:
    toleration = {"key": "kfed.test/tas", "operator": "Equal", "value": unique}
    cq_spec: Obj = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", GPU],
                "flavors": [
                    {
                        "name": name,
                        "resources": [
                            {"name": "cpu", "nominalQuota": "200"},
                            {"name": GPU, "nominalQuota": "64"},
                        ],
                    }
                ],
            }
        ],
    }
    if check:
        cq_spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": CHECK}]}
    meta = {"name": name}
    return [
        (R.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}),
        (
            TOPOLOGIES,
            {
                "apiVersion": C.API_VERSION,
                "kind": "Topology",
                "metadata": meta,
                "spec": {"levels": [{"nodeLabel": lv} for lv in (BLOCK, RACK, HOST)]},
            },
        ),
        (
            R.RESOURCE_FLAVORS,
            {
                "apiVersion": C.API_VERSION,
                "kind": "ResourceFlavor",
                "metadata": meta,
                "spec": {
                    "nodeLabels": {"kfed.test/tas": unique},
                    "topologyName": name,
                    "tolerations": [{**toleration, "effect": "NoSchedule"}],
                },
            },
        ),
        (
            R.CLUSTER_QUEUES,
            {
                "apiVersion": C.API_VERSION,
                "kind": "ClusterQueue",
                "metadata": meta,
                "spec": cq_spec,
            },
        ),
        (
            R.LOCAL_QUEUES,
            {
                "apiVersion": C.API_VERSION,
                "kind": "LocalQueue",
                "metadata": {"name": name, "namespace": name},
                "spec": {"clusterQueue": name},
            },
        ),
    ]


@pytest.fixture
async def tas(bed: Bed, unique: str) -> AsyncIterator[TasBed]:
    name = f"tas-{unique}"
    made: list[tuple[KubeApi, R.Resource, Obj]] = []

    async def make(api: KubeApi, res: R.Resource, body: Obj) -> None:
        await api.create(res, body, body["metadata"].get("namespace"))
        made.append((api, res, body))

    hosts: dict[str, dict[str, str]] = {}
    try:
        for worker, racks in RACKS.items():
            api = bed.worker_apis[worker]
            for rack, gpus in racks.items():
                for i, count in enumerate(gpus):
                    host = f"{worker}-{name}-{rack}{i}"
                    levels = {BLOCK: "block-1", RACK: rack}
                    await make(api, R.NODES, node(host, unique, levels, gpus=count))
                    hosts.setdefault(worker, {})[host] = rack
            for res, body in queues(name, unique, check=False):
                await make(api, res, body)
        for res, body in queues(name, unique, check=True):
            await make(bed.manager_api, res, body)
        for worker in RACKS:
            await bed.start_shim(worker, topology=True)
        await bed.start_manager()
        yield TasBed(bed, name, hosts)
    finally:
        await bed.stop_all()
        for api, res, body in reversed(made):
            meta = body["metadata"]
            with contextlib.suppress(errors.NotFound):
                await api.delete(res, meta["name"], meta.get("namespace"))


def trainers(name: str, queue: str, count: int, **annotations: str) -> Obj:
    """A JobSet of ``count`` one-GPU trainers in one Job, asking the topology by annotation."""
    pod: Obj = {
        "metadata": {"annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "trainer",
                    "image": "busybox",
                    "resources": {
                        "requests": {"cpu": "1", GPU: "1"},
                        "limits": {GPU: "1"},
                    },
                }
            ],
        },
    }
    job = {"parallelism": count, "completions": count, "template": pod}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": queue, "labels": {C.QUEUE_NAME_LABEL: queue}},
        "spec": {
            "replicatedJobs": [{"name": "trainers", "replicas": 1, "template": {"spec": job}}]
        },
    }


async def workload(api: KubeApi, ns: str, name: str) -> Obj | None:
    try:
        job = await api.get(JOBSET.resource, name, ns)
        return await api.get(R.WORKLOADS, JOBSET.workload_name(name, job["metadata"]["uid"]), ns)
    except errors.NotFound:
        return None


async def running_pods(api: KubeApi, ns: str, name: str) -> list[Obj]:
    pods = (await api.list(R.PODS, ns, label_selector=f"{JOBSET.pod_label}={name}"))["items"]
    return [
        p
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    ]


async def test_an_8_trainer_jobset_requiring_a_rack_goes_to_the_worker_with_a_rack_of_8(
    tas: TasBed,
) -> None:
    bed, ns = tas.bed, tas.name
    await bed.manager_api.create(
        JOBSET.resource, trainers("gang", ns, 8, **{taspods.REQUIRED_ANNOTATION: RACK}), ns
    )

    async def placed() -> Obj | None:
        wl = await workload(bed.manager_api, ns, "gang")
        if wl is None or checkstatus.check_state(wl, CHECK)[0] != "Ready":
            return None
        return wl

    wl = await wait_for(placed, timeout=90, what="the gang placed")
    assert wl is not None
    assert ws.status_of(wl).get("clusterName") == "worker-3"
    decision = json.loads(wl["metadata"]["annotations"][PLACEMENT_ANNOTATION])
    said = {c.split(":", 1)[0]: c for c in decision["candidates"]}
    assert (
        "no rack holds 8 pods of pod set trainers (1 nvidia.com/gpu each), the largest 6"
        in (said["worker-2"])
    ), said
    assert "topology: trainers:" in said["worker-3"], said

    # All 8 pods run on worker-3, each on a host of rack a (read from the pods' nodes).
    there = bed.worker_apis["worker-3"]
    pods = await wait_for(
        lambda: _all(running_pods(there, ns, "gang"), 8), timeout=90, what="8 trainers running"
    )
    assert pods is not None
    racks = {tas.hosts["worker-3"].get(p["spec"].get("nodeName", "")) for p in pods}
    assert racks == {"a"}, [p["spec"].get("nodeName") for p in pods]
    assert not await running_pods(bed.worker_apis["worker-2"], ns, "gang")

    # The assignment is on the manager's Workload: upstream's status field, and every level.
    async def copied_back() -> Obj | None:
        got = await workload(bed.manager_api, ns, "gang")
        annotations = (got or {}).get("metadata", {}).get("annotations") or {}
        return got if TOPOLOGY_ANNOTATION in annotations else None

    wl = await wait_for(copied_back, timeout=60, what="the assignment copied back")
    assert wl is not None
    (psa,) = ws.status_of(wl)["admission"]["podSetAssignments"]
    assert psa["topologyAssignment"]["levels"] == [HOST]
    assert psa.get("delayedTopologyRequest") == "Ready"
    spelled = json.loads(wl["metadata"]["annotations"][TOPOLOGY_ANNOTATION])
    assert spelled["cluster"] == "worker-3"
    assert spelled["levels"] == [BLOCK, RACK, HOST]
    domains = spelled["podSets"]["trainers"]
    assert {tuple(values[:2]) for values, _ in domains} == {("block-1", "a")}
    assert sum(count for _, count in domains) == 8
    assert {values[2] for values, _ in domains} == {p["spec"]["nodeName"] for p in pods}


async def test_a_rack_gang_waits_with_the_reason_when_free_gpus_are_spread_over_racks(
    tas: TasBed,
) -> None:
    """10 GPUs are free on worker-3 and 8 on worker-2, but no rack has 10: it waits, said
    per worker, and no copy goes anywhere (never split)."""
    bed, ns = tas.bed, tas.name
    await bed.manager_api.create(
        JOBSET.resource, trainers("spread", ns, 10, **{taspods.REQUIRED_ANNOTATION: RACK}), ns
    )

    async def told() -> str | None:
        wl = await workload(bed.manager_api, ns, "spread")
        message = checkstatus.check_state(wl, CHECK)[1] if wl is not None else ""
        return message if "no rack holds 10 pods" in message else None

    message = await wait_for(told, timeout=90, what="the wait's reason")
    assert message is not None
    assert "the largest 8" in message and "the largest 6" in message, message
    wl = await workload(bed.manager_api, ns, "spread")
    assert wl is not None and checkstatus.check_state(wl, CHECK)[0] == "Pending"
    for worker in RACKS:
        api = bed.worker_apis[worker]
        assert not (await api.list(R.WORKLOADS, ns))["items"], worker
        assert not await running_pods(api, ns, "spread"), worker


async def _all(pods: Any, count: int) -> list[Obj] | None:
    found = await pods
    return found if len(found) == count else None
