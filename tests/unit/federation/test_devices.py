"""Placement by devices (decisions/devices.py): every pod's devices on one node, from a
worker's ResourceSlices, ResourceClaims and DeviceClasses as the bed writes them."""

from __future__ import annotations

from typing import Any

from e2e.local import dra as bed
from manager.api import constants as C
from manager.cli import workerlook, workerread
from manager.federation.decisions import capacity, deviceinventory, deviceneed, devices
from manager.federation.decisions.capacity import Candidate
from manager.federation.engine.remoteobjects import remote_claim_template

H100 = bed.class_name("h100")


def slices(model: str, nodes: int, per_node: int, **kw: Any) -> list[dict[str, Any]]:
    spec = bed.Devices(model=model, count=per_node, **kw)
    return [bed.resource_slice(f"{model}-{i}", spec) for i in range(nodes)]


def claim(node: str, *device_names: str) -> dict[str, Any]:
    return {
        "metadata": {"name": f"c-{node}", "namespace": "ns"},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": bed.DRIVER, "pool": node, "device": d}
                        for d in device_names
                    ]
                }
            }
        },
    }


def worker(
    slices_: list[dict[str, Any]], claims: list[dict[str, Any]] | None = None, *models: str
) -> deviceinventory.WorkerDevices:
    classes = bed.device_classes([bed.Devices(model=m) for m in models or ("h100",)])
    return deviceinventory.worker_devices(slices_, claims or [], classes)


def template(name: str, count: int | None, cls: str = H100, *selectors: str) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls}
    if count is not None:
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }


def need(count: int | None, pods: int = 1, *selectors: str) -> deviceneed.Need:
    pod_sets = [
        {
            "name": "main",
            "count": pods,
            "template": {
                "spec": {"resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "t"}]}
            },
        }
    ]
    return deviceneed.need_of(pod_sets, {"t": template("t", count, H100, *selectors)})


def test_a_pod_asking_for_two_goes_where_a_node_has_two_free() -> None:
    fit = devices.check(worker(slices("h100", 2, 4)), need(2))
    assert fit.fits and fit.nodes == ("h100-0",), fit


def test_fragmentation_is_a_reason_with_counts() -> None:
    w = worker(slices("h100", 3, 2), [claim(f"h100-{i}", "gpu-0") for i in range(3)])
    fit = devices.check(w, need(2))
    assert not fit.fits and not fit.never
    assert fit.reason.startswith(f"3 free {H100} devices, no node with 2 free"), fit.reason


def test_a_node_never_big_enough_is_never() -> None:
    fit = devices.check(worker(slices("h100", 4, 1)), need(2))
    assert not fit.fits and fit.never
    assert f"no node with 2 {H100} devices (at most 1 on one node)" in fit.reason


def test_a_class_the_worker_lacks_and_a_worker_without_dra_are_never() -> None:
    w = worker(slices("rtx-a1000", 2, 2), None, "rtx-a1000")
    fit = devices.check(w, need(1))
    assert fit.never and fit.reason == f"no DeviceClass {H100} on this worker"
    fit = devices.check(None, need(1))
    assert fit.never and "resource.k8s.io/v1" in fit.reason


def test_no_devices_asked_always_fits() -> None:
    assert devices.check(None, deviceneed.Need()).fits
    assert devices.check(None, need(0)).fits  # a count of 0 asks nothing


def test_pods_are_packed_each_on_one_node() -> None:
    w = worker(slices("h100", 2, 4))
    fit = devices.check(w, need(2, pods=4))
    assert fit.fits and sorted(fit.nodes) == ["h100-0"] * 2 + ["h100-1"] * 2
    fit = devices.check(w, need(3, pods=3))
    assert not fit.fits and not fit.never
    assert "devices for 2 pod(s) found, not for all 3" in fit.reason, fit.reason


def test_request_selectors_narrow_the_devices() -> None:
    w = worker(slices("h100", 2, 4))
    index0 = f'device.attributes["{bed.DRIVER}"].index == 0'
    fit = devices.check(w, need(1, 2, index0))
    assert fit.fits and sorted(fit.nodes) == ["h100-0", "h100-1"]
    fit = devices.check(w, need(2, 1, index0))
    assert not fit.fits and fit.never


def test_or_and_qualified_attributes() -> None:
    w = worker(slices("h100", 1, 2))
    either = (
        f'device.attributes["{bed.DRIVER}"].model == "a100" || '
        f'device.attributes["{bed.DRIVER}"].model == "h100"'
    )
    assert devices.check(w, need(2, 1, either)).fits


def test_a_selector_kfed_cannot_evaluate_matches_nothing_and_says_why() -> None:
    w = worker(slices("h100", 1, 2))
    fit = devices.check(w, need(1, 1, 'device.attributes["x.io"].color == "red"'))
    assert not fit.fits and fit.never
    assert "cannot evaluate" in fit.reason and "x.io" in fit.reason, fit.reason
    fit = devices.check(w, need(1, 1, "device.driver =="))
    assert not fit.fits and "cannot compile" in fit.reason, fit.reason


def test_shared_counters_a_partition_in_use_blocks_its_whole_gpu() -> None:
    parts = bed.Partitions(slices=7, profiles={"3g": 3})
    w = worker(slices("a100", 1, 1, partitions=parts), [claim("a100-0", "gpu-0-3g-0")], "a100")
    a100 = bed.class_name("a100")
    pod_sets = [
        {
            "name": "main",
            "count": 1,
            "template": {
                "spec": {"resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}]}
            },
        }
    ]
    whole = deviceneed.need_of(pod_sets, {"t": template("t", 1, a100)})
    fit = devices.check(w, whole)
    assert not fit.fits and not fit.never, fit
    freed = worker(slices("a100", 1, 1, partitions=parts), [], "a100")
    assert devices.check(freed, whole).fits


def test_an_older_pool_generation_and_slices_without_a_node_are_not_counted() -> None:
    old, new = slices("h100", 1, 4)[0], slices("h100", 1, 1)[0]
    new["metadata"]["name"] += "-new"
    new["spec"]["pool"]["generation"] = 2
    network = slices("h100", 1, 4)[0]
    network["metadata"]["name"] = "network"
    network["spec"]["pool"]["name"] = "network"
    del network["spec"]["nodeName"]
    network["spec"]["allNodes"] = True
    inv = deviceinventory.inventory([old, new, network])
    assert {n: len(ds) for n, ds in inv.nodes.items()} == {"h100-0": 1}
    assert inv.not_counted == 4


def test_admin_access_and_counts() -> None:
    t = template("t", None)
    t["spec"]["spec"]["devices"]["requests"].append(
        {"name": "watch", "exactly": {"deviceClassName": H100, "adminAccess": True}}
    )
    requests = deviceneed.template_requests("t", t)
    assert [(r.where, r.count) for r in requests] == [("t/gpu", 1)]


def test_with_devices_keeps_a_quota_refusal_and_extends_a_fit() -> None:
    fits = Candidate("w", True, "fits in cq (2 example.com/gpu free)")
    full = Candidate("w", False, "insufficient example.com/gpu")
    w = worker(slices("h100", 1, 1))
    assert devices.evaluate(full, w, need(2)) is full
    refused = devices.evaluate(fits, w, need(2))
    assert not refused.fits and refused.never and "no node with 2" in refused.reason
    placed = devices.evaluate(fits, worker(slices("h100", 1, 2)), need(2))
    assert placed.fits and placed.reason.endswith("; devices: 1 pod on h100-0")
    assert devices.evaluate(fits, None, deviceneed.Need()) is fits


def test_the_template_for_the_worker_is_labelled_ours_for_the_workload() -> None:
    source = template("gpu-2", 2)
    source["metadata"].update(
        namespace="ml-jobs",
        uid="u",
        resourceVersion="7",
        labels={"team": "a"},
        annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}", "note": "x"},
    )
    body = remote_claim_template(source, workload_name="job-x-1", origin="multikueue")
    meta = body["metadata"]
    assert (meta["name"], meta["namespace"]) == ("gpu-2", "ml-jobs")
    assert meta["labels"] == {
        "team": "a",
        C.MULTIKUEUE_ORIGIN_LABEL: "multikueue",
        C.PREBUILT_WORKLOAD_LABEL: "job-x-1",
    }
    assert meta["annotations"] == {"note": "x"} and "uid" not in meta
    assert body["spec"] == source["spec"] and body["spec"] is not source["spec"]
    assert (body["apiVersion"], body["kind"]) == ("resource.k8s.io/v1", "ResourceClaimTemplate")


def test_whatif_judges_devices_as_the_dispatcher_does() -> None:
    cq = {
        "metadata": {"name": "gpu-cq"},
        "spec": {"resourceGroups": [{"coveredResources": ["example.com/gpu"], "flavors": [
            {"name": "h100", "resources": [{"name": "example.com/gpu", "nominalQuota": 8}]}
        ]}]},
    }  # fmt: skip
    view = capacity.WorkerView(
        name="worker-2",
        local_queues={"ns/q": {"spec": {"clusterQueue": "gpu-cq"}}},
        cluster_queues={"gpu-cq": cq},
        flavors={},
    )
    request = capacity.Request("ns", "q", {("h100", "example.com/gpu"): 2})
    fragmented = worker(slices("h100", 2, 2), [claim("h100-0", "gpu-0"), claim("h100-1", "gpu-0")])
    read = workerread.WorkerRead(view, True, None, fragmented)
    verdict = workerlook.verdict_of(workerlook.WorkerLook(None, read), request, {}, need(2))
    assert not verdict.fits and verdict.reason.startswith(f"2 free {H100} devices, no node")
    assert workerlook.verdict_of(workerlook.WorkerLook(None, read), request, {}).fits
