"""DRA device selectors in CEL, evaluated as Kubernetes evaluates them, shared by the charge
(``dra.py``: counters of partitionable devices) and placement (``federation/decisions/
devices.py``).

``device`` is bound as the scheduler binds it: ``device.driver``,
``device.attributes["domain"].name`` (a name without a domain is the driver's) and
``device.capacity["domain"].name`` (as a string). Evaluated with the ``cel`` package
(``common-expression-language``, pinned): the selectors DeviceClasses and drivers write
(``==``, ``&&``, ``||``, attribute look-ups) evaluate as the scheduler does; one that cannot be
compiled or evaluated for a device (a missing attribute, a function the library lacks) does
not match it, and the verdict says why.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import cel

Domains = tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]
"""Per domain, (name, value) pairs: hashable, so that a selector's verdict is remembered for
every device that looks the same (one model on a thousand nodes)."""


class SelectorError(Exception):
    pass


def _value(raw: Mapping[str, Any]) -> Any:
    for kind in ("string", "int", "bool", "version"):
        if kind in raw:
            return raw[kind]
    return None


def _capacity_value(raw: Mapping[str, Any]) -> str:
    return str(raw.get("value", ""))


def _qualified(name: str, driver: str) -> tuple[str, str]:
    domain, slash, short = name.rpartition("/")
    return (domain, short) if slash else (driver, name)


def _domains(raw: Mapping[str, Any], driver: str, convert: Any) -> Domains:
    by_domain: dict[str, dict[str, Any]] = {}
    for name, value in raw.items():
        domain, short = _qualified(str(name), driver)
        by_domain.setdefault(domain, {})[short] = convert(value or {})
    return tuple(sorted((d, tuple(sorted(v.items()))) for d, v in by_domain.items()))


def attributes_of(device: Mapping[str, Any], driver: str) -> Domains:
    """A ResourceSlice device's ``attributes``, by domain."""
    return _domains(device.get("attributes") or {}, driver, _value)


def capacity_of(device: Mapping[str, Any], driver: str) -> Domains:
    """A ResourceSlice device's ``capacity``, by domain (values as strings)."""
    return _domains(device.get("capacity") or {}, driver, _capacity_value)


def _first_line(err: Exception) -> str:
    return (str(err).splitlines() or [type(err).__name__])[0]


@functools.lru_cache(maxsize=1024)
def program(expression: str) -> Any:
    """The compiled selector; SelectorError saying why it cannot be compiled."""
    try:
        return cel.compile(expression)
    except Exception as err:  # the library raises ValueError; any failure is "cannot"
        raise SelectorError(f"cannot compile {expression!r}: {_first_line(err)}") from None


def compile_problem(expression: str) -> str | None:
    """Why ``expression`` cannot be compiled, or None."""
    try:
        program(expression)
    except SelectorError as err:
        return str(err)
    return None


@functools.lru_cache(maxsize=65536)
def matches(expression: str, driver: str, attributes: Domains, capacity: Domains) -> bool | str:
    """True/False, or why the selector could not be evaluated for such a device. Remembered
    per (expression, driver, attributes, capacity): devices alike are judged once."""
    try:
        compiled = program(expression)
    except SelectorError as err:
        return str(err)
    device = {
        "driver": driver,
        "attributes": {d: dict(values) for d, values in attributes},
        "capacity": {d: dict(values) for d, values in capacity},
    }
    try:
        result = compiled.execute({"device": device})
    except Exception as err:  # a missing key, a function the library lacks: no match
        return f"cannot evaluate {expression!r}: {type(err).__name__} {_first_line(err)}"
    if not isinstance(result, bool):
        return f"{expression!r} gives {type(result).__name__}, not bool"
    return result


def selector_expressions(selectors: object) -> tuple[str, ...]:
    """The CEL expressions of a ``selectors`` list (a DeviceClass's or a request's)."""
    if not isinstance(selectors, list):
        return ()
    return tuple(
        str((s.get("cel") or {}).get("expression", ""))
        for s in selectors
        if isinstance(s, dict) and s.get("cel")
    )
