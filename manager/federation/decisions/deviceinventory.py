"""A worker's devices (pure): what its ``resource.k8s.io/v1`` objects say, as the device
check (devices.py) reads them. The ResourceSlices give what devices each node has (driver,
pool, name, attributes, the shared counters they consume), each pool at its newest
generation; the ResourceClaims (``status.allocation``) which devices are taken; the
DeviceClasses their CEL selectors."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from manager.api import dracel
from manager.api.view import at

Obj = dict[str, Any]
DeviceId = tuple[str, str, str]
"""(driver, pool, device name): how a claim's allocation names a device."""
CounterKey = tuple[str, str, str, str]
"""(driver, pool, counter set, counter)."""


@dataclass(frozen=True, slots=True)
class Device:
    id: DeviceId
    node: str
    attributes: dracel.Domains
    """Per domain, (name, value): hashable, so that a selector's verdict is remembered for
    every device that looks the same (the same model on a thousand nodes)."""
    capacity: dracel.Domains = ()
    consumes: tuple[tuple[str, str, int], ...] = ()
    """(counter set, counter, amount) it takes from its pool's shared counters."""

    @property
    def driver(self) -> str:
        return self.id[0]


@dataclass(frozen=True, slots=True)
class Inventory:
    """The devices of a worker's nodes, from its ResourceSlices."""

    nodes: Mapping[str, tuple[Device, ...]]
    counters: Mapping[CounterKey, int] = field(default_factory=dict)
    """Shared counters per pool (partitionable devices): their capacity."""
    not_counted: int = 0
    """Devices of slices without a node (``allNodes``, a node selector): not used here."""


@dataclass(frozen=True, slots=True)
class Taken:
    """What the worker's ResourceClaims hold (``status.allocation``)."""

    devices: frozenset[DeviceId] = frozenset()


@dataclass(frozen=True, slots=True)
class WorkerDevices:
    """One worker's devices as the check reads them."""

    inventory: Inventory
    taken: Taken
    classes: Mapping[str, tuple[str, ...]]
    """DeviceClass name -> its CEL selector expressions."""


def inventory(slices: Iterable[Obj]) -> Inventory:
    """The devices per node of these ResourceSlices, each pool at its newest generation."""
    newest: dict[tuple[str, str], int] = {}
    slices = list(slices)
    for s in slices:
        spec = at(s, "spec")
        pool = spec.get("pool") or {}
        key = (str(spec.get("driver", "")), str(pool.get("name", "")))
        newest[key] = max(newest.get(key, 0), int(pool.get("generation") or 0))
    nodes: dict[str, list[Device]] = {}
    counters: dict[CounterKey, int] = {}
    not_counted = 0
    for s in slices:
        spec = at(s, "spec")
        driver = str(spec.get("driver", ""))
        pool = spec.get("pool") or {}
        pool_name = str(pool.get("name", ""))
        if int(pool.get("generation") or 0) < newest[(driver, pool_name)]:
            continue
        for counter_set in spec.get("sharedCounters") or []:
            for counter, amount in (counter_set.get("counters") or {}).items():
                ckey = (driver, pool_name, str(counter_set.get("name", "")), str(counter))
                counters[ckey] = _units((amount or {}).get("value", 0))
        node = spec.get("nodeName")
        items = spec.get("devices") or []
        if not node:
            not_counted += len(items)
            continue
        for d in items:
            consumes = tuple(
                (str(c.get("counterSet", "")), str(name), _units((v or {}).get("value", 0)))
                for c in d.get("consumesCounters") or []
                for name, v in (c.get("counters") or {}).items()
            )
            nodes.setdefault(str(node), []).append(
                Device(
                    (driver, pool_name, str(d.get("name", ""))),
                    str(node),
                    dracel.attributes_of(d, driver),
                    dracel.capacity_of(d, driver),
                    consumes,
                )
            )
    return Inventory(
        {n: tuple(sorted(ds, key=lambda d: d.id)) for n, ds in sorted(nodes.items())},
        counters,
        not_counted,
    )


def _units(value: object) -> int:
    """A counter's quantity as a whole number (kfed's bed and most drivers count slices or
    bytes; a fractional quantity is rounded down)."""
    text = str(value).strip()
    suffixes = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6}
    for suffix, factor in suffixes.items():
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * factor)
    try:
        return int(float(text))
    except ValueError:
        return 0


def taken(claims: Iterable[Obj]) -> Taken:
    """The devices the claims' allocations hold (an ``adminAccess`` result holds nothing)."""
    held: set[DeviceId] = set()
    for claim in claims:
        for result in at(claim, "status", "allocation", "devices").get("results") or []:
            if result.get("adminAccess"):
                continue
            held.add(
                (str(result.get("driver", "")), str(result.get("pool", "")), str(result["device"]))
            )
    return Taken(frozenset(held))


def device_classes(objects: Iterable[Obj]) -> dict[str, tuple[str, ...]]:
    return {
        str(c["metadata"]["name"]): dracel.selector_expressions(at(c, "spec").get("selectors"))
        for c in objects
    }


def worker_devices(
    slices: Iterable[Obj], claims: Iterable[Obj], classes: Iterable[Obj]
) -> WorkerDevices:
    return WorkerDevices(inventory(slices), taken(claims), device_classes(classes))
