"""The test bed's DRA parts without a cluster: a node group's ``devices:`` as the node set file
gives it, the DeviceClasses and ResourceSlices written from it, and the control-plane flags
(feature gates, the resource-claim controller) of a full cluster with and without DRA."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import binaries
from e2e.local import dra
from e2e.local.cluster import LocalCluster
from e2e.local.federation import DEFAULT_NODES_FILE, LocalFederation, load_node_sets
from e2e.local.kwoknodes import NodeGroup
from e2e.local.ports import Ports
from e2e.local.process import ManagedProcess

MIXED = {
    "clusters": {
        "manager": [
            {
                "name": "h100",
                "count": 2,
                "labels": {"gpu.model": "h100"},
                "capacity": {"cpu": "64", "pods": "110"},
                "devices": {"model": "h100", "count": 4, "extendedResourceName": "nvidia.com/gpu"},
            },
            {
                "name": "a100",
                "labels": {"gpu.model": "a100"},
                "devices": {
                    "model": "a100",
                    "count": 2,
                    "partitions": {"slices": 7, "profiles": {"1g": 1, "3g": 3}},
                },
            },
            {"name": "plain", "capacity": {"nvidia.com/gpu": "2"}},
        ]
    }
}


def _write(tmp_path: Path, content: dict[str, Any]) -> Path:
    path = tmp_path / "nodes.yaml"
    path.write_text(yaml.safe_dump(content))
    return path


def _one_group(tmp_path: Path, devices: object) -> list[NodeGroup]:
    file = {"clusters": {"manager": [{"name": "g", "devices": devices}]}}
    return load_node_sets(_write(tmp_path, file), ["manager"])["manager"]


def test_the_default_node_set_publishes_each_gpu_node_through_dra_too() -> None:
    sets = load_node_sets(DEFAULT_NODES_FILE, ["manager", "worker-1", "worker-2", "worker-3"])
    assert sets["manager"] == []
    for cluster, model, count in (("worker-1", "rtx-a1000", 2), ("worker-2", "h100", 4)):
        (group,) = sets[cluster]
        assert group.devices == dra.Devices(model=model, count=count)
        # the device plugin style capacity stays, the same number of GPUs
        assert group.capacity["nvidia.com/gpu"] == str(count)
    assert sets["worker-3"] == sets["worker-2"]


def test_devices_with_partitions_and_an_extended_resource_are_read(tmp_path: Path) -> None:
    h100, a100, plain = load_node_sets(_write(tmp_path, MIXED), ["manager"])["manager"]
    assert h100.devices == dra.Devices("h100", 4, extended_resource_name="nvidia.com/gpu")
    assert a100.count == 1 and a100.devices == dra.Devices(
        "a100", 2, partitions=dra.Partitions(slices=7, profiles={"1g": 1, "3g": 3})
    )
    assert plain.devices is None
    for group in (h100, a100, plain):
        assert NodeGroup.from_state(group.to_state()) == group, "the state file reads it back"


@pytest.mark.parametrize("versions", ["pinned", "newest"])
def test_a_dra_cluster_gets_a_class_per_model_and_profile_and_a_slice_per_node(
    tmp_path: Path, versions: str
) -> None:
    """Kubernetes 1.34 takes a node's shared counters in the slice of its devices; from 1.35
    they go in a slice of their own, in the same pool (``dra.counters_apart``)."""
    groups = load_node_sets(_write(tmp_path, MIXED), ["manager"])["manager"]
    cluster = LocalCluster(
        "manager", tmp_path, Ports(1, 2, 3), full=True, nodes=groups, dra=True, versions=versions
    )
    apart = dra.counters_apart(binaries.read_versions(versions=versions).kubernetes)
    assert apart == (versions == "newest")
    manifests = cluster.dra_manifests()
    classes = {m["metadata"]["name"]: m["spec"] for m in manifests if m["kind"] == "DeviceClass"}
    assert set(classes) == {
        "h100.gpu.kfed.io",
        "a100.gpu.kfed.io",
        "a100-1g.gpu.kfed.io",
        "a100-3g.gpu.kfed.io",
    }
    assert classes["h100.gpu.kfed.io"] == {
        "selectors": [
            {
                "cel": {
                    "expression": 'device.driver == "gpu.kfed.io" && '
                    'device.attributes["gpu.kfed.io"].model == "h100" && '
                    'device.attributes["gpu.kfed.io"].profile == "full"'
                }
            }
        ],
        "extendedResourceName": "nvidia.com/gpu",
    }
    assert "extendedResourceName" not in classes["a100.gpu.kfed.io"]
    assert '.profile == "3g"' in classes["a100-3g.gpu.kfed.io"]["selectors"][0]["cel"]["expression"]

    made = [m for m in manifests if m["kind"] == "ResourceSlice"]
    slices = {m["spec"]["nodeName"]: m for m in made if "devices" in m["spec"]}
    counters = {m["spec"]["nodeName"]: m for m in made if "sharedCounters" in m["spec"]}
    assert set(slices) == {"manager-h100-0", "manager-h100-1", "manager-a100-0"}, "not `plain`"
    assert set(counters) == {"manager-a100-0"}
    assert len(made) == 3 + apart
    assert all(m["apiVersion"] == "resource.k8s.io/v1" for m in manifests)
    h100 = slices["manager-h100-0"]["spec"]
    assert h100["driver"] == "gpu.kfed.io"
    assert h100["pool"] == {"name": "manager-h100-0", "generation": 1, "resourceSliceCount": 1}
    assert [d["name"] for d in h100["devices"]] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert h100["devices"][2]["attributes"] == {
        "model": {"string": "h100"},
        "index": {"int": 2},
        "profile": {"string": "full"},
    }
    assert "sharedCounters" not in h100 and "consumesCounters" not in h100["devices"][0]

    a100 = slices["manager-a100-0"]["spec"]
    a100_counters = counters["manager-a100-0"]["spec"]
    assert (a100_counters is not a100) == apart
    assert a100["pool"] == a100_counters["pool"]
    assert a100["pool"]["resourceSliceCount"] == 1 + apart
    assert a100_counters["sharedCounters"] == [
        {"name": "gpu-0", "counters": {"slices": {"value": "7"}}},
        {"name": "gpu-1", "counters": {"slices": {"value": "7"}}},
    ]
    devices = {d["name"]: d for d in a100["devices"]}
    # per GPU: itself, 7 partitions of 1 slice, 2 of 3 slices
    assert len(devices) == 2 * (1 + 7 + 2)
    assert devices["gpu-1"]["consumesCounters"] == [
        {"counterSet": "gpu-1", "counters": {"slices": {"value": "7"}}}
    ]
    assert devices["gpu-0-3g-1"]["consumesCounters"] == [
        {"counterSet": "gpu-0", "counters": {"slices": {"value": "3"}}}
    ]
    assert devices["gpu-1-1g-6"]["attributes"]["profile"] == {"string": "1g"}
    assert "gpu-0-3g-2" not in devices, "7 // 3 partitions of 3 slices"


def test_without_dra_the_devices_are_not_published(tmp_path: Path) -> None:
    groups = load_node_sets(_write(tmp_path, MIXED), ["manager"])["manager"]
    cluster = LocalCluster("manager", tmp_path, Ports(1, 2, 3), full=True, nodes=groups)
    assert cluster.dra_manifests() == []
    assert len(cluster.node_manifests()) == 4, "the nodes stay the same"


@pytest.mark.parametrize(
    ("devices", "message"),
    [
        ({"count": 2}, "`model` is required"),
        ("h100", "must be a mapping"),
        ({"model": "H100"}, "must be a DNS label"),
        ({"model": "h100", "count": 0}, "count must be a positive integer"),
        ({"model": "h100", "cores": 2}, "unknown keys ['cores']"),
        ({"model": "h100", "extendedResourceName": "gpu"}, "domain-prefixed"),
        ({"model": "h100", "count": 129}, "one ResourceSlice holds at most 128"),
        ({"model": "a100", "partitions": {"slices": 7}}, "with `slices` and `profiles`"),
        (
            {"model": "a100", "partitions": {"slices": 7, "profiles": {"1g.10gb": 1}}},
            "must be a DNS label",
        ),
        (
            {"model": "a100", "partitions": {"slices": 7, "profiles": {"8g": 8}}},
            "8 slices of only 7",
        ),
        (
            {"model": "a100", "partitions": {"slices": 7, "profiles": {"full": 7}}},
            "names a whole GPU",
        ),
        (
            {"model": "a100", "count": 33, "partitions": {"slices": 1, "profiles": {"p": 1}}},
            "at most 32 shared counters",
        ),
    ],
)
def test_malformed_devices_are_refused_naming_the_file_and_group(
    tmp_path: Path, devices: object, message: str
) -> None:
    with pytest.raises(ValueError, match="node group 'g': devices") as raised:
        _one_group(tmp_path, devices)
    assert message in str(raised.value)
    assert str(tmp_path / "nodes.yaml") in str(raised.value)


def test_one_model_cannot_serve_two_extended_resources() -> None:
    with pytest.raises(ValueError, match="model 'h100': two extendedResourceNames"):
        dra.device_classes(
            [
                dra.Devices("h100", extended_resource_name="nvidia.com/gpu"),
                dra.Devices("h100", extended_resource_name="example.com/gpu"),
            ]
        )


def _argv_of_a_started_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, dra_on: bool
) -> dict[str, list[str]]:
    monkeypatch.setattr(ManagedProcess, "start", lambda self: None)
    monkeypatch.setattr("e2e.binaries.path_of", lambda name, **_: Path("/bin") / name)
    cluster = LocalCluster("w", tmp_path, Ports(1, 2, 3, kwok=4), full=True, dra=dra_on)
    cluster.start_etcd()
    cluster.start_apiserver()
    cluster.start_full_mode()
    return {role: p.argv for role, p in cluster.processes.items()}


def test_a_dra_cluster_turns_the_alpha_gates_on_and_runs_the_claim_controller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = _argv_of_a_started_cluster(tmp_path, monkeypatch, dra_on=True)
    gates = "--feature-gates=DRAExtendedResource=true,DRAPartitionableDevices=true"
    for role in ("kube-apiserver", "kube-scheduler", "kube-controller-manager"):
        assert gates in argv[role], role
    for role in ("etcd", "kwok"):
        assert not any(a.startswith("--feature-gates") for a in argv[role]), role
    (controllers,) = [a for a in argv["kube-controller-manager"] if a.startswith("--controllers=")]
    assert "resourceclaim-controller" in controllers.split("=", 1)[1].split(",")
    assert "job-controller" in controllers


def test_without_dra_the_control_plane_is_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = _argv_of_a_started_cluster(tmp_path, monkeypatch, dra_on=False)
    assert not any(a.startswith("--feature-gates") for args in argv.values() for a in args)
    assert "resourceclaim-controller" not in " ".join(argv["kube-controller-manager"])


def test_dra_comes_with_the_full_bed_and_needs_it(tmp_path: Path) -> None:
    full = LocalFederation("f", workers=1, full=True, root=tmp_path)
    assert full.dra and all(c.dra for c in full)
    assert not LocalFederation("n", workers=1, full=True, root=tmp_path, dra=False).dra
    assert not LocalFederation("l", workers=1, root=tmp_path).dra
    with pytest.raises(ValueError, match="DRA needs the full test bed"):
        LocalFederation("x", workers=1, root=tmp_path, dra=True)
