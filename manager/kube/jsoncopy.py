"""A deep copy of a decoded JSON document (dicts, lists, strings, numbers, booleans, None),
three times as fast as ``copy.deepcopy``: every status write copies the object it computes
from (``update.patch_guarded``), and ``deepcopy``'s memo and dispatch were ~2 % of the
admitting controller's CPU in the scheduler benchmark's profile. Strings and numbers are
immutable and shared as they are (so strings the informers share stay shared); anything
else falls back to ``copy.deepcopy``."""

from __future__ import annotations

import copy
from typing import Any, TypeVar, cast

T = TypeVar("T")

_IMMUTABLE = (str, int, float, bool, type(None))


def copy_json(value: T) -> T:
    return cast(T, _copied(value))


def _copied(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {k: _copied(v) for k, v in value.items()}
    if kind is list:
        return [_copied(v) for v in value]
    if kind in _IMMUTABLE:
        return value
    return copy.deepcopy(value)
