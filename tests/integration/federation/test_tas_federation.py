"""Topology-aware placement across workers (docs/tas.md, issue #35), on real control planes:
the manager picks the worker by the racks its shim reports, the worker's shim picks the
hosts, and the real kube-scheduler binds the pods there.

Each test adds its own kwok nodes (tainted with the test's id, so no other test's pods land
on them) in racks of one block, a Topology of block, rack and hostname, a TAS flavor of those
nodes and its queues on the manager and on worker-2 and worker-3 (worker-1 has none of them):

- worker-2: rack ``a`` of 2 hosts with 3 free GPUs each (6), rack ``b`` of 1 host with 2;
- worker-3: racks ``a`` and ``b`` of 2 hosts with 4 GPUs each (8 each).

Quota is never the limit (64 GPUs on every side): only the racks decide.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from e2e.waiting import WaitTimeout, wait_for
from manager.api import constants as C
from manager.api.tasprovisioning import Topology
from manager.controllers import taspods
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.jobkinds.jobset import JOBSET
from manager.controllers.jobkinds.trainjob import TRAINJOB
from manager.federation.decisions import checkstatus
from manager.federation.engine.topologyback import ANNOTATION as TOPOLOGY_ANNOTATION
from manager.federation.settings import ALLOWED_CLUSTERS_ANNOTATION, PLACEMENT_ANNOTATION
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj
from tests.integration.controllers.test_tas import node
from tests.integration.federation.bed import CHECK, Bed
from tests.integration.federation.runs import RunWatch
from tests.integration.federation.test_drill import kfed
from tests.integration.federation.test_job_kinds import install_runtime, users_trainjob_entry

pytestmark = pytest.mark.full

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
GPU = "nvidia.com/gpu"
TOPOLOGIES = R.of(Topology.resource)
RACKS = {
    "worker-2": {"a": [3, 3], "b": [2]},
    "worker-3": {"a": [4, 4], "b": [4, 4]},
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

        def all_connected() -> bool:
            # A placement made before a worker connects says "not connected" of it.
            assert bed.manager is not None
            remotes = [bed.manager.registry.remote(w) for w in RACKS]
            return all(r is not None and r.connected for r in remotes)

        await wait_for(all_connected, timeout=60, what="the manager connected to every worker")
        yield TasBed(bed, name, hosts)
    finally:
        await bed.stop_all()
        for api, res, body in reversed(made):
            meta = body["metadata"]
            with contextlib.suppress(errors.NotFound):
                await api.delete(res, meta["name"], meta.get("namespace"))


RUN_FOR = "10m"
"""How long kwok keeps a trainer Running (its default is 3 s): the tests read running gangs."""


def trainers(name: str, queue: str, count: int, **annotations: str) -> Obj:
    """A JobSet of ``count`` one-GPU trainers in one Job, asking the topology by annotation,
    each running for ``RUN_FOR``."""
    pod: Obj = {
        "metadata": {
            "annotations": {**annotations, "pod-complete.stage.kwok.x-k8s.io/delay": RUN_FOR}
        },
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
    assert len(racks) == 1 and None not in racks, [p["spec"].get("nodeName") for p in pods]
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
    assert {tuple(values[:2]) for values, _ in domains} == {("block-1", *racks)}
    assert sum(count for _, count in domains) == 8
    assert {values[2] for values, _ in domains} == {p["spec"]["nodeName"] for p in pods}

    # kfed explain says it: the worker, the levels, block / rack / host of each domain.
    code, out, err = await kfed(bed, "explain", f"{ns}/gang")
    assert code == 0, err
    (rack,) = racks
    assert "Topology:" in out and "on worker-3 (block / rack / host)" in out, out
    assert f"trainers: block-1 / {rack} / " in out, out


async def test_a_rack_gang_waits_with_the_reason_when_free_gpus_are_spread_over_racks(
    tas: TasBed, tmp_path: Path
) -> None:
    """16 GPUs are free on worker-3 and 8 on worker-2, but no rack has 10: it waits, said
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
    # kfed whatif, for the same JobSet not submitted yet, gives each worker the same reason.
    manifest = tmp_path / "spread.yaml"
    manifest.write_text(
        json.dumps(trainers("spread-2", ns, 10, **{taspods.REQUIRED_ANNOTATION: RACK}))
    )
    code, out, err = await kfed(bed, "whatif", str(manifest))
    assert code == 0, err
    assert "no rack holds 10 pods of pod set trainers" in out, out
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


async def placed_and_running(tas: TasBed, name: str, count: int) -> tuple[str, list[Obj]]:
    """The worker the manager placed JobSet ``name`` on, once its ``count`` pods run there."""
    bed, ns = tas.bed, tas.name

    async def placed() -> str | None:
        wl = await workload(bed.manager_api, ns, name)
        if wl is None or checkstatus.check_state(wl, CHECK)[0] != "Ready":
            return None
        return str(ws.status_of(wl).get("clusterName") or "") or None

    worker = await wait_for(placed, timeout=90, what=f"{name} placed")
    assert worker is not None
    pods = await wait_for(
        lambda: _all(running_pods(bed.worker_apis[worker], ns, name), count),
        timeout=90,
        what=f"{count} pods of {name} running on {worker}",
    )
    assert pods is not None
    return worker, pods


async def submitted_and_running(
    tas: TasBed, name: str, count: int, **asked: str
) -> tuple[str, list[Obj]]:
    """Submit ``count`` trainers asking ``asked`` of the topology (default: a rack, required)
    on the manager; the worker it runs on and its pods, once all run."""
    body = trainers(name, tas.name, count, **(asked or {taspods.REQUIRED_ANNOTATION: RACK}))
    await tas.bed.manager_api.create(JOBSET.resource, body, tas.name)
    return await placed_and_running(tas, name, count)


def racks_of(tas: TasBed, worker: str, pods: list[Obj]) -> dict[str, int]:
    """Rack -> pods of ``pods`` on its hosts (read from the pods' nodes)."""
    found: dict[str, int] = {}
    for pod in pods:
        rack = tas.hosts[worker][pod["spec"]["nodeName"]]
        found[rack] = found.get(rack, 0) + 1
    return found


async def test_preferred_a_rack_goes_to_the_worker_where_one_rack_holds_it(tas: TasBed) -> None:
    """7 trainers preferring a rack: worker-2 holds them only across its racks (6 + 2),
    worker-3 in one rack: the tighter placement wins."""
    asked = {taspods.PREFERRED_ANNOTATION: RACK}
    worker, pods = await submitted_and_running(tas, "pref", 7, **asked)
    assert worker == "worker-3"
    assert list(racks_of(tas, worker, pods).values()) == [7]


async def test_preferred_falls_back_to_a_wider_level_when_no_rack_holds_it(tas: TasBed) -> None:
    """10 trainers preferring a rack: no rack anywhere has 10, worker-2 has 8 GPUs in all;
    worker-3's block holds them in its two racks, and they run there, not waiting."""
    asked = {taspods.PREFERRED_ANNOTATION: RACK}
    worker, pods = await submitted_and_running(tas, "wide", 10, **asked)
    assert worker == "worker-3"
    assert sorted(racks_of(tas, worker, pods).values()) == [2, 8]


async def test_slices_of_4_each_land_on_one_host(tas: TasBed) -> None:
    """16 trainers in slices of 4, each slice on one host, all in one block: only worker-3
    has hosts of 4 free GPUs; every host there gets one whole slice."""
    bed, ns = tas.bed, tas.name
    asked = {
        taspods.REQUIRED_ANNOTATION: BLOCK,
        taspods.SLICE_REQUIRED_ANNOTATION: HOST,
        taspods.SLICE_SIZE_ANNOTATION: "4",
    }
    await bed.manager_api.create(JOBSET.resource, trainers("sliced", ns, 16, **asked), ns)
    worker, pods = await placed_and_running(tas, "sliced", 16)
    assert worker == "worker-3"
    per_host: dict[str, int] = {}
    for pod in pods:
        per_host[pod["spec"]["nodeName"]] = per_host.get(pod["spec"]["nodeName"], 0) + 1
    assert sorted(per_host.values()) == [4, 4, 4, 4], per_host
    wl = await workload(bed.manager_api, ns, "sliced")
    assert wl is not None
    decision = json.loads(wl["metadata"]["annotations"][PLACEMENT_ANNOTATION])
    said = {c.split(":", 1)[0]: c for c in decision["candidates"]}
    assert "no block holds 16 pods in slices of 4 (each on one host)" in said["worker-2"], said


async def test_a_failed_node_of_a_running_gang_evicts_it_and_it_runs_again_in_one_rack_once(
    tas: TasBed,
) -> None:
    """Item 1's policy under the federation: a node of a running 8-trainer gang is deleted
    on its worker; the worker evicts the gang (NodeFailures) and it runs again, whole, in one
    rack of a worker that has one (worker-3's other rack), never on the failed node and never
    on two workers at once."""
    bed, ns = tas.bed, tas.name
    watched = {w: bed.worker_apis[w] for w in RACKS}
    async with RunWatch(watched, ns, label=JOBSET.pod_label) as runs:
        worker, pods = await submitted_and_running(tas, "hit", 8)
        (first_rack,) = racks_of(tas, worker, pods)
        failed = pods[0]["spec"]["nodeName"]
        await bed.worker_apis[worker].delete(R.NODES, failed)

        async def again() -> tuple[str, list[Obj]] | None:
            for name, api in watched.items():
                alive = await running_pods(api, ns, "hit")
                if len(alive) == 8 and all(p["spec"]["nodeName"] != failed for p in alive):
                    return name, alive
            return None

        found = await wait_for(again, timeout=150, what="the gang running again")
        assert found is not None
        where, alive = found
        racks = racks_of(tas, where, alive)
        assert len(racks) == 1, racks
        assert (where, *racks) != (worker, first_rack), "placed again on the failed rack"
    assert not runs.double_runs(), "the gang ran on two workers at once"


async def test_a_rack_gang_fails_over_to_another_worker_with_a_fitting_rack(
    tas: TasBed,
) -> None:
    """6 trainers requiring a rack run on worker-2 (rack a holds exactly 6; worker-3 fits
    too, worker-2 comes first in the config); worker-2 is cut off: it fences the gang, which
    then runs whole in one rack of worker-3, never on both."""
    bed, ns = tas.bed, tas.name
    watched = {w: bed.worker_apis[w] for w in RACKS}
    async with RunWatch(watched, ns, label=JOBSET.pod_label) as runs:
        worker, pods = await submitted_and_running(tas, "move", 6)
        assert worker == "worker-2"
        assert racks_of(tas, worker, pods) == {"a": 6}
        bed.proxies[worker].cut()
        try:
            elsewhere = await wait_for(
                lambda: _all(running_pods(bed.worker_apis["worker-3"], ns, "move"), 6),
                timeout=120,
                what="the gang running on worker-3",
            )
            assert elsewhere is not None
            assert len(racks_of(tas, "worker-3", elsewhere)) == 1
            assert not await running_pods(bed.worker_apis[worker], ns, "move"), "fenced there"
        finally:
            bed.proxies[worker].heal()
    assert not runs.double_runs(), "the gang ran on two workers at once"
    assert runs.clusters_of("move") == {"worker-2", "worker-3"}


PICTURE_DATA = Path(__file__).resolve().parents[3] / "artifacts" / "tas-racks.json"
"""What ``python -m e2e.bench.taspicture`` draws docs/img/tas-racks.png from."""


async def test_two_gangs_on_one_worker_each_get_a_rack_of_their_own(tas: TasBed) -> None:
    """Two gangs requiring a rack, both allowed only on worker-3: 8 trainers fill one rack,
    6 go to the other (the first rack has no room left). Where every pod ran is saved for the
    picture in docs/tas.md."""
    bed, ns = tas.bed, tas.name
    racks: dict[str, dict[str, int]] = {}
    pods_of: dict[str, list[Obj]] = {}
    for name, count in (("gang-a", 8), ("gang-b", 6)):
        body = trainers(name, ns, count, **{taspods.REQUIRED_ANNOTATION: RACK})
        body["metadata"]["annotations"] = {ALLOWED_CLUSTERS_ANNOTATION: "worker-3"}
        await bed.manager_api.create(JOBSET.resource, body, ns)
        worker, pods = await placed_and_running(tas, name, count)
        assert worker == "worker-3"
        racks[name] = racks_of(tas, worker, pods)
        pods_of[name] = pods
    assert len(racks["gang-a"]) == 1 and len(racks["gang-b"]) == 1, racks
    assert set(racks["gang-a"]) != set(racks["gang-b"]), racks

    record = {
        "worker": "worker-3",
        "hosts": [
            {"host": host, "rack": rack, "gpus": RACKS["worker-3"][rack][int(host[-1])]}
            for host, rack in sorted(tas.hosts["worker-3"].items())
        ],
        "jobs": {
            name: sorted(p["spec"]["nodeName"] for p in pods) for name, pods in pods_of.items()
        },
    }
    PICTURE_DATA.parent.mkdir(parents=True, exist_ok=True)
    PICTURE_DATA.write_text(json.dumps(record, indent=2) + "\n")


async def test_three_rack_gangs_at_once_fill_two_racks_and_the_third_waits_on_the_manager(
    tas: TasBed,
) -> None:
    """Three gangs of 8 requiring a rack, submitted together, only worker-3 has racks of 8
    (two): the manager counts what it sent there and the worker has not admitted yet as
    taken, so two run there, one per rack, and the third waits on the manager with the
    reason, no copy of it on any worker."""
    bed, ns = tas.bed, tas.name
    names = ("g1", "g2", "g3")
    for name in names:
        body = trainers(name, ns, 8, **{taspods.REQUIRED_ANNOTATION: RACK})
        await bed.manager_api.create(JOBSET.resource, body, ns)

    seen: dict[str, tuple[str, str]] = {}

    async def settled() -> tuple[list[str], str] | None:
        placed, waiting = [], []
        for name in names:
            wl = await workload(bed.manager_api, ns, name)
            if wl is None:
                return None
            state, message = checkstatus.check_state(wl, CHECK)
            seen[name] = (state, message)
            if state == "Ready":
                placed.append(name)
            elif "no rack holds 8 pods" in message and "worker-3" in message:
                waiting.append(message)
        return (placed, waiting[0]) if len(placed) == 2 and len(waiting) == 1 else None

    try:
        found = await wait_for(settled, timeout=120, what="two gangs placed, one waiting")
    except WaitTimeout as err:
        raise AssertionError(f"{err}; the checks: {seen}") from None
    assert found is not None
    placed, _ = found
    (left,) = set(names) - set(placed)
    racks = set()
    for name in placed:
        worker, pods = await placed_and_running(tas, name, 8)
        assert worker == "worker-3"
        racks |= set(racks_of(tas, worker, pods))
    assert racks == {"a", "b"}

    # No copy of the third stays on a worker, and no pod of it is ever bound. Once, in a full
    # run on a loaded machine, a copy of it was still on worker-3 while the manager already
    # said it waits (that run kept no log of why it was sent): it is given time to go.
    async def none_of_the_third_left() -> bool:
        for worker in RACKS:
            api = bed.worker_apis[worker]
            copies = (await api.list(R.WORKLOADS, ns))["items"]
            pods = (await api.list(R.PODS, ns))["items"]
            bound = [
                p["metadata"]["name"]
                for p in pods
                if p["metadata"]["name"].startswith(f"{left}-") and p["spec"].get("nodeName")
            ]
            assert not bound, (worker, bound)
            if [c for c in copies if left in c["metadata"]["name"]]:
                return False
        return True

    await wait_for(none_of_the_third_left, timeout=60, what=f"no copy of {left} on a worker")


RUN_BRIEFLY = "4s"
"""How long kwok runs each pod of the kinds test: long enough to be seen bound, then done."""


def rack_job(kind: JobKind, name: str, ns: str, count: int) -> Obj:
    """``count`` one-GPU pods requiring a rack, of ``kind``, as a user submits it."""
    asked = {
        taspods.REQUIRED_ANNOTATION: RACK,
        "pod-complete.stage.kwok.x-k8s.io/delay": RUN_BRIEFLY,
    }
    meta = {"name": name, "namespace": ns, "labels": {C.QUEUE_NAME_LABEL: ns}}
    gpu = {"requests": {"cpu": "1", GPU: "1"}, "limits": {GPU: "1"}}
    if kind is TRAINJOB:
        return {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": meta,
            "spec": {
                "runtimeRef": {"name": "torch-distributed"},
                "trainer": {"numNodes": count, "resourcesPerNode": gpu},
                **users_trainjob_entry("node", {"metadata": {"annotations": asked}}),
            },
        }
    if kind is JOBSET:
        body = trainers(name, ns, count, **asked)
        body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"][
            "annotations"
        ] = asked
        return body
    pod: Obj = {
        "metadata": {"annotations": asked},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox", "resources": gpu}],
        },
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {"suspend": True, "parallelism": count, "completions": count, "template": pod},
    }


@pytest.mark.parametrize("kind", [BATCH_JOB, JOBSET, TRAINJOB], ids=lambda k: k.resource.kind)
async def test_a_rack_gang_of_each_kind_runs_in_one_rack_and_completes_on_the_manager(
    tas: TasBed, kind: JobKind
) -> None:
    """Issue #44 item 1: a plain batch/v1 Job requiring a rack was placed and never started
    (its worker Job got the manager Job's controller-uid labels from the Workload's template:
    422). A Job, a JobSet and a TrainJob of 4 one-GPU pods requiring a rack each run on one
    worker, every pod in one rack there, and end Complete on the manager."""
    bed, ns = tas.bed, tas.name
    if kind is TRAINJOB:
        await install_runtime(bed.manager_api)
    watched = {w: bed.worker_apis[w] for w in RACKS}
    async with RunWatch(watched, ns, label=kind.pod_label) as runs:
        await bed.manager_api.create(kind.resource, rack_job(kind, "gang", ns, 4), ns)

        async def ended() -> bool | None:
            found = kind.outcome(await bed.manager_api.get(kind.resource, "gang", ns))
            return found.succeeded if found is not None else None

        succeeded = await wait_for(ended, timeout=120, what=f"the {kind.resource.kind} ended")
        assert succeeded is True
        (worker,) = runs.nodes["gang"]
        nodes = runs.nodes["gang"][worker]
        racks = {tas.hosts[worker].get(n) for n in nodes}
        assert len(racks) == 1 and None not in racks, (worker, nodes)
    assert not runs.double_runs()
    assert len(runs.succeeded["gang"]) == 4, "each of the 4 pods succeeded, once"
