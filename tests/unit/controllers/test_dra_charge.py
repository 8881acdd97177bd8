"""What a job's device claims are charged (docs/dra.md), by upstream Kueue's rules
(pkg/dra/claims.go): devices per DeviceClass from each ResourceClaimTemplate, mapped to a
quota resource, per pod; the admission core multiplies by the pod count. Refusals carry
upstream's field paths and words."""

from __future__ import annotations

import json
from typing import Any

import pytest

from manager import core
from manager.api import dra, draannotations, draclaims
from manager.api.workload import Workload
from manager.controllers import convert
from manager.controllers.jobworkload import with_device_charge, workload_for_job
from manager.main import parse_args as manager_args
from worker_shim.main import parse_args as shim_args

Obj = dict[str, Any]

GPU = "example.com/gpu"
MAPPING = dra.DeviceClassMappings(
    (
        dra.DeviceClassMapping(GPU, ("gpu.example.com", "h100.example.com")),
        dra.DeviceClassMapping("example.com/nic", ("nic.example.com",)),
    )
)


def request(
    device_class: str = "gpu.example.com",
    count: int | None = None,
    *,
    mode: str | None = None,
    admin: bool = False,
    name: str = "r",
) -> Obj:
    exactly: Obj = {"deviceClassName": device_class}
    if count is not None:
        exactly["count"] = count
    if mode is not None:
        exactly["allocationMode"] = mode
    if admin:
        exactly["adminAccess"] = True
    return {"name": name, "exactly": exactly}


def template(name: str, *requests: Obj) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": list(requests)}}},
    }


def pod_set(*claims: Obj, name: str = "main", count: int = 1) -> Obj:
    return {
        "name": name,
        "count": count,
        "template": {
            "spec": {
                "resourceClaims": list(claims),
                "containers": [
                    {
                        "name": "c",
                        "image": "busybox",
                        "resources": {
                            "requests": {"cpu": "1"},
                            "claims": [{"name": c["name"]} for c in claims],
                        },
                    }
                ],
            }
        },
    }


def from_template(claim: str, template_name: str) -> Obj:
    return {"name": claim, "resourceClaimTemplateName": template_name}


def charged(
    pod_sets: list[Obj], *templates: Obj
) -> dra.Charge | dra.Refused | dra.TemplateMissing | dra.DevicesUnknown:
    return dra.charge(pod_sets, {t["metadata"]["name"]: t for t in templates}, MAPPING)


@pytest.mark.parametrize(
    ("requests", "expected"),
    [
        pytest.param([request()], {GPU: 1}, id="count omitted is 1"),
        pytest.param([request(count=2)], {GPU: 2}, id="count 2"),
        pytest.param([request(count=2, mode="ExactCount")], {GPU: 2}, id="ExactCount"),
        pytest.param(
            [request(count=2, name="a"), request(count=3, name="b")], {GPU: 5}, id="two requests"
        ),
        pytest.param(
            [request("gpu.example.com", 1, name="a"), request("h100.example.com", 2, name="b")],
            {GPU: 3},
            id="two classes of one resource",
        ),
        pytest.param(
            [request(count=2, name="a"), request("nic.example.com", 1, name="b")],
            {GPU: 2, "example.com/nic": 1},
            id="two resources",
        ),
        pytest.param(
            [request(count=2, name="a"), request(count=4, admin=True, name="b")],
            {GPU: 2},
            id="adminAccess is free",
        ),
    ],
)
def test_devices_are_counted_per_class_and_mapped(requests: list[Obj], expected: Obj) -> None:
    result = charged([pod_set(from_template("gpu", "t"))], template("t", *requests))
    assert result == dra.Charge({"main": expected})


def test_the_charge_is_per_pod_and_the_core_multiplies_it_by_the_pod_count() -> None:
    sets = [pod_set(from_template("gpu", "t"), count=3)]
    result = charged(sets, template("t", request(count=2)))
    assert isinstance(result, dra.Charge) and result.per_pod == {"main": {GPU: 2}}
    body = with_device_charge(workload(sets), result)
    wl = convert.workload(Workload.model_validate(body), priority=0, creation_time=0.0)
    ps = wl.pod_sets[0]
    assert ps.count == 3 and ps.requests == {"cpu": 1000, GPU: 2}


def test_two_claims_and_two_pod_sets_each_pay_for_their_own() -> None:
    sets = [
        pod_set(from_template("a", "t"), from_template("b", "t"), name="workers", count=4),
        pod_set(name="launcher"),
    ]
    result = charged(sets, template("t", request(count=2)))
    assert result == dra.Charge({"workers": {GPU: 4}})
    assert draclaims.template_names(sets) == ["t"]


def test_no_claims_no_charge() -> None:
    assert charged([pod_set()]) == dra.Charge({})
    assert not draclaims.has_claims([pod_set()])


def test_allocation_mode_all_is_refused_with_upstreams_message() -> None:
    result = charged(
        [pod_set(from_template("gpu", "every-gpu"))],
        template("every-gpu", request(count=None, mode="All")),
    )
    assert isinstance(result, dra.Refused)
    assert result.message == (
        "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0].exactly."
        'allocationMode: Invalid value: "All": ResourceClaimTemplate every-gpu: '
        "AllocationMode 'All' is not supported"
    )


def test_first_available_is_refused_with_upstreams_message() -> None:
    t = template("t")
    t["spec"]["spec"]["devices"]["requests"] = [
        {"name": "r", "firstAvailable": [{"name": "a", "deviceClassName": "gpu.example.com"}]}
    ]
    result = charged([pod_set(from_template("gpu", "t"))], t)
    assert isinstance(result, dra.Refused)
    assert result.message == (
        "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0]: Invalid value: "
        "null: ResourceClaimTemplate t: FirstAvailable device selection is not supported"
    )


def test_a_resource_claim_named_directly_is_refused_with_upstreams_message() -> None:
    sets = [pod_set({"name": "shared", "resourceClaimName": "team-gpus"})]
    result = charged(sets)
    assert isinstance(result, dra.Refused)
    assert result.message.startswith(
        "KueueDRAIntegration feature does not support use of resource claims: "
    )
    assert "ResourceClaim team-gpus" in result.message
    assert result.requeued_message == "DRA resource claims not supported"


def test_an_unmapped_device_class_is_refused_with_upstreams_message() -> None:
    result = charged(
        [pod_set(name="ps0"), pod_set(from_template("fpga", "t"), name="trainer")],
        template("t", request("fpga.example.com", 1)),
    )
    assert isinstance(result, dra.Refused)
    assert result.message == (
        "spec.podSets[1].template.spec.resourceClaims[0].resourceClaimTemplateName: Not found: "
        '"DeviceClass fpga.example.com is not mapped in DRA configuration for podset trainer"'
    )
    assert result.requeued_message == result.message


def test_a_missing_template_is_asked_for_again_later() -> None:
    result = charged([pod_set(from_template("gpu", "later"))])
    assert result == dra.TemplateMissing(
        "later",
        "spec.podSets[0].template.spec.resourceClaims[0]: Internal error: failed to get claim "
        "spec for ResourceClaimTemplate later in podset main: "
        'resourceclaimtemplates.resource.k8s.io "later" not found',
    )


# --- recorded once, on the Workload ---------------------------------------------------------


def workload(pod_sets: list[Obj]) -> Obj:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "ml",
            "uid": "u-1",
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
        },
        "spec": {"parallelism": pod_sets[0]["count"], "template": pod_sets[0]["template"]},
    }
    return workload_for_job(job, lambda _: None)


def test_the_charge_is_recorded_on_the_workload_and_read_from_there_only() -> None:
    """A template changed after the Workload was created changes nothing: the conversion
    (on the manager, and on the worker that gets the copy) reads the recorded charge."""
    sets = [pod_set(from_template("gpu", "t"))]
    result = charged(sets, template("t", request(count=2)))
    assert isinstance(result, dra.Charge)
    body = with_device_charge(workload(sets), result)
    assert json.loads(body["metadata"]["annotations"][draannotations.CHARGE_ANNOTATION]) == {
        "main": {GPU: "2"}
    }
    first = convert.workload(Workload.model_validate(body), priority=0, creation_time=0.0)
    recharged = charged(sets, template("t", request(count=8)))
    assert recharged == dra.Charge({"main": {GPU: 8}})  # what a new workload would pay
    again = convert.workload(Workload.model_validate(body), priority=0, creation_time=0.0)
    gpu = core.ResourceName(GPU)
    assert first.pod_sets[0].requests[gpu] == 2 == again.pod_sets[0].requests[gpu]


def test_a_refused_workload_is_recorded_with_the_reason_and_never_admissible() -> None:
    sets = [pod_set(from_template("fpga", "t"))]
    refused = charged(sets, template("t", request("fpga.example.com")))
    assert isinstance(refused, dra.Refused)
    body = with_device_charge(workload(sets), refused)
    assert body["spec"].get("active", True) is True  # pending with its reason, not hidden
    assert body["metadata"]["annotations"][draannotations.REFUSED_ANNOTATION] == refused.message
    wl = convert.workload(Workload.model_validate(body), priority=0, creation_time=0.0)
    assert wl.not_chargeable == refused.message


def test_a_charge_annotation_edited_into_nonsense_is_never_admissible() -> None:
    body = workload([pod_set()])
    body["metadata"]["annotations"][draannotations.CHARGE_ANNOTATION] = "two gpus please"
    wl = convert.workload(Workload.model_validate(body), priority=0, creation_time=0.0)
    assert wl.not_chargeable is not None and draannotations.CHARGE_ANNOTATION in wl.not_chargeable


# --- the mapping and its flag -----------------------------------------------------------------


def test_the_mapping_has_upstreams_shape() -> None:
    text = json.dumps(
        [
            {"name": GPU, "deviceClassNames": ["gpu.example.com", "h100.example.com"]},
            {"name": "example.com/nic", "deviceClassNames": ["nic.example.com"]},
        ]
    )
    parsed = dra.parse_device_class_mappings(text)
    assert parsed == MAPPING
    assert dra.parse_device_class_mappings(parsed.to_json()) == parsed
    assert parsed.resource_for("h100.example.com") == GPU
    assert parsed.resource_for("fpga.example.com") is None
    assert dra.parse_device_class_mappings("") == dra.DeviceClassMappings()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("gpu=example.com/gpu", "not JSON"),
        ('{"name": "x"}', "must be a JSON list"),
        ('[{"name": "x"}]', "at least one device class name is required"),
        ('[{"name": "x", "deviceClassNames": []}]', "at least one device class name is required"),
        ('[{"name": "Bad Name!", "deviceClassNames": ["a"]}]', "deviceClassMappings[0].name"),
        (
            '[{"name": "a", "deviceClassNames": ["c"]}, {"name": "a", "deviceClassNames": ["d"]}]',
            "is a duplicate",
        ),
        (
            '[{"name": "a", "deviceClassNames": ["c"]}, {"name": "b", "deviceClassNames": ["c"]}]',
            "'c' is already mapped to resource a",
        ),
        ('[{"name": "a", "deviceClassNames": ["c", "c"]}]', "is a duplicate"),
        ('[{"name": "a", "deviceClassNames": ["c"], "extra": 1}]', "must be {"),
        (json.dumps([{"name": "a", "deviceClassNames": [f"c{i}" for i in range(9)]}]), "at most 8"),
        (json.dumps([{"name": f"r{i}", "deviceClassNames": [f"c{i}"]} for i in range(17)]), "16"),
    ],
)
def test_a_mapping_upstream_would_refuse_is_refused(text: str, says: str) -> None:
    with pytest.raises(ValueError) as err:
        dra.parse_device_class_mappings(text)
    assert says in str(err.value)


KUBECONFIG = ["--kubeconfig", "/dev/null"]


@pytest.mark.parametrize("parse", [manager_args, shim_args])
def test_both_processes_take_the_mapping_flag(parse: Any, tmp_path: Any) -> None:
    assert parse(KUBECONFIG).controller_settings.device_class_mappings == dra.DeviceClassMappings()
    flag = ["--device-class-mappings", MAPPING.to_json()]
    assert parse([*KUBECONFIG, *flag]).controller_settings.device_class_mappings == MAPPING
    path = tmp_path / "mappings.json"
    path.write_text(MAPPING.to_json())
    settings = parse([*KUBECONFIG, "--device-class-mappings", f"@{path}"]).controller_settings
    assert settings.device_class_mappings == MAPPING


@pytest.mark.parametrize("parse", [manager_args, shim_args])
def test_a_bad_mapping_is_a_usage_error_naming_the_flag(
    parse: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse([*KUBECONFIG, "--device-class-mappings", '[{"name": "x"}]'])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--device-class-mappings: deviceClassMappings[0].deviceClassNames" in err
