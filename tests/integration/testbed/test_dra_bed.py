"""DRA on the test bed, with no kfed involved: hand-made DeviceClasses and ResourceSlices for
kwok nodes (from the node set file's ``devices:``), claims made from their templates by
kube-controller-manager's resource-claim controller, allocated by the real kube-scheduler,
and pods run by kwok. Also the two alpha features the bed turns on: devices sharing counters
(MIG-style partitions, DRAPartitionableDevices) and a DeviceClass serving an extended resource
(DRAExtendedResource).

One full cluster of its own (the tests count free devices, so no other test may hold any);
each test deletes its namespace, and waits until it is gone, so that its devices are free
again for the next."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import yaml

from e2e import binaries
from e2e.local.cluster import LocalCluster
from e2e.local.federation import LocalFederation
from e2e.waiting import wait_for
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

pytestmark = pytest.mark.full

DEVICE_CLASSES = R.Resource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False)
RESOURCE_SLICES = R.Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False)
RESOURCE_CLAIMS = R.Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True)

NODES = {
    "clusters": {
        "manager": [
            # DRA only: no `nvidia.com/gpu` in allocatable, so that the DeviceClass's
            # extendedResourceName is what serves a pod's `nvidia.com/gpu` request here.
            {
                "name": "h100",
                "count": 2,
                "labels": {"gpu.model": "h100"},
                "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
                "devices": {"model": "h100", "count": 4, "extendedResourceName": "nvidia.com/gpu"},
            },
            {
                "name": "a100",
                "count": 1,
                "labels": {"gpu.model": "a100"},
                "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
                "devices": {
                    "model": "a100",
                    "count": 2,
                    "partitions": {"slices": 7, "profiles": {"1g": 1, "3g": 3}},
                },
            },
            # device plugin style only, as the default node set's nodes are too
            {
                "name": "rtx-a1000",
                "count": 1,
                "labels": {"gpu.model": "rtx-a1000"},
                "capacity": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "2", "pods": "110"},
            },
        ]
    }
}


@pytest.fixture(scope="module")
def dra_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root = tmp_path_factory.mktemp(f"kfed-{os.getpid()}")
    nodes_file = root / "nodes.yaml"
    nodes_file.write_text(yaml.safe_dump(NODES))
    fed = LocalFederation(
        "dra", workers=0, full=True, nodes_file=nodes_file, root=root, tie_to_parent=True
    )
    assert fed.dra, "DRA comes with the full bed"
    try:
        binaries.path_of("kube-apiserver")
    except binaries.BinariesMissing as err:
        pytest.fail(f"{err}. `make test` builds them; run `make binaries` first.")
    fed.up()
    try:
        yield fed.cluster("manager")
    finally:
        fed.down()


@pytest.fixture
async def api(dra_bed: LocalCluster) -> AsyncIterator[KubeApi]:
    async with await KubeApi.from_kubeconfig_file(dra_bed.kubeconfig) as client:
        yield client


@pytest.fixture
async def ns(api: KubeApi, unique: str) -> AsyncIterator[str]:
    """A namespace of the test's own; deleted afterwards, and waited for until gone, so its
    pods' claims are deallocated and deleted before the next test counts free devices."""
    name = f"dra-{unique}"
    await api.create(R.NAMESPACES, {"metadata": {"name": name}})
    yield name
    await api.delete(R.NAMESPACES, name)

    async def gone() -> bool:
        try:
            await api.get(R.NAMESPACES, name)
        except errors.NotFound:
            return True
        return False

    await wait_for(gone, timeout=90, what=f"namespace {name} deleted")


def template(name: str, device_class: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpus",
                            "exactly": {"deviceClassName": device_class, "count": count},
                        }
                    ]
                }
            }
        },
    }


def pod_spec(
    claim_template: str | None = None,
    *,
    requests: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "cuda", "image": "nvidia/cuda:12.4.1-runtime-ubuntu22.04"}
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if claim_template is not None:
        spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": claim_template}]
        container["resources"] = {"claims": [{"name": "gpus"}]}
    if requests is not None:
        container["resources"] = {"requests": requests, "limits": requests}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    return spec


def pod(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


async def running(api: KubeApi, ns: str, name: str) -> dict[str, Any]:
    async def check() -> dict[str, Any]:  # empty (falsy) until it runs
        found = await api.get(R.PODS, name, ns)
        return found if found.get("status", {}).get("phase") == "Running" else {}

    found: dict[str, Any] = await wait_for(check, timeout=60, what=f"pod {name} Running")
    return found


async def unschedulable(api: KubeApi, ns: str, name: str) -> dict[str, Any]:
    """The pod's PodScheduled condition once the scheduler has given up on it."""

    async def check() -> dict[str, Any]:  # empty (falsy) until then
        found = await api.get(R.PODS, name, ns)
        for condition in found.get("status", {}).get("conditions", []):
            if condition["type"] == "PodScheduled" and condition["reason"] == "Unschedulable":
                return dict(condition)
        return {}

    condition: dict[str, Any] = await wait_for(check, timeout=60, what=f"pod {name} Unschedulable")
    return condition


async def claim_of(api: KubeApi, ns: str, found_pod: dict[str, Any]) -> dict[str, Any]:
    """The claim the resource-claim controller made from the pod's template."""
    (status,) = found_pod["status"]["resourceClaimStatuses"]
    assert status["name"] == "gpus"
    return await api.get(RESOURCE_CLAIMS, status["resourceClaimName"], ns)


def allocated(claim: dict[str, Any], on_node: str) -> list[dict[str, Any]]:
    """The claim's allocated devices, checked to be of kfed's driver, on ``on_node``, and
    the claim reserved for the one pod that owns it."""
    allocation = claim["status"]["allocation"]
    results: list[dict[str, Any]] = allocation["devices"]["results"]
    assert {(r["driver"], r["pool"]) for r in results} == {("gpu.kfed.io", on_node)}
    (term,) = allocation["nodeSelector"]["nodeSelectorTerms"]
    assert term["matchFields"] == [{"key": "metadata.name", "operator": "In", "values": [on_node]}]
    (owner,) = claim["metadata"]["ownerReferences"]
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": owner["name"], "uid": owner["uid"]}
    ]
    return results


async def test_device_classes_and_slices_are_as_the_node_file_says(api: KubeApi) -> None:
    classes = {c["metadata"]["name"]: c for c in (await api.list(DEVICE_CLASSES))["items"]}
    assert set(classes) == {
        "h100.gpu.kfed.io",
        "a100.gpu.kfed.io",
        "a100-1g.gpu.kfed.io",
        "a100-3g.gpu.kfed.io",
    }
    # kept by kube-apiserver: DRAExtendedResource is on
    assert classes["h100.gpu.kfed.io"]["spec"]["extendedResourceName"] == "nvidia.com/gpu"

    slices = (await api.list(RESOURCE_SLICES, field_selector="spec.driver=gpu.kfed.io"))["items"]
    by_node = {s["spec"]["nodeName"]: s["spec"] for s in slices if "devices" in s["spec"]}
    assert set(by_node) == {"manager-h100-0", "manager-h100-1", "manager-a100-0"}, "no rtx slice"
    for node in ("manager-h100-0", "manager-h100-1"):
        devices = by_node[node]["devices"]
        assert [d["name"] for d in devices] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
        assert {d["attributes"]["model"]["string"] for d in devices} == {"h100"}
        assert by_node[node]["pool"] == {"name": node, "generation": 1, "resourceSliceCount": 1}
    a100 = by_node["manager-a100-0"]
    # kept by kube-apiserver: DRAPartitionableDevices is on. From Kubernetes 1.35 the
    # counters are a slice of their own in the node's pool (e2e/local/dra.py).
    (counters,) = [s["spec"] for s in slices if "sharedCounters" in s["spec"]]
    assert counters["nodeName"] == "manager-a100-0"
    assert counters["pool"] == a100["pool"]
    assert [s["name"] for s in counters["sharedCounters"]] == ["gpu-0", "gpu-1"]
    assert len(a100["devices"]) == 2 * (1 + 7 + 2)
    assert all(d["consumesCounters"] for d in a100["devices"])

    nodes = {n["metadata"]["name"]: n for n in (await api.list(R.NODES))["items"]}
    assert "nvidia.com/gpu" not in nodes["manager-h100-0"]["status"]["allocatable"]
    assert nodes["manager-rtx-a1000-0"]["status"]["allocatable"]["nvidia.com/gpu"] == "2"


async def test_a_job_gets_two_h100s_and_a_pod_finds_no_node_with_enough_free(
    api: KubeApi, ns: str
) -> None:
    await api.create(R.RESOURCE_CLAIM_TEMPLATES, template("two-h100", "h100.gpu.kfed.io", 2), ns)
    await api.create(R.RESOURCE_CLAIM_TEMPLATES, template("three-h100", "h100.gpu.kfed.io", 3), ns)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {
            "template": {
                # stays Running until the test's namespace goes
                "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "10m"}},
                "spec": pod_spec("two-h100"),
            }
        },
    }
    await api.create(R.JOBS, job, ns)

    async def job_pod_running() -> dict[str, Any] | None:
        pods = (await api.list(R.PODS, ns, label_selector="job-name=train"))["items"]
        return next((p for p in pods if p.get("status", {}).get("phase") == "Running"), None)

    first = await wait_for(job_pod_running, timeout=60, what="the Job's pod Running")
    first_node = first["spec"]["nodeName"]
    claim = await claim_of(api, ns, first)
    assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpus"
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2
    assert len(allocated(claim, first_node)) == 2

    # 3 devices: not where the Job holds 2 of 4, so on the other H100 node
    await api.create(R.PODS, pod("second", pod_spec("three-h100")), ns)
    second = await running(api, ns, "second")
    assert second["spec"]["nodeName"] not in (first_node, "")
    assert len(allocated(await claim_of(api, ns, second), second["spec"]["nodeName"])) == 3

    # 3 more: 3 H100s are free, but 2 on one node and 1 on the other
    await api.create(R.PODS, pod("third", pod_spec("three-h100")), ns)
    condition = await unschedulable(api, ns, "third")
    assert "cannot allocate all claims" in condition["message"], condition
    third = await api.get(R.PODS, "third", ns)
    assert "nodeName" not in third["spec"]
    pending = await claim_of(api, ns, third)
    assert "allocation" not in pending.get("status", {}), "made, but not allocated"


async def test_partitions_share_their_gpus_counters(api: KubeApi, ns: str) -> None:
    await api.create(R.RESOURCE_CLAIM_TEMPLATES, template("two-3g", "a100-3g.gpu.kfed.io", 2), ns)
    await api.create(R.RESOURCE_CLAIM_TEMPLATES, template("two-a100", "a100.gpu.kfed.io", 2), ns)
    await api.create(R.PODS, pod("parts", pod_spec("two-3g")), ns)
    parts = await running(api, ns, "parts")
    assert parts["spec"]["nodeName"] == "manager-a100-0"
    results = allocated(await claim_of(api, ns, parts), "manager-a100-0")
    assert len(results) == 2
    assert all(re.fullmatch(r"gpu-[01]-3g-[01]", r["device"]) for r in results), results

    # Both whole A100s are devices of their own, still unallocated, but the partitions
    # consume their counters: no node has two whole A100s left.
    await api.create(R.PODS, pod("whole", pod_spec("two-a100")), ns)
    condition = await unschedulable(api, ns, "whole")
    assert "cannot allocate all claims" in condition["message"], condition

    # The partitions' pod goes: its claim is deallocated, and the whole GPUs fit.
    await api.delete(R.PODS, "parts", ns)
    whole = await running(api, ns, "whole")
    results = allocated(await claim_of(api, ns, whole), "manager-a100-0")
    assert sorted(r["device"] for r in results) == ["gpu-0", "gpu-1"]


async def test_an_extended_resource_request_is_served_by_dra_where_no_device_plugin_is(
    api: KubeApi, ns: str
) -> None:
    gpus = {"nvidia.com/gpu": "2"}
    await api.create(
        R.PODS, pod("dra", pod_spec(requests=gpus, node_selector={"gpu.model": "h100"})), ns
    )
    found = await running(api, ns, "dra")
    node = found["spec"]["nodeName"]
    # the scheduler made one claim for the pod's extended resources and allocated it
    status = found["status"]["extendedResourceClaimStatus"]
    assert status["requestMappings"] == [
        {"containerName": "cuda", "requestName": status["requestMappings"][0]["requestName"],
         "resourceName": "nvidia.com/gpu"}
    ]  # fmt: skip
    claim = await api.get(RESOURCE_CLAIMS, status["resourceClaimName"], ns)
    assert (
        claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"] == "true"
    )
    results = allocated(claim, node)
    assert len(results) == 2
    assert {r["device"] for r in results} <= {"gpu-0", "gpu-1", "gpu-2", "gpu-3"}

    # The same request on a node with `nvidia.com/gpu` in its allocatable: the device plugin
    # path, as before, with no claim.
    selector = {"gpu.model": "rtx-a1000"}
    await api.create(R.PODS, pod("plugin", pod_spec(requests=gpus, node_selector=selector)), ns)
    plugin = await running(api, ns, "plugin")
    assert plugin["spec"]["nodeName"] == "manager-rtx-a1000-0"
    assert "extendedResourceClaimStatus" not in plugin["status"]
    claims = (await api.list(RESOURCE_CLAIMS, ns))["items"]
    assert [c["metadata"]["name"] for c in claims] == [claim["metadata"]["name"]]
