"""Which quota resource each DeviceClass is charged to: kfed's reading of upstream Kueue's
``resources.deviceClassMappings`` (``--device-class-mappings``), checked by upstream's rules
(pkg/config/validation.go), with the counter sources kfed adds for partitionable devices.
See docs/dra.md."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from manager.api import dracel, view
from manager.api.dracounters import CounterSource

Obj = dict[str, Any]

MAX_MAPPINGS = 16
MAX_CLASSES_PER_MAPPING = 8
"""Upstream's limits on ``deviceClassMappings`` (pkg/config/validation.go)."""

_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


# --- the mapping ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeviceClassMapping:
    """One entry of Kueue's ``resources.deviceClassMappings``."""

    name: str
    """The quota resource (as in a ClusterQueue's ``coveredResources``)."""
    device_class_names: tuple[str, ...]
    counters: tuple[CounterSource, ...] = ()
    """``sources[].counter``: the classes' devices are charged by these shared counters
    (partitionable devices), not by their number (``dracounters``)."""

    def to_json_value(self) -> Obj:
        value: Obj = {"name": self.name, "deviceClassNames": list(self.device_class_names)}
        if self.counters:
            value["sources"] = [
                {
                    "counter": {
                        "name": c.name,
                        "driver": c.driver,
                        "deviceSelector": {"cel": {"expression": c.selector}},
                    }
                }
                for c in self.counters
            ]
        return value


@dataclass(frozen=True, slots=True)
class DeviceClassMappings:
    mappings: tuple[DeviceClassMapping, ...] = ()

    def resource_for(self, device_class: str) -> str | None:
        for mapping in self.mappings:
            if device_class in mapping.device_class_names:
                return mapping.name
        return None

    def counters_for(self, device_class: str) -> list[tuple[str, CounterSource]]:
        """(quota resource, counter source) of every mapping that charges ``device_class``
        by a counter; empty: it is charged by its number of devices."""
        return [
            (m.name, c)
            for m in self.mappings
            if device_class in m.device_class_names
            for c in m.counters
        ]

    @property
    def counter_based(self) -> bool:
        return any(m.counters for m in self.mappings)

    def to_json(self) -> str:
        return json.dumps([m.to_json_value() for m in self.mappings])


def _qualified_name_problem(value: str) -> str | None:
    """Why ``value`` is not a Kubernetes qualified name (a label key), or None."""
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return "its prefix must be a DNS subdomain (lower case, at most 253 characters)"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return (
            "must be 63 characters or fewer, of alphanumerics, '-', '_' or '.', starting and "
            "ending with an alphanumeric (with an optional DNS subdomain prefix and '/')"
        )
    return None


def parse_device_class_mappings(text: str) -> DeviceClassMappings:
    """The mapping from its JSON form, upstream's shape:
    ``[{"name": "example.com/gpu", "deviceClassNames": ["gpu.example.com"]}]``.
    Checked as upstream checks its Configuration; raises ValueError naming every problem."""
    if not text.strip():
        return DeviceClassMappings()
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"not JSON: {err.msg} at character {err.pos}") from None
    if not isinstance(raw, list):
        raise ValueError('must be a JSON list of {"name": ..., "deviceClassNames": [...]}')
    problems: list[str] = []
    if len(raw) > MAX_MAPPINGS:
        problems.append(f"at most {MAX_MAPPINGS} mappings, got {len(raw)}")
    mappings: list[DeviceClassMapping] = []
    resource_of: dict[str, str] = {}
    counter_names_of: dict[str, set[str]] = {}
    for i, entry in enumerate(raw):
        at = f"deviceClassMappings[{i}]"
        if not isinstance(entry, dict) or set(entry) - {"name", "deviceClassNames", "sources"}:
            problems.append(
                f'{at}: must be {{"name": ..., "deviceClassNames": [...], "sources": [...]}}'
            )
            continue
        name, classes = entry.get("name"), entry.get("deviceClassNames")
        counters = _counter_sources(entry.get("sources"), f"{at}.sources", problems)
        counter_name = counters[0].name if counters else ""
        if not isinstance(name, str) or not name:
            problems.append(f"{at}.name: required")
            continue
        if why := _qualified_name_problem(name):
            problems.append(f"{at}.name: {name!r} {why}")
        if any(m.name == name for m in mappings):
            problems.append(f"{at}.name: {name!r} is a duplicate")
        if not isinstance(classes, list) or not classes:
            problems.append(f"{at}.deviceClassNames: at least one device class name is required")
            continue
        if len(classes) > MAX_CLASSES_PER_MAPPING:
            problems.append(
                f"{at}.deviceClassNames: at most {MAX_CLASSES_PER_MAPPING}, got {len(classes)}"
            )
        seen: set[str] = set()
        for j, device_class in enumerate(classes):
            cat = f"{at}.deviceClassNames[{j}]"
            if not isinstance(device_class, str) or not device_class:
                problems.append(f"{cat}: must be a non-empty string")
                continue
            if why := _qualified_name_problem(device_class):
                problems.append(f"{cat}: {device_class!r} {why}")
            if device_class in seen:
                problems.append(f"{cat}: {device_class!r} is a duplicate")
            seen.add(device_class)
            earlier = resource_of.setdefault(device_class, name)
            counted = counter_names_of.setdefault(device_class, set())
            if earlier == name:
                counted.add(counter_name)
            elif not counter_name or not counted - {""}:
                # Two mappings may share a class only when each counts a different counter
                # of its devices (upstream: gpu memory and gpu compute, say).
                problems.append(f"{cat}: {device_class!r} is already mapped to resource {earlier}")
            elif counter_name in counted:
                problems.append(
                    f"{cat}: {device_class!r} already has a counter source for counter "
                    f'"{counter_name}"'
                )
            else:
                counted.add(counter_name)
        mappings.append(
            DeviceClassMapping(
                name, tuple(c for c in classes if isinstance(c, str)), tuple(counters)
            )
        )
    if problems:
        raise ValueError("; ".join(problems))
    return DeviceClassMappings(tuple(mappings))


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _counter_sources(raw: object, at: str, problems: list[str]) -> list[CounterSource]:
    """A mapping entry's ``sources``, checked by upstream's rules (each exactly one of
    ``counter`` or ``capacity``; capacity sources need a gate upstream keeps off, and kfed
    does not count consumable capacity)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        problems.append(f'{at}: must be a list of {{"counter": {{...}}}}')
        return []
    out: list[CounterSource] = []
    for k, source in enumerate(raw):
        sat = f"{at}[{k}]"
        if not isinstance(source, dict) or set(source) - {"counter", "capacity"}:
            problems.append(f'{sat}: must be {{"counter": {{...}}}}')
            continue
        counter, capacity = source.get("counter"), source.get("capacity")
        if counter is None and capacity is None:
            problems.append(f"{sat}: Required value: exactly one source type must be set per entry")
            continue
        if counter is not None and capacity is not None:
            problems.append(f"{sat}: exactly one source type must be set per entry")
            continue
        if capacity is not None:
            problems.append(
                f"{sat}.capacity: capacity sources require KueueDRAIntegrationConsumableCapacity "
                "to be enabled (kfed does not count consumable capacity)"
            )
            continue
        cat = f"{sat}.counter"
        if not isinstance(counter, dict) or set(counter) - {"name", "driver", "deviceSelector"}:
            problems.append(f"{cat}: must be {{name, driver, deviceSelector}}")
            continue
        name, driver = counter.get("name"), counter.get("driver")
        selector = view.at(counter, "deviceSelector", "cel").get("expression")
        ok = True
        if not isinstance(name, str) or not name:
            problems.append(f"{cat}.name: Required value")
            ok = False
        elif len(name) > 63 or not _DNS_LABEL.match(name):
            problems.append(f"{cat}.name: {name!r} must be a DNS label")
            ok = False
        if not isinstance(driver, str) or not driver:
            problems.append(f"{cat}.driver: Required value")
            ok = False
        elif len(driver) > 63 or not _DNS_SUBDOMAIN.match(driver):
            problems.append(
                f"{cat}.driver: {driver!r} must be a DNS subdomain of at most 63 characters"
            )
            ok = False
        if not isinstance(selector, str) or not selector:
            problems.append(f"{cat}.deviceSelector.cel.expression: Required value")
            ok = False
        elif why := dracel.compile_problem(selector):
            problems.append(f"{cat}.deviceSelector.cel.expression: CEL compilation failed: {why}")
            ok = False
        if ok:
            out.append(CounterSource(str(name), str(driver), str(selector)))
    return out
