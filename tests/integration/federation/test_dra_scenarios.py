"""More DRA across the federation (#32), on real control planes (the bed of
``test_dra_federation.py``: workers with fake H100s in ResourceSlices, the real kube-scheduler
allocating claims):

- a partition request charged by its counters: a node of MIG-style a100s is added to
  worker-3 for the test (each GPU shares 7 ``slices`` among itself and its 1g and 3g
  partitions); a pod claiming one 3g partition is charged ``example.com/gpu-slices: 3`` on
  the manager and on the worker, placed where the partitions are, and the scheduler allocates
  a 3g partition there;
- an extended-resource-backed ``nvidia.com/gpu`` request charged once: the same node's a100
  class serves ``nvidia.com/gpu`` (DRAExtendedResource) and the node has no device plugin;
  a plain ``nvidia.com/gpu: 1`` container is charged ``example.com/gpu: 1`` (the class's
  mapped resource) and not ``nvidia.com/gpu`` as well, and the scheduler serves it with an
  a100 through a claim it makes itself;
- a ClusterQueue mixing device-plugin GPUs (``nvidia.com/gpu``) and DRA GPUs
  (``example.com/gpu``): a job of each, both charged, each once, on both sides;
- a JobSet whose GPU pod set claims devices from a template: placed whole on one worker, its
  template there, each pod's claim allocated there, the charge per pod set.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from e2e import binaries, examples
from e2e.local import dra as bed_dra
from e2e.local.kwoknodes import KWOK_NODE_ANNOTATION
from e2e.waiting import wait_for
from manager.api import constants as C
from manager.api import dra, draannotations
from manager.controllers import flags
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.jobset import JOBSET
from manager.controllers.runtime import ClusterController
from manager.federation.runtime import FederationController
from manager.federation.settings import ALLOWED_CLUSTERS_ANNOTATION, FederationSettings
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj
from tests.integration.controllers.builders import jobset
from tests.integration.federation import article
from tests.integration.federation.bed import (
    FAST_CONTROLLERS,
    FAST_FENCING,
    FAST_WORKER_CONTROLLERS,
    Bed,
    _fields,
)
from tests.integration.federation.test_dispatch import complete, placed
from tests.integration.federation.test_dra_federation import (
    GPU,
    H100,
    TEMPLATE,
    WORKER_QUOTA,
    allocated_claims,
    candidates,
    dra_job,
    template,
    usage,
    worker_copy,
)
from tests.integration.federation.test_drill import kfed
from tests.integration.federation.test_failover import WorkerSampler
from tests.integration.federation.test_job_kinds import placed_on, workload_of
from worker_shim.fencing import Fencing

pytestmark = pytest.mark.full
NS = article.NS
SLICES = "example.com/gpu-slices"
A100 = bed_dra.Devices(
    "a100",
    2,
    extended_resource_name="nvidia.com/gpu",
    partitions=bed_dra.Partitions(7, {"1g": 1, "3g": 3}),
)
A100_NODE = "worker-3-a100-0"
A100_3G = bed_dra.class_name("a100", "3g")
A100_ONLY = f'device.attributes["{bed_dra.DRIVER}"].model == "a100"'
MAPPINGS = dra.parse_device_class_mappings(
    json.dumps(
        [
            {
                "name": GPU,
                "deviceClassNames": [
                    H100,
                    bed_dra.class_name("rtx-a1000"),
                    bed_dra.class_name("a100"),
                ],
            },
            {
                "name": SLICES,
                "deviceClassNames": [bed_dra.class_name("a100", "1g"), A100_3G],
                "sources": [
                    {
                        "counter": {
                            "name": "slices",
                            "driver": bed_dra.DRIVER,
                            "deviceSelector": {"cel": {"expression": A100_ONLY}},
                        }
                    }
                ],
            },
        ]
    )
)


# -- the bed ------------------------------------------------------------------------------


async def add_quota(api: KubeApi, resource: str, per_flavor: dict[str, int]) -> None:
    """``resource`` in gpu-cq's one resource group, per flavor."""
    cq = await api.get(R.CLUSTER_QUEUES, "gpu-cq")
    groups = cq["spec"]["resourceGroups"]
    groups[0]["coveredResources"].append(resource)
    for flavor in groups[0]["flavors"]:
        flavor["resources"].append(
            {"name": resource, "nominalQuota": per_flavor.get(flavor["name"], 0)}
        )
    await api.patch(R.CLUSTER_QUEUES, "gpu-cq", {"spec": {"resourceGroups": groups}})


@pytest.fixture
async def devices_bed(article_bed: Bed) -> AsyncIterator[Bed]:
    """The article's bed with ``example.com/gpu`` (H100s and a100s by number) and
    ``example.com/gpu-slices`` (a100 partitions by counter) in gpu-cq's h100 flavor, on the
    manager and every worker, and the ``gpu-2`` template on the manager."""
    bed = article_bed
    await add_quota(bed.manager_api, GPU, {"h100": 16})
    await add_quota(bed.manager_api, SLICES, {"h100": 14})
    for worker, quota in WORKER_QUOTA.items():
        flavor = article.WORKER_FLAVORS[worker][0]
        await add_quota(bed.worker_apis[worker], GPU, {flavor: quota})
        await add_quota(bed.worker_apis[worker], SLICES, {flavor: 14})
    await bed.manager_api.create(R.RESOURCE_CLAIM_TEMPLATES, template(TEMPLATE, 2), NS)
    yield bed


async def start(bed: Bed) -> FederationController:
    """Shims and manager with this module's mapping."""
    for worker in ("worker-1", "worker-2", "worker-3"):
        api = bed.worker_apis[worker]
        shim = ClusterController(
            api, dataclasses.replace(FAST_WORKER_CONTROLLERS, device_class_mappings=MAPPINGS)
        )
        bed.shims[worker] = shim
        bed._start(f"shim/{worker}", shim.run())
        fence = Fencing(api, shim.state, FAST_FENCING)
        bed.fencing[worker] = fence
        bed._start(f"fencing/{worker}", fence.run())
        await asyncio.wait_for(shim.synced.wait(), 30)
    settings = FederationSettings(**{**_fields(bed.settings), "manager_identity": "test-manager"})
    controllers = dataclasses.replace(FAST_CONTROLLERS, device_class_mappings=MAPPINGS)
    return await bed.start_manager(
        controller=FederationController(bed.manager_api, settings, controllers)
    )


def a100_node() -> Obj:
    """A kwok node of the h100 flavor's label with no device plugin GPU: its GPUs are the
    a100s of its ResourceSlice only."""
    key, value = KWOK_NODE_ANNOTATION
    capacity = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": A100_NODE,
            "annotations": {key: value},
            "labels": {
                "gpu.model": "h100",
                "type": "kwok",
                "kubernetes.io/hostname": A100_NODE,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        "status": {"capacity": capacity, "allocatable": capacity},
    }


async def ready(api: KubeApi, node: str) -> bool:
    found = await api.get(R.NODES, node)
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in (found.get("status") or {}).get("conditions") or []
    )


@contextlib.asynccontextmanager
async def a100s_on_worker_3(bed: Bed) -> AsyncIterator[None]:
    """Add the a100 node to worker-3 with its DeviceClasses and ResourceSlices (as worker-3's
    Kubernetes takes them), wait until the node is Ready and the manager sees its devices;
    remove them afterwards."""
    api = bed.worker_apis["worker-3"]
    classes = bed_dra.device_classes([A100])
    kubernetes = binaries.read_versions(versions=bed.fed.cluster("worker-3").versions).kubernetes
    made = bed_dra.resource_slices(A100_NODE, A100, kubernetes=kubernetes)
    await api.create(R.NODES, a100_node())
    try:
        for device_class in classes:
            await api.create(R.DEVICE_CLASSES, device_class)
        for one in made:
            await api.create(R.RESOURCE_SLICES, one)
        await wait_for(lambda: ready(api, A100_NODE), timeout=60, what=f"{A100_NODE} Ready")
        assert bed.manager is not None
        remote = bed.manager.registry.remote("worker-3")
        assert remote is not None

        def seen() -> bool:
            found, _, known = remote.device_objects()
            names = {c["metadata"]["name"] for c in known}
            return {m["metadata"]["name"] for m in made} <= {
                s["metadata"]["name"] for s in found
            } and {c["metadata"]["name"] for c in classes} <= names

        await wait_for(seen, timeout=60, what="the manager seeing worker-3's a100s")
        yield
    finally:
        for res, name in (
            *((R.RESOURCE_SLICES, m["metadata"]["name"]) for m in made),
            *((R.DEVICE_CLASSES, c["metadata"]["name"]) for c in classes),
            (R.NODES, A100_NODE),
        ):
            with contextlib.suppress(errors.NotFound):
                await api.delete(res, name)


def charged(wl: Obj) -> dict[str, str]:
    """The resources its pod set is charged (``resourceUsage``), zeros left out."""
    return {r: q for r, q in usage(wl).items() if q != "0"}


def on_a100_node(job: Obj) -> Obj:
    """Only worker-3's a100 node serves the job's pods, and only worker-3 may run it."""
    job["metadata"].setdefault("annotations", {})[ALLOWED_CLUSTERS_ANNOTATION] = "worker-3"
    job["spec"]["template"]["spec"]["nodeSelector"] = {
        "gpu.model": "h100",
        "kubernetes.io/hostname": A100_NODE,
    }
    return job


async def pods_of(api: KubeApi, job: str) -> list[Obj]:
    return list((await api.list(R.PODS, NS, label_selector=f"job-name={job}"))["items"])


async def cq_reserved(api: KubeApi, flavor: str) -> dict[str, str]:
    cq = await api.get(R.CLUSTER_QUEUES, "gpu-cq")
    for f in (cq.get("status") or {}).get("flavorsReservation") or []:
        if f["name"] == flavor:
            return {r["name"]: str(r["total"]) for r in f["resources"]}
    return {}


# -- the scenarios --------------------------------------------------------------------------


async def test_a_partition_request_charged_by_its_counters(devices_bed: Bed) -> None:
    bed = devices_bed
    await start(bed)
    api, worker = bed.manager_api, bed.worker_apis["worker-3"]
    async with a100s_on_worker_3(bed):
        part = template("one-3g", 1)
        part["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = A100_3G
        await api.create(R.RESOURCE_CLAIM_TEMPLATES, part, NS)
        job = dra_job("partition")
        job["spec"]["template"]["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "one-3g"
        await api.create(R.JOBS, job, NS)
        wl = await wait_for(lambda: placed(api, "partition"), timeout=60, what="placed")
        assert ws.status_of(wl)["clusterName"] == "worker-3", candidates(wl)
        said = candidates(wl)
        assert any(c.startswith(f"worker-2: no DeviceClass {A100_3G}") for c in said), said

        # Charged by the counter its device consumes (3 slices), not as 1 device, on both sides.
        assert charged(wl) == {"cpu": "1", "memory": "1Gi", SLICES: "3"}, usage(wl)
        copy_ = await worker_copy(worker, wl["metadata"]["name"])
        assert copy_ is not None and charged(copy_) == charged(wl), copy_

        # The scheduler allocates a 3g partition of the a100 node.
        claims = await wait_for(lambda: allocated_claims(worker), timeout=60, what="allocated")
        (result,) = claims[0]["status"]["allocation"]["devices"]["results"]
        assert result["pool"] == A100_NODE and "-3g-" in result["device"], result
        await wait_for(lambda: complete(api, "partition"), timeout=90, what="Complete")
        print(
            f"charge: manager {SLICES}={usage(wl)[SLICES]}, worker-3 {SLICES}="
            f"{usage(copy_)[SLICES]}; allocated {result['device']}; {said}"
        )


async def test_an_extended_resource_backed_gpu_request_charged_once(devices_bed: Bed) -> None:
    bed = devices_bed
    await start(bed)
    api, worker = bed.manager_api, bed.worker_apis["worker-3"]
    async with a100s_on_worker_3(bed):
        job = on_a100_node(article.seed_job("03-heavy-job.yaml"))
        job["metadata"]["name"] = "extended"
        await api.create(R.JOBS, job, NS)
        wl = await wait_for(lambda: placed(api, "extended"), timeout=60, what="placed")
        assert ws.status_of(wl)["clusterName"] == "worker-3", candidates(wl)
        annotations = wl["metadata"]["annotations"]
        assert json.loads(annotations[draannotations.REPLACED_ANNOTATION]) == {
            "main": ["nvidia.com/gpu"]
        }

        # nvidia.com/gpu: 1 is charged once, as the a100 class's resource, on both sides.
        assert charged(wl) == {"cpu": "8", "memory": "32Gi", GPU: "1"}, usage(wl)
        copy_ = await worker_copy(worker, wl["metadata"]["name"])
        assert copy_ is not None and charged(copy_) == charged(wl), copy_

        # The worker's scheduler served the request with an a100 through its own claim.
        async def served() -> Obj:  # empty (falsy) until then
            for p in await pods_of(worker, "extended"):
                if (p.get("status") or {}).get("extendedResourceClaimStatus"):
                    return p
            return {}

        pod = await wait_for(served, timeout=60, what="the pod's extended resource claim")
        claim_name = pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"]

        async def allocated() -> Obj:  # empty (falsy) until then
            claim = await worker.get(R.RESOURCE_CLAIMS, claim_name, NS)
            return claim if (claim.get("status") or {}).get("allocation") else {}

        claim = await wait_for(allocated, timeout=60, what="its claim allocated")
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert result["pool"] == A100_NODE and result["device"].count("-") == 1, result
        await wait_for(lambda: complete(api, "extended"), timeout=90, what="Complete")
        print(
            f"charge: manager {usage(wl)}, worker-3 {usage(copy_)}; the pod's "
            f"nvidia.com/gpu served by {result['device']} of {result['pool']}"
        )


async def test_a_cluster_queue_mixing_device_plugin_and_dra_gpus_charges_each_once(
    devices_bed: Bed,
) -> None:
    bed = devices_bed
    await start(bed)
    api, worker = bed.manager_api, bed.worker_apis["worker-3"]
    plugin = article.seed_job("03-heavy-job.yaml", delay_ms=15_000)
    plugin["metadata"]["name"] = "plugin"
    devices = dra_job("devices", delay_ms=15_000)
    for job in (plugin, devices):
        job["metadata"].setdefault("annotations", {})[ALLOWED_CLUSTERS_ANNOTATION] = "worker-3"
        await api.create(R.JOBS, job, NS)
    plugin_wl = await wait_for(lambda: placed(api, "plugin"), timeout=60, what="plugin placed")
    devices_wl = await wait_for(lambda: placed(api, "devices"), timeout=60, what="devices placed")

    # Each charged its own GPUs only: no DRA-served class names nvidia.com/gpu on this bed.
    assert charged(plugin_wl) == {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"}
    assert charged(devices_wl) == {"cpu": "1", "memory": "1Gi", GPU: "2"}
    for wl in (plugin_wl, devices_wl):
        copy_ = await worker_copy(worker, wl["metadata"]["name"])
        assert copy_ is not None and charged(copy_) == charged(wl), copy_

    # The queues hold the sum of both, each resource once, on the manager and on worker-3.
    want = {"cpu": "9", "memory": "33Gi", "nvidia.com/gpu": "1", GPU: "2"}

    async def both_reserved(on: KubeApi) -> dict[str, str]:  # empty (falsy) until then
        found = {r: v for r, v in (await cq_reserved(on, "h100")).items() if v != "0"}
        return found if found == want else {}

    manager_side = await wait_for(lambda: both_reserved(api), timeout=30, what="manager's CQ")
    worker_side = await wait_for(lambda: both_reserved(worker), timeout=30, what="worker's CQ")
    claims = await wait_for(lambda: allocated_claims(worker), timeout=60, what="allocated")
    assert len(claims) == 1, "only the DRA job's pod holds a claim"
    await wait_for(lambda: complete(api, "plugin"), timeout=90, what="plugin Complete")
    await wait_for(lambda: complete(api, "devices"), timeout=90, what="devices Complete")
    print(f"gpu-cq h100 reserved: manager {manager_side}, worker-3 {worker_side}")


async def test_a_jobset_whose_gpu_pod_set_claims_templates_is_placed_whole(
    devices_bed: Bed,
) -> None:
    bed = devices_bed
    await start(bed)
    api = bed.manager_api
    await api.create(R.RESOURCE_CLAIM_TEMPLATES, template("gpu-1", 1), NS)
    body = jobset(NS, "claims", "gpu-lq", workers=4, model="h100", delay_ms=30_000)
    workers_pod = body["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    container: dict[str, Any] = workers_pod["containers"][0]
    container["resources"] = {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]}
    workers_pod["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu-1"}]
    await api.create(JOBSET.resource, body, NS)

    where = await wait_for(
        lambda: placed_on(api, JOBSET, "claims"), timeout=60, what="the JobSet placed"
    )
    assert where in ("worker-2", "worker-3")
    wl = await workload_of(api, JOBSET, "claims")
    assert wl is not None
    per_pod_set = {
        psa["name"]: {r: q for r, q in (psa.get("resourceUsage") or {}).items() if q != "0"}
        for psa in ws.status_of(wl)["admission"]["podSetAssignments"]
    }
    assert per_pod_set == {
        "driver": {"cpu": "1"},
        "workers": {"cpu": "4", GPU: "4"},
    }, per_pod_set
    wapi = bed.worker_apis[where]
    copy_ = await worker_copy(wapi, wl["metadata"]["name"])
    assert copy_ is not None
    copied = {
        psa["name"]: {r: q for r, q in (psa.get("resourceUsage") or {}).items() if q != "0"}
        for psa in ws.status_of(copy_)["admission"]["podSetAssignments"]
    }
    assert copied == per_pod_set

    # Its template travelled; each of the 4 GPU pods' claims is allocated there, one device.
    there = await wapi.get(R.RESOURCE_CLAIM_TEMPLATES, "gpu-1", NS)
    assert there["metadata"]["labels"][C.PREBUILT_WORKLOAD_LABEL] == wl["metadata"]["name"]

    async def four_allocated() -> list[Obj]:  # empty (falsy) until then
        claims = await allocated_claims(wapi)
        return claims if len(claims) == 4 else []

    claims = await wait_for(four_allocated, timeout=90, what="4 claims allocated")
    assert all(len(c["status"]["allocation"]["devices"]["results"]) == 1 for c in claims)
    for other, oapi in bed.worker_apis.items():
        if other != where:
            assert not (await oapi.list(JOBSET.resource, NS))["items"], f"nothing on {other}"
            assert not await allocated_claims(oapi)
    print(f"JobSet on {where}: charge per pod set manager {per_pod_set}, worker {copied}")


KINDS = {
    "Namespace": R.NAMESPACES,
    "ResourceFlavor": R.RESOURCE_FLAVORS,
    "ClusterQueue": R.CLUSTER_QUEUES,
    "LocalQueue": R.LOCAL_QUEUES,
    "DeviceClass": R.DEVICE_CLASSES,
    "ResourceClaimTemplate": R.RESOURCE_CLAIM_TEMPLATES,
    "Job": R.JOBS,
}


async def apply(api: KubeApi, name: str) -> None:
    """``kubectl apply --server-side -f examples/dra/NAME``, as shipped."""
    for doc in yaml.safe_load_all((examples.DRA / name).read_text()):
        if doc:
            meta = doc["metadata"]
            await api.patch(
                KINDS[doc["kind"]],
                meta["name"],
                doc,
                meta.get("namespace"),
                kind="apply",
                force=True,
            )


async def two_device_claims(api: KubeApi) -> int:
    return sum(
        1
        for c in await allocated_claims(api)
        if len(c["status"]["allocation"]["devices"]["results"]) == 2
    )


async def test_the_dra_example_as_shipped_is_placed_by_devices(article_bed: Bed) -> None:
    """examples/dra applied unchanged: the DeviceClass and the worker queues on every worker,
    the queues and the template on the manager, the manager run with the example's mapping;
    the Job goes to a worker with a node of 2 free H100s, worker-1 (quota, no H100) is named
    with the device reason, and ``kfed explain`` shows both."""
    bed = article_bed
    mappings = flags.device_class_mappings(f"@{examples.DRA / 'device-class-mappings.json'}")
    claims = WorkerSampler(bed.worker_apis, two_device_claims)
    try:
        for wapi in bed.worker_apis.values():
            await apply(wapi, "00-device-class.yaml")
            await apply(wapi, "02-worker-queues.yaml")
        await apply(bed.manager_api, "01-queues.yaml")
        await apply(bed.manager_api, "03-claim-template.yaml")
        for worker in bed.worker_apis:
            await bed.start_shim(worker)
        settings = FederationSettings(
            **{**_fields(bed.settings), "manager_identity": "test-manager"}
        )
        controllers = dataclasses.replace(FAST_CONTROLLERS, device_class_mappings=mappings)
        await bed.start_manager(
            controller=FederationController(bed.manager_api, settings, controllers)
        )
        api = bed.manager_api
        # The pod's claim lives while it runs (a few seconds): sampled on every worker.
        claims.start()
        await apply(api, "04-job.yaml")
        wl = await wait_for(lambda: placed(api, "train-dra"), timeout=60, what="train-dra placed")
        where = ws.status_of(wl)["clusterName"]
        assert where in ("worker-2", "worker-3"), candidates(wl)
        assert charged(wl) == {"cpu": "4", "memory": "16Gi", "example.com/gpu": "2"}, usage(wl)
        said = candidates(wl)
        refused = "no h100.example.com device matches [pod set main: 1 pod(s) x 2 h100.example.com]"
        assert f"worker-1: {refused}" in said, said
        chosen = next(c for c in said if c.startswith(f"{where}: "))
        assert f"devices: 1 pod on {where}-h100-" in chosen, chosen

        code, out, err = await kfed(bed, "explain", f"{NS}/train-dra", "-o", "json")
        assert code == 0, err
        assert refused in out, out
        await wait_for(lambda: complete(api, "train-dra"), timeout=90, what="train-dra Complete")
        await claims.stop()
        assert set(claims.seen_on) == {where}, claims.seen_on  # 2 devices allocated there
        print(f"examples/dra: placed on {where}; {said}")
    finally:
        await claims.stop()
        await bed.stop_all()
        for cluster_api in (bed.manager_api, *bed.worker_apis.values()):
            with contextlib.suppress(errors.NotFound):
                await cluster_api.delete(R.CLUSTER_QUEUES, "dra-cq")
        for wapi in bed.worker_apis.values():
            with contextlib.suppress(errors.NotFound):
                await wapi.delete(R.DEVICE_CLASSES, "h100.example.com")
