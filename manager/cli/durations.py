"""Durations as ``kfed`` options take them: Go durations (``30s``, ``5m``, ``1h30m``),
parsed to seconds, printed back for defaults, and a click type for options."""

from __future__ import annotations

import re
from typing import Any

import click

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h|d)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}


def parse_duration(text: str) -> float:
    """Seconds of a Go duration (``90s``, ``5m``, ``1h30m``, ``500ms``; also ``2d``; ``0``).
    A bare number is refused: its unit would be a guess."""
    value = text.strip()
    if value == "0":
        return 0.0
    if re.fullmatch(r"[+-]?(\d+(\.\d*)?|\.\d+)", value):
        raise ValueError(f"{text!r} has no unit: write {value}s (Go durations: 30s, 5m, 1h30m)")
    if value.startswith("-"):
        raise ValueError(f"{text!r} is negative: a duration here is 0 or more")
    body = value.removeprefix("+")
    total, pos = 0.0, 0
    for match in _DURATION_PART.finditer(body):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if not body or pos != len(body):
        raise ValueError(f"{text!r} is not a duration such as 30s, 5m or 1h30m")
    return total


def format_duration(seconds: float) -> str:
    """A duration as a Go duration string (``1h30m``, ``45s``, ``500ms``), for defaults."""
    if seconds and seconds < 1:
        return f"{seconds * 1000:g}ms"
    whole = int(seconds)
    if whole != seconds:
        return f"{seconds:g}s"
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    return text + (f"{secs}s" if secs or not text else "")


class Duration(click.ParamType[float]):
    """A Go duration option (``30s``, ``5m``, ``1h30m``), converted to seconds (a float),
    within [``min``, ``max``] seconds. Bare numbers are refused with a hint."""

    name = "duration"

    def __init__(self, min: float | None = None, max: float | None = None) -> None:
        self.min = min
        self.max = max

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "DURATION"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            seconds = float(value)  # a default given in seconds
        else:
            try:
                seconds = parse_duration(str(value))
            except ValueError as err:
                self.fail(str(err), param, ctx)
        if self.min is not None and seconds < self.min:
            self.fail(f"{value!r} is under the minimum {format_duration(self.min)}", param, ctx)
        if self.max is not None and seconds > self.max:
            self.fail(f"{value!r} is over the maximum {format_duration(self.max)}", param, ctx)
        return seconds
