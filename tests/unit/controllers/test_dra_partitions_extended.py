"""Partitions charged by their counters and extended resources served by DRA charged once
(docs/dra.md; upstream Kueue's KueueDRAIntegrationPartitionableDevices and
KueueDRAIntegrationExtendedResource, pkg/dra/counters.go and extended_resources.go).

The devices are the test bed's own (``e2e/local/dra.py``): each a100 GPU shares 7 ``slices``
among itself (7) and its 1g (1 each) and 3g (3 each) partitions; each h100 is whole, with no
counters, and its class serves ``nvidia.com/gpu``."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from e2e.local import dra as bed
from manager.api import dra, draannotations, draclaims, dracounters
from manager.api.workload import Workload
from manager.controllers import convert, devicecatalogue
from manager.controllers.jobworkload import with_device_charge

from .test_dra_charge import from_template, pod_set, request, template, workload

Obj = dict[str, Any]

GPU = "example.com/gpu"
SLICES = "example.com/gpu-slices"
A100 = bed.Devices("a100", 2, partitions=bed.Partitions(7, {"1g": 1, "3g": 3}))
H100 = bed.Devices("h100", 4, extended_resource_name="nvidia.com/gpu")
A100_1G, A100_3G = bed.class_name("a100", "1g"), bed.class_name("a100", "3g")
WHOLE_A100, WHOLE_H100 = bed.class_name("a100"), bed.class_name("h100")
A100_ONLY = f'device.attributes["{bed.DRIVER}"].model == "a100"'


def counter_source(selector: str = A100_ONLY, name: str = "slices") -> Obj:
    return {
        "counter": {
            "name": name,
            "driver": bed.DRIVER,
            "deviceSelector": {"cel": {"expression": selector}},
        }
    }


MAPPINGS = dra.parse_device_class_mappings(
    json.dumps(
        [
            {"name": GPU, "deviceClassNames": [WHOLE_H100]},
            {
                "name": SLICES,
                "deviceClassNames": [WHOLE_A100, A100_1G, A100_3G],
                "sources": [counter_source()],
            },
        ]
    )
)


def catalogue(*devices: bed.Devices, slices: list[Obj] | None = None) -> dra.DeviceCatalogue:
    classes = {c["metadata"]["name"]: c for c in bed.device_classes(devices)}
    made = [bed.resource_slice(f"node-{d.model}", d) for d in devices]
    return dra.DeviceCatalogue(classes, made if slices is None else slices)


def charged_by(
    *requests: Obj, devices: dra.DeviceCatalogue | None = None
) -> dra.Charge | dra.Refused | dra.TemplateMissing | dra.DevicesUnknown:
    devices = devices if devices is not None else catalogue(A100, H100)
    return dra.charge(
        [pod_set(from_template("gpu", "t"))], {"t": template("t", *requests)}, MAPPINGS, devices
    )


def with_selector(req: Obj, expression: str) -> Obj:
    req["exactly"]["selectors"] = [{"cel": {"expression": expression}}]
    return req


# --- partitions: by the counters they consume ---------------------------------------------


@pytest.mark.parametrize(
    ("requests", "expected"),
    [
        pytest.param([request(A100_1G)], {SLICES: 1}, id="a 1g partition takes 1 slice"),
        pytest.param([request(A100_3G)], {SLICES: 3}, id="a 3g partition takes 3"),
        pytest.param([request(A100_3G, 2)], {SLICES: 6}, id="two 3g partitions take 6"),
        pytest.param([request(WHOLE_A100)], {SLICES: 7}, id="a whole GPU takes all 7"),
        pytest.param(
            [with_selector(request(A100_1G), f'device.attributes["{bed.DRIVER}"].index == 1')],
            {SLICES: 1},
            id="the request's selectors narrow the devices",
        ),
        pytest.param(
            [request(WHOLE_H100, 2, name="a"), request(A100_3G, name="b")],
            {GPU: 2, SLICES: 3},
            id="by number and by counters in one claim",
        ),
        pytest.param(
            [request(A100_1G, name="a"), request(A100_3G, admin=True, name="b")],
            {SLICES: 1},
            id="adminAccess is free",
        ),
    ],
)
def test_a_partition_request_is_charged_by_its_counters(
    requests: list[Obj], expected: dict[str, int]
) -> None:
    assert charged_by(*requests) == dra.Charge({"main": expected})


def test_two_counters_of_one_class_charge_two_resources() -> None:
    """Upstream lets one class be in two mappings when each counts another counter."""
    compute = "example.com/gpu-compute"
    mappings = dra.parse_device_class_mappings(
        json.dumps(
            [
                {"name": SLICES, "deviceClassNames": [A100_3G], "sources": [counter_source()]},
                {
                    "name": compute,
                    "deviceClassNames": [A100_3G],
                    "sources": [counter_source(name="compute")],
                },
            ]
        )
    )
    devices = catalogue(A100)
    for s in devices.slices:  # each device consumes twice its slices of "compute"
        for d in s["spec"]["devices"]:
            counters = d["consumesCounters"][0]["counters"]
            counters["compute"] = {"value": str(2 * int(counters["slices"]["value"]))}
    result = dra.charge(
        [pod_set(from_template("gpu", "t"))],
        {"t": template("t", request(A100_3G))},
        mappings,
        devices,
    )
    assert result == dra.Charge({"main": {SLICES: 3, compute: 6}})


@pytest.mark.parametrize(
    ("requests", "devices", "says"),
    [
        pytest.param(
            [request(A100_1G, 15)],
            catalogue(A100),
            "insufficient matching devices for counter driver: 14 device(s) match but 15 requested",
            id="more than there are",
        ),
        pytest.param(
            [request(A100_1G)],
            catalogue(A100, slices=[]),
            "0 device(s) match but 1 requested",
            id="no slices published yet",
        ),
        pytest.param(
            [request(A100_1G)],
            dra.DeviceCatalogue(),
            f'failed to get DeviceClass {A100_1G}: deviceclasses.resource.k8s.io "{A100_1G}" '
            "not found",
            id="the class not there yet",
        ),
    ],
)
def test_devices_that_cannot_answer_yet_are_asked_again_later(
    requests: list[Obj], devices: dra.DeviceCatalogue, says: str
) -> None:
    result = charged_by(*requests, devices=devices)
    assert isinstance(result, dra.DevicesUnknown), result
    assert result.message.startswith(
        "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0]: Internal error: "
    )
    assert says in result.message


def test_a_pool_not_yet_complete_is_not_read() -> None:
    (made,) = catalogue(A100).slices
    made["spec"]["pool"]["resourceSliceCount"] = 2  # one of two slices arrived
    result = charged_by(request(A100_1G), devices=catalogue(A100, slices=[made]))
    assert isinstance(result, dra.DevicesUnknown) and "0 device(s) match" in result.message


def test_devices_that_consume_no_such_counter_are_named() -> None:
    mappings = dra.parse_device_class_mappings(
        json.dumps(
            [
                {
                    "name": GPU,
                    "deviceClassNames": [WHOLE_H100],
                    "sources": [counter_source("true")],
                }
            ]
        )
    )
    result = dra.charge(
        [pod_set(from_template("gpu", "t"))],
        {"t": template("t", request(WHOLE_H100))},
        mappings,
        catalogue(H100),
    )
    assert isinstance(result, dra.DevicesUnknown)
    assert 'matched devices have no consumesCounters entry for counter "slices"' in result.message


def test_a_request_selector_that_does_not_compile_is_refused() -> None:
    result = charged_by(with_selector(request(A100_1G), "device.driver =="))
    assert isinstance(result, dra.Refused)
    assert result.message.startswith(
        "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0].exactly."
        'selectors[0].cel.expression: Invalid value: "device.driver ==": CEL compilation failed'
    )


# --- extended resources served by DRA: charged once ---------------------------------------


def gpu_pod_set(
    *, containers: tuple[str, ...] = ("1",), init: tuple[str, ...] = (), count: int = 1
) -> Obj:
    ps = pod_set(count=count)
    spec = ps["template"]["spec"]

    def container(name: str, gpus: str) -> Obj:
        amount = {"cpu": "1", "nvidia.com/gpu": gpus}
        return {"name": name, "image": "cuda", "resources": {"requests": amount, "limits": amount}}

    spec["containers"] = [container(f"c{i}", g) for i, g in enumerate(containers)]
    if init:
        spec["initContainers"] = [container(f"i{i}", g) for i, g in enumerate(init)]
    del spec["resourceClaims"]
    return ps


def extended(
    ps: Obj, devices: dra.DeviceCatalogue, mappings: dra.DeviceClassMappings = MAPPINGS
) -> dra.Charge | dra.Refused | dra.TemplateMissing | dra.DevicesUnknown:
    return dra.charge([ps], {}, mappings, devices)


def core_requests(ps: Obj, result: dra.Charge) -> dict[str, int]:
    """What the admission core sees per pod, from the Workload as recorded."""
    body = with_device_charge(workload([ps]), result)
    wl = convert.workload(Workload.model_validate(body), priority=0, creation_time=0.0)
    return {str(k): v for k, v in wl.pod_sets[0].requests.items()}


@pytest.mark.parametrize(
    ("containers", "init", "expected"),
    [
        pytest.param(("1",), (), 1, id="one container"),
        pytest.param(("1", "2"), (), 3, id="containers are summed"),
        pytest.param(("1", "2"), ("4",), 4, id="held against the largest init container"),
        pytest.param(("1",), ("1",), 1, id="an init container runs before, not beside"),
    ],
)
def test_an_extended_resource_a_mapped_class_serves_is_charged_once_as_that_class(
    containers: tuple[str, ...], init: tuple[str, ...], expected: int
) -> None:
    ps = gpu_pod_set(containers=containers, init=init)
    result = extended(ps, catalogue(H100))
    assert result == dra.Charge({"main": {GPU: expected}}, {"main": ("nvidia.com/gpu",)})
    assert core_requests(ps, result) == {"cpu": 1000 * len(containers), GPU: expected}


def test_an_unmapped_class_keeps_the_resource_name_and_still_charges_it_once() -> None:
    ps = gpu_pod_set(containers=("2",))
    unmapped = dra.DeviceClassMappings()
    result = extended(ps, catalogue(H100), unmapped)
    assert result == dra.Charge({"main": {"nvidia.com/gpu": 2}}, {"main": ("nvidia.com/gpu",)})
    assert core_requests(ps, result) == {"cpu": 1000, "nvidia.com/gpu": 2}


def test_a_device_plugin_resource_no_class_serves_is_an_ordinary_request() -> None:
    ps = gpu_pod_set(containers=("2",))
    result = extended(ps, catalogue(A100))  # no class names nvidia.com/gpu
    assert result == dra.Charge({})
    assert core_requests(ps, result) == {"cpu": 1000, "nvidia.com/gpu": 2}


def test_an_extended_resource_and_a_claim_of_one_resource_add_up() -> None:
    ps = gpu_pod_set(containers=("1",))
    ps["template"]["spec"]["resourceClaims"] = [from_template("gpu", "t")]
    result = dra.charge(
        [ps], {"t": template("t", request(WHOLE_H100, 2))}, MAPPINGS, catalogue(H100)
    )
    assert result == dra.Charge({"main": {GPU: 3}}, {"main": ("nvidia.com/gpu",)})
    assert core_requests(ps, result) == {"cpu": 1000, GPU: 3}


def test_of_two_classes_serving_one_resource_the_schedulers_choice_counts() -> None:
    """The newest; on a tie, the first by name (what the scheduler allocates from)."""
    old, new = (
        {
            "metadata": {"name": name, "creationTimestamp": at},
            "spec": {"extendedResourceName": "nvidia.com/gpu"},
        }
        for name, at in (("a-old", "2026-01-01T00:00:00Z"), ("z-new", "2026-02-01T00:00:00Z"))
    )
    mappings = dra.parse_device_class_mappings(
        json.dumps([{"name": GPU, "deviceClassNames": ["z-new"]}])
    )
    devices = dra.DeviceCatalogue({"a-old": old, "z-new": new})
    assert extended(gpu_pod_set(), devices, mappings) == dra.Charge(
        {"main": {GPU: 1}}, {"main": ("nvidia.com/gpu",)}
    )
    new["metadata"]["creationTimestamp"] = old["metadata"]["creationTimestamp"]
    assert extended(gpu_pod_set(), devices, mappings) == dra.Charge(
        {"main": {"nvidia.com/gpu": 1}}, {"main": ("nvidia.com/gpu",)}
    )


def test_a_fraction_of_a_dra_served_resource_is_refused() -> None:
    result = extended(gpu_pod_set(containers=("500m",)), catalogue(H100))
    assert isinstance(result, dra.Refused)
    assert result.message == (
        "spec.podSets[0].template.spec.containers[0].resources.requests.nvidia.com/gpu: "
        'Invalid value: "500m": extended resource quantity must be an integer'
    )


def test_an_extended_resource_of_a_counter_charged_class_is_refused() -> None:
    a100 = bed.Devices("a100", 2, "nvidia.com/gpu", bed.Partitions(7, {"1g": 1}))
    result = extended(gpu_pod_set(), catalogue(a100))
    assert isinstance(result, dra.Refused)
    assert result.message == (
        'spec.podSets[0].template.spec.containers[0]: Invalid value: "nvidia.com/gpu": '
        f"extended resource nvidia.com/gpu resolves to DeviceClass {WHOLE_A100} with counters "
        "configured; use ResourceClaimTemplates with CEL selectors for counter-based quota"
    )


def test_the_replaced_resources_are_recorded_and_a_nonsense_record_is_never_admissible() -> None:
    ps = gpu_pod_set()
    result = extended(ps, catalogue(H100))
    assert isinstance(result, dra.Charge)
    body = with_device_charge(workload([ps]), result)
    assert json.loads(body["metadata"]["annotations"][draannotations.REPLACED_ANNOTATION]) == {
        "main": ["nvidia.com/gpu"]
    }
    body["metadata"]["annotations"][draannotations.REPLACED_ANNOTATION] = (
        '{"main": "nvidia.com/gpu"}'
    )
    wl = convert.workload(Workload.model_validate(body), priority=0, creation_time=0.0)
    assert wl.not_chargeable is not None and draannotations.REPLACED_ANNOTATION in wl.not_chargeable


def test_only_pods_that_could_use_them_read_classes_or_slices() -> None:
    plain = pod_set()
    assert not draclaims.needs_catalogue([plain], MAPPINGS)
    assert draclaims.needs_catalogue([gpu_pod_set()], dra.DeviceClassMappings())
    claims = pod_set(from_template("gpu", "t"))
    assert draclaims.needs_catalogue([claims], MAPPINGS)  # a mapping counts by counters
    assert not draclaims.needs_catalogue([claims], dra.DeviceClassMappings())


def test_the_managers_catalogue_keeps_two_workers_same_named_pools_apart() -> None:
    one = catalogue(A100)
    merged = devicecatalogue.merged([("worker-1", one), ("worker-2", one)])
    pools = [s["spec"]["pool"]["name"] for s in merged.slices]
    assert pools == ["worker-1/node-a100", "worker-2/node-a100"]
    assert set(merged.classes) == set(one.classes)
    # each pool complete on its own: twice the devices, the same charge
    result = dra.charge(
        [pod_set(from_template("gpu", "t"))],
        {"t": template("t", request(A100_1G, 28))},
        MAPPINGS,
        merged,
    )
    assert result == dra.Charge({"main": {SLICES: 28}})


# --- the mapping's sources -----------------------------------------------------------------


def test_counter_sources_have_upstreams_shape_and_survive_a_round_trip() -> None:
    again = dra.parse_device_class_mappings(MAPPINGS.to_json())
    assert again == MAPPINGS
    assert MAPPINGS.counters_for(A100_3G) == [
        (SLICES, dracounters.CounterSource("slices", bed.DRIVER, A100_ONLY))
    ]
    assert MAPPINGS.counters_for(WHOLE_H100) == []


@pytest.mark.parametrize(
    ("sources", "says"),
    [
        pytest.param(
            [{"capacity": {"name": "memory", "driver": bed.DRIVER}}],
            "capacity sources require KueueDRAIntegrationConsumableCapacity",
            id="capacity",
        ),
        pytest.param([{}], "exactly one source type must be set per entry", id="empty"),
        pytest.param(
            [counter_source() | {"capacity": {}}],
            "exactly one source type must be set per entry",
            id="both",
        ),
        pytest.param(
            [{"counter": {"name": "slices", "driver": bed.DRIVER}}],
            "deviceSelector.cel.expression: Required value",
            id="no selector",
        ),
        pytest.param(
            [counter_source("device.driver ==")],
            "deviceSelector.cel.expression: CEL compilation failed",
            id="a selector that does not compile",
        ),
        pytest.param(
            [counter_source(name="Slices")], "counter.name: 'Slices' must be a DNS label", id="name"
        ),
        pytest.param(
            [
                {
                    "counter": {
                        "name": "s",
                        "driver": "GPU",
                        "deviceSelector": {"cel": {"expression": "true"}},
                    }
                }
            ],
            "counter.driver: 'GPU' must be a DNS subdomain",
            id="driver",
        ),
    ],
)
def test_a_source_upstream_would_refuse_is_refused(sources: list[Obj], says: str) -> None:
    text = json.dumps([{"name": SLICES, "deviceClassNames": [A100_1G], "sources": sources}])
    with pytest.raises(ValueError, match=r"deviceClassMappings\[0\]\.sources\[0\]") as err:
        dra.parse_device_class_mappings(text)
    assert says in str(err.value)


@pytest.mark.parametrize(
    ("second", "says"),
    [
        pytest.param(None, f"'{A100_1G}' is already mapped to resource {SLICES}", id="no counter"),
        pytest.param(
            counter_source(),
            f"'{A100_1G}' already has a counter source for counter \"slices\"",
            id="the same counter",
        ),
    ],
)
def test_one_class_in_two_mappings_only_for_two_counters(second: Obj | None, says: str) -> None:
    other: Obj = {"name": "example.com/other", "deviceClassNames": [A100_1G]}
    if second is not None:
        other["sources"] = [second]
    text = json.dumps(
        [{"name": SLICES, "deviceClassNames": [A100_1G], "sources": [counter_source()]}, other]
    )
    with pytest.raises(ValueError) as err:
        dra.parse_device_class_mappings(text)
    assert says in str(err.value)


def test_a_slice_is_read_once_per_version_and_again_when_it_changes() -> None:
    """An informer's slice (it has a resourceVersion) is read once; its next version, whose
    3g partitions now consume 4 slices, is read anew."""
    devices = catalogue(A100)
    (made,) = devices.slices
    made["metadata"]["resourceVersion"] = "1"
    assert charged_by(request(A100_3G), devices=devices) == dra.Charge({"main": {SLICES: 3}})
    assert charged_by(request(A100_3G), devices=devices) == dra.Charge({"main": {SLICES: 3}})
    changed = copy.deepcopy(made)
    changed["metadata"]["resourceVersion"] = "2"
    for d in changed["spec"]["devices"]:
        if "-3g-" in d["name"]:
            d["consumesCounters"][0]["counters"]["slices"]["value"] = "4"
    later = dra.DeviceCatalogue(devices.classes, [changed])
    assert charged_by(request(A100_3G), devices=later) == dra.Charge({"main": {SLICES: 4}})
