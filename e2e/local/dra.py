"""Dynamic Resource Allocation on the local test bed, with no GPU and no DRA driver: the objects
a driver would publish, written by hand from the node set file.

Each kwok node whose group has a ``devices:`` entry gets one ResourceSlice
(``resource.k8s.io/v1``, driver ``gpu.kfed.io``, one pool per node) listing its fake GPUs, and
each GPU model gets one DeviceClass, ``<model>.gpu.kfed.io``. The real kube-scheduler
allocates claims against those slices, and kube-controller-manager's resource-claim
controller makes each pod's claims from its templates; kwok plays the kubelet, which has
nothing to prepare for a fake device.

``devices:`` in a node group (all keys but ``model`` optional)::

    devices:
      model: h100                  # the devices' `model` attribute; a DNS label
      count: 4                     # whole GPUs per node (default 1)
      extendedResourceName: nvidia.com/gpu   # the model's DeviceClass serves this
                                   # extended resource to pods on nodes that lack it
                                   # in their allocatable (DRAExtendedResource)
      partitions:                  # MIG-style partitions of each GPU (DRAPartitionableDevices)
        slices: 7                  # each GPU's shared counter `slices`
        profiles: {1g: 1, 3g: 3}   # profile (a DNS label) -> slices one partition takes

With partitions, each GPU ``i`` has a counter set ``gpu-<i>`` holding ``slices``; the whole GPU
``gpu-<i>`` consumes all of them, and each profile ``p`` of ``n`` slices adds
``slices // n`` devices ``gpu-<i>-<p>-<j>`` consuming ``n`` each, so the scheduler hands out a
GPU whole or as partitions, never both. Partitions get a DeviceClass per profile,
``<model>-<p>.gpu.kfed.io``; the model's own class selects whole GPUs only.

Every device has the attributes ``model`` (string), ``index`` (int, the GPU's number on its
node) and ``profile`` (string: ``full`` for a whole GPU, else the partition's profile).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

DRIVER = "gpu.kfed.io"
"""The driver name of kfed's hand-made ResourceSlices (no driver runs: nothing answers for it
on a node, and none needs to, since kwok's pods have no containers to give devices to)."""

FULL_PROFILE = "full"
"""The ``profile`` attribute of a whole GPU."""

FEATURE_GATES = {"DRAPartitionableDevices": True, "DRAExtendedResource": True}
"""Alpha in Kubernetes 1.34 (off by default), turned on for kube-apiserver (which otherwise
drops ``sharedCounters``, ``consumesCounters`` and ``extendedResourceName`` from what it
stores), kube-scheduler (which allocates by them) and kube-controller-manager. Everything else
DRA needs is on by default in 1.34: ``resource.k8s.io/v1`` is served and the
DynamicResourceAllocation gate is GA."""

CONTROLLER = "resourceclaim-controller"
"""kube-controller-manager's controller that makes a pod's ResourceClaims from its
``resourceClaimTemplateName`` entries (and deletes them with the pod)."""

# Limits of resource.k8s.io/v1 (k8s.io/kubernetes pkg/apis/resource/types.go, 1.34).
MAX_DEVICES_PER_SLICE = 128
MAX_SHARED_COUNTERS_PER_SLICE = 32

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def feature_gates_flag() -> str:
    """``--feature-gates=...`` for every control-plane process of a DRA bed."""
    gates = ",".join(f"{name}={str(on).lower()}" for name, on in sorted(FEATURE_GATES.items()))
    return f"--feature-gates={gates}"


@dataclass(frozen=True, slots=True)
class Partitions:
    """MIG-style partitions: each GPU shares ``slices`` among its partitions and itself."""

    slices: int
    profiles: dict[str, int]
    """profile name -> the slices one partition of it consumes."""


@dataclass(frozen=True, slots=True)
class Devices:
    """The fake GPUs each node of a group has, published through DRA."""

    model: str
    count: int = 1
    extended_resource_name: str | None = None
    partitions: Partitions | None = None

    @property
    def class_name(self) -> str:
        """The DeviceClass of this model's whole GPUs."""
        return class_name(self.model)


def class_name(model: str, profile: str | None = None) -> str:
    """``h100.gpu.kfed.io`` for whole H100s, ``h100-1g.gpu.kfed.io`` for its 1g partitions."""
    return f"{model}-{profile}.{DRIVER}" if profile else f"{model}.{DRIVER}"


def _dns_label(value: object, what: str) -> str:
    text = str(value)
    if not _DNS_LABEL.match(text) or len(text) > 63:
        raise ValueError(f"{what} {text!r} must be a DNS label (lower case, digits, '-')")
    return text


def _positive(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{what} must be a positive integer, not {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{what} must be a positive integer, not {value!r}") from None
    if number < 1:
        raise ValueError(f"{what} must be a positive integer, not {value!r}")
    return number


def parse_devices(raw: object, *, group: str) -> Devices | None:
    """The ``devices:`` entry of node group ``group`` (None when absent); ValueError naming
    the group and the key when it is malformed or exceeds what one ResourceSlice holds."""
    if raw is None:
        return None
    where = f"node group {group!r}: devices"
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where} must be a mapping (model, count, ...), not {raw!r}")
    unknown = set(raw) - {"model", "count", "extendedResourceName", "partitions"}
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
    if "model" not in raw:
        raise ValueError(f"{where}: `model` is required")
    model = _dns_label(raw["model"], f"{where}.model")
    count = _positive(raw.get("count", 1), f"{where}.count")
    extended = raw.get("extendedResourceName")
    if extended is not None and "/" not in str(extended):
        raise ValueError(
            f"{where}.extendedResourceName {extended!r} must be a domain-prefixed extended "
            "resource name such as nvidia.com/gpu"
        )
    partitions = _parse_partitions(raw.get("partitions"), where)
    devices = Devices(
        model=model,
        count=count,
        extended_resource_name=None if extended is None else str(extended),
        partitions=partitions,
    )
    per_node = len(device_entries(devices))
    if per_node > MAX_DEVICES_PER_SLICE:
        raise ValueError(
            f"{where}: {per_node} devices per node; one ResourceSlice holds at most "
            f"{MAX_DEVICES_PER_SLICE}"
        )
    if partitions is not None and count > MAX_SHARED_COUNTERS_PER_SLICE:
        raise ValueError(
            f"{where}: {count} partitioned GPUs per node; one ResourceSlice holds at most "
            f"{MAX_SHARED_COUNTERS_PER_SLICE} shared counters (one per GPU)"
        )
    return devices


def _parse_partitions(raw: object, where: str) -> Partitions | None:
    if raw is None:
        return None
    where = f"{where}.partitions"
    if not isinstance(raw, Mapping) or set(raw) != {"slices", "profiles"}:
        raise ValueError(f"{where} must be a mapping with `slices` and `profiles`, not {raw!r}")
    slices = _positive(raw["slices"], f"{where}.slices")
    profiles_raw = raw["profiles"]
    if not isinstance(profiles_raw, Mapping) or not profiles_raw:
        raise ValueError(f"{where}.profiles must map profile names to slices, not {profiles_raw!r}")
    profiles: dict[str, int] = {}
    for name, used in profiles_raw.items():
        profile = _dns_label(name, f"{where}.profiles key")
        if profile == FULL_PROFILE:
            raise ValueError(f"{where}.profiles: {FULL_PROFILE!r} names a whole GPU")
        taken = _positive(used, f"{where}.profiles.{profile}")
        if taken > slices:
            raise ValueError(f"{where}.profiles.{profile}: {taken} slices of only {slices}")
        profiles[profile] = taken
    return Partitions(slices=slices, profiles=profiles)


@dataclass(frozen=True, slots=True)
class _Device:
    name: str
    index: int
    profile: str
    slices: int = 0
    """Slices it consumes from its GPU's counter set (partitioned GPUs only)."""


def device_entries(devices: Devices) -> list[_Device]:
    entries: list[_Device] = []
    parts = devices.partitions
    for i in range(devices.count):
        entries.append(_Device(f"gpu-{i}", i, FULL_PROFILE, parts.slices if parts else 0))
        if parts is None:
            continue
        for profile, used in parts.profiles.items():
            for j in range(parts.slices // used):
                entries.append(_Device(f"gpu-{i}-{profile}-{j}", i, profile, used))
    return entries


def resource_slice(node: str, devices: Devices) -> dict[str, Any]:
    """The ResourceSlice of ``node``'s devices: a pool of its own, named after the node, in
    one slice (generation 1, as a driver that never republishes)."""
    parts = devices.partitions
    items: list[dict[str, Any]] = []
    for d in device_entries(devices):
        item: dict[str, Any] = {
            "name": d.name,
            "attributes": {
                "model": {"string": devices.model},
                "index": {"int": d.index},
                "profile": {"string": d.profile},
            },
        }
        if parts is not None:
            item["consumesCounters"] = [
                {"counterSet": f"gpu-{d.index}", "counters": {"slices": {"value": str(d.slices)}}}
            ]
        items.append(item)
    spec: dict[str, Any] = {
        "driver": DRIVER,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "nodeName": node,
        "devices": items,
    }
    if parts is not None:
        spec["sharedCounters"] = [
            {"name": f"gpu-{i}", "counters": {"slices": {"value": str(parts.slices)}}}
            for i in range(devices.count)
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER.replace('.', '-')}", "labels": {"kfed.io/dra": ""}},
        "spec": spec,
    }


COUNTERS_APART_FROM = (1, 35)
"""From Kubernetes 1.35 a ResourceSlice holds devices or shared counters, never both ("only
one of `sharedCounters` or `devices` is allowed"); until then a device's ``consumesCounters``
must name a counter set of its own slice."""


def counters_apart(kubernetes: str) -> bool:
    """Whether a cluster of this Kubernetes version wants a node's counters in a slice apart."""
    major, minor = (int(part) for part in kubernetes.split(".")[:2])
    return (major, minor) >= COUNTERS_APART_FROM


def resource_slices(node: str, devices: Devices, *, kubernetes: str) -> list[dict[str, Any]]:
    """The ResourceSlices of ``node``'s devices, in the shape its Kubernetes version takes:
    ``resource_slice``'s one, or (partitioned GPUs from 1.35) its counters in a slice of their
    own and its devices in another, both of the node's pool (``resourceSliceCount`` 2)."""
    whole = resource_slice(node, devices)
    spec = whole["spec"]
    if "sharedCounters" not in spec or not counters_apart(kubernetes):
        return [whole]
    pool = {**spec["pool"], "resourceSliceCount": 2}
    counters = {
        **whole,
        "metadata": {**whole["metadata"], "name": f"{whole['metadata']['name']}-counters"},
        "spec": {
            "driver": spec["driver"],
            "pool": pool,
            "nodeName": node,
            "sharedCounters": spec.pop("sharedCounters"),
        },
    }
    spec["pool"] = pool
    return [counters, whole]


def _selector(model: str, profile: str) -> dict[str, Any]:
    attrs = f'device.attributes["{DRIVER}"]'
    expression = (
        f'device.driver == "{DRIVER}" && {attrs}.model == "{model}" '
        f'&& {attrs}.profile == "{profile}"'
    )
    return {"cel": {"expression": expression}}


@dataclass
class _ModelClasses:
    extended_resource_name: str | None = None
    profiles: set[str] = field(default_factory=set)


def device_classes(all_devices: Iterable[Devices]) -> list[dict[str, Any]]:
    """One DeviceClass per model (its whole GPUs, with the model's ``extendedResourceName``
    if a group gives one) and one per partition profile of a model. Groups of one model must
    not name two extended resources."""
    models: dict[str, _ModelClasses] = {}
    for devices in all_devices:
        seen = models.setdefault(devices.model, _ModelClasses())
        name = devices.extended_resource_name
        if name is not None:
            if seen.extended_resource_name not in (None, name):
                raise ValueError(
                    f"model {devices.model!r}: two extendedResourceNames, "
                    f"{seen.extended_resource_name!r} and {name!r}"
                )
            seen.extended_resource_name = name
        if devices.partitions is not None:
            seen.profiles.update(devices.partitions.profiles)
    classes: list[dict[str, Any]] = []
    for model, seen in sorted(models.items()):
        spec: dict[str, Any] = {"selectors": [_selector(model, FULL_PROFILE)]}
        if seen.extended_resource_name is not None:
            spec["extendedResourceName"] = seen.extended_resource_name
        classes.append(_device_class(class_name(model), spec))
        for profile in sorted(seen.profiles):
            classes.append(
                _device_class(
                    class_name(model, profile), {"selectors": [_selector(model, profile)]}
                )
            )
    return classes


def _device_class(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name, "labels": {"kfed.io/dra": ""}},
        "spec": spec,
    }


def devices_to_state(devices: Devices | None) -> dict[str, Any] | None:
    """The node file's own shape, so that ``parse_devices`` reads it back."""
    if devices is None:
        return None
    raw: dict[str, Any] = {"model": devices.model, "count": devices.count}
    if devices.extended_resource_name is not None:
        raw["extendedResourceName"] = devices.extended_resource_name
    if devices.partitions is not None:
        raw["partitions"] = {
            "slices": devices.partitions.slices,
            "profiles": dict(devices.partitions.profiles),
        }
    return raw
