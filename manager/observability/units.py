"""Quantities and ages as the dashboard shows them: core units (milli-cores, bytes, devices)
in natural units for the gauges, canonical quantities for people, short ages."""

from __future__ import annotations

from manager.api import quantity


def natural(resource: str, units: int) -> float:
    """Core units (milli-cores, bytes, devices) as Prometheus wants them: cores, bytes, devices."""
    return float(quantity.from_core_units(resource, units).value)


def human(resource: str, units: int) -> str:
    return quantity.from_core_units(resource, units).canonical()


def human_age(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 2 * 86400:
        return f"{s // 3600}h{(s % 3600) // 60}m"
    return f"{s // 86400}d"
