"""How long a finished workload's objects stay on the worker it ran on: pure. The manager's
``--finished-retention`` (``FederationSettings.finished_retention``) and a ClusterQueue's
``kfed.io/finished-retention`` annotation in, seconds out; a finish time and a clock in, the
seconds still to keep out. ``retaining.Retaining`` reads the objects; the dispatcher
(``routing.Step.RETAIN``) and the garbage sweep (``leftovers.judge_copy``) act on it.

What is kept: the copy that ran and ended there, with our Job and its pods. What never is:
copies on other workers (they never ran), the objects of a workload deleted from the manager
(as upstream: a deletion removes its copies at once, and a Job submitted again under that
name must not wait for them), and a run whose finish time cannot be read.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping
from typing import Any

from manager.api import constants as C
from manager.api.view import items

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_SECONDS = re.compile(r"\d+(?:\.\d*)?|\.\d+")
EXAMPLES = "e.g. 90s, 10m, 1h30m, or a number of seconds"


def parse_duration(text: str) -> float:
    """Seconds in ``text``: a Go duration as Kubernetes writes them (``1h30m``, ``90s``,
    ``500ms``, ``0``) or a plain number of seconds (``90``, as kfed's other duration flags
    take). Raises ValueError saying what is wrong."""
    value = text.strip()
    if not value:
        raise ValueError(f"empty; expected a duration ({EXAMPLES})")
    if value.startswith("-"):
        raise ValueError(f"{text!r} is negative; expected a duration of 0 or more ({EXAMPLES})")
    if _SECONDS.fullmatch(value):
        return float(value)
    position, seconds = 0, 0.0
    for part in _PART.finditer(value):
        if part.start() != position:
            break
        seconds += float(part.group(1)) * _UNITS[part.group(2)]
        position = part.end()
    if position != len(value) or position == 0:
        raise ValueError(f"{text!r} is not a duration ({EXAMPLES})")
    if not math.isfinite(seconds):
        raise ValueError(f"{text!r} is too long a duration")
    return seconds


def format_duration(seconds: float) -> str:
    """``1h30m``, ``90s`` -> ``1m30s``, ``0.5`` -> ``0.5s``: for messages."""
    if seconds < 60:
        return f"{seconds:g}s"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else ""]
    parts.append(f"{secs + (seconds - whole):g}s" if secs or seconds != whole else "")
    return "".join(parts)


def retention_for(annotation: str | None, default: float) -> tuple[float, str | None]:
    """The retention a ClusterQueue's ``kfed.io/finished-retention`` value asks for, and why
    it cannot be used when it cannot (then: ``default``, the manager's setting)."""
    if annotation is None:
        return default, None
    try:
        return parse_duration(annotation), None
    except ValueError as err:
        return default, str(err)


def finished_at(workload: Mapping[str, Any]) -> float | None:
    """When the workload finished: its Finished condition's ``lastTransitionTime`` (None
    when it has not finished, or the time cannot be read)."""
    for condition in items(workload, "status", "conditions"):
        if condition.get("type") == C.FINISHED and condition.get("status") == "True":
            raw = condition.get("lastTransitionTime")
            if not isinstance(raw, str):
                return None
            try:
                return dt.datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
            except ValueError:
                return None
    return None


def time_left(finished: float | None, retention: float, now: float) -> float:
    """Seconds its objects are still kept (0: collect them now). A finish time that cannot
    be read keeps nothing: without it, nothing would ever say when to collect."""
    if finished is None or retention <= 0:
        return 0.0
    return max(0.0, finished + retention - now)
