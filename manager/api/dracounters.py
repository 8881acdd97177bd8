"""Partitionable devices charged by the shared counters they consume, by upstream Kueue's rules
(``KueueDRAIntegrationPartitionableDevices``, ``pkg/dra/counters.go``).

A MIG-style driver publishes a GPU's capacity as a shared counter (``sharedCounters``: say
7 ``slices``) and each partition as a device consuming some of it (``consumesCounters``: a
1g partition 1 slice, a 3g one 3). Counting such a request by devices would charge a 3g
partition like a 1g one, and either like a whole GPU. A mapping entry with a counter source
(``sources: [{counter: {name, driver, deviceSelector}}]``) charges its DeviceClasses by the
counter instead: for one request, the devices that could serve it are those of the source's
driver that its ``deviceSelector``, the DeviceClass's selectors and the request's selectors
all match, in pools whose slices have all been published; the request is charged the
largest amount of the counter one of them consumes, times the request's ``count``. A request
the devices cannot answer yet (none match, fewer than asked, or none consume the counter) is
not a refusal: the devices may be published later, so the caller asks again.

Pure: the mapping's sources, the DeviceClasses' selectors and ResourceSlices in, an amount or
the reason out.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from manager.api import dracel
from manager.api.view import at, items

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class CounterSource:
    """One ``sources[].counter`` of a mapping entry: which counter of which driver's devices
    the entry's quota resource counts, and which devices (``selector``, in CEL) take part."""

    name: str
    driver: str
    selector: str


@dataclass(frozen=True, slots=True)
class NotYet:
    """The devices cannot answer for this request (yet): why, for the log."""

    message: str


Look = tuple[dracel.Domains, dracel.Domains, tuple[tuple[str, int], ...]]
"""What a device is to a counter charge: its attributes, its capacity and the (counter,
amount) it consumes over every counter set. Devices alike (one model's partitions on a
thousand nodes) are one look, counted, and judged once."""

_LOOKS_LIMIT = 65536
_looks: dict[Look, Look] = {}
"""Every look seen, kept once (interned), so that many slices share them."""
_SLICES_LIMIT = 16384
_slices: OrderedDict[tuple[str, str, str], tuple[tuple[Look, int], ...]] = OrderedDict()
"""Per slice version, its devices' looks and how many of each (``_looks_of``)."""


def _look(device: Obj, driver: str) -> Look:
    look = (
        dracel.attributes_of(device, driver),
        dracel.capacity_of(device, driver),
        tuple(
            (str(counter), units((v or {}).get("value", 0)))
            for c in items(device, "consumesCounters")
            for counter, v in at(c, "counters").items()
        ),
    )
    if len(_looks) > _LOOKS_LIMIT:
        _looks.clear()
    return _looks.setdefault(look, look)


def _count_looks(spec: Mapping[str, Any], driver: str) -> tuple[tuple[Look, int], ...]:
    counted: dict[Look, int] = {}
    for device in items(spec, "devices"):
        look = _look(device, driver)
        counted[look] = counted.get(look, 0) + 1
    return tuple(counted.items())


def _looks_of(s: Obj, driver: str) -> tuple[tuple[Look, int], ...]:
    """A slice's devices by look, read once per version of it: an object from the API server
    is known by its pool, name and resourceVersion (what an informer holds never changes in
    place); one without a resourceVersion is read every time."""
    spec, meta = at(s, "spec"), at(s, "metadata")
    version = meta.get("resourceVersion")
    if not version:
        return _count_looks(spec, driver)
    key = (str(at(spec, "pool").get("name", "")), str(meta.get("name", "")), str(version))
    found = _slices.get(key)
    if found is None:
        found = _slices[key] = _count_looks(spec, driver)
        if len(_slices) > _SLICES_LIMIT:
            _slices.popitem(last=False)
    else:
        _slices.move_to_end(key)
    return found


def _complete_pools(slices: Iterable[Obj], driver: str) -> dict[Look, int]:
    """The devices, by look, of ``driver``'s pools whose slices at their newest generation
    have all been published (``resourceSliceCount`` of them), as upstream reads them."""
    pools: dict[str, tuple[int, int, list[Obj]]] = {}
    for s in slices:
        spec = at(s, "spec")
        if spec.get("driver") != driver:
            continue
        pool = at(spec, "pool")
        name, generation = str(pool.get("name", "")), int(pool.get("generation") or 0)
        expected = int(pool.get("resourceSliceCount") or 1)
        seen = pools.get(name)
        if seen is None or generation > seen[0]:
            pools[name] = (generation, expected, [s])
        elif generation == seen[0]:
            seen[2].append(s)
    devices: dict[Look, int] = {}
    for _, expected, members in pools.values():
        if len(members) == expected:
            for s in members:
                for look, n in _looks_of(s, driver):
                    devices[look] = devices.get(look, 0) + n
    return devices


def units(value: object) -> int:
    """A counter's quantity as a whole number (slices, bytes); fractions are rounded down."""
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.isdigit():
        return int(text)
    suffixes = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6}
    for suffix, factor in suffixes.items():
        if text.endswith(suffix):
            try:
                return int(float(text[: -len(suffix)]) * factor)
            except ValueError:
                return 0
    try:
        return int(float(text))
    except ValueError:
        return 0


def charged(
    source: CounterSource,
    class_selectors: Iterable[str],
    request_selectors: Iterable[str],
    count: int,
    slices: Iterable[Obj],
) -> int | NotYet:
    """What one request of ``count`` devices is charged by ``source``'s counter: the most of
    it one matching device consumes, times ``count`` (upstream's rule), or why it cannot be
    told yet (upstream's words)."""
    expressions = (source.selector, *class_selectors, *request_selectors)
    matched = 0
    amounts: list[int] = []
    for (attributes, capacity, consumes), n in _complete_pools(slices, source.driver).items():
        # In upstream's order, the first selector that says no settles it: a class's
        # selector is never evaluated on a device the source does not count.
        for expression in expressions:
            verdict = dracel.matches(expression, source.driver, attributes, capacity)
            if isinstance(verdict, str):
                return NotYet(f"CEL evaluation error: {verdict}")
            if not verdict:
                break
        else:
            matched += n
            amounts.extend(a for counter, a in consumes if counter == source.name)
    if matched < count:
        return NotYet(
            "insufficient matching devices for counter driver: "
            f"{matched} device(s) match but {count} requested"
        )
    if not amounts:
        return NotYet(f'matched devices have no consumesCounters entry for counter "{source.name}"')
    return max(max(amounts), 0) * count


def class_selectors(classes: Mapping[str, Obj], device_class: str) -> tuple[str, ...] | None:
    """The CEL selectors of DeviceClass ``device_class`` (None: no such class is known)."""
    found = classes.get(device_class)
    if found is None:
        return None
    return dracel.selector_expressions(at(found, "spec").get("selectors"))
