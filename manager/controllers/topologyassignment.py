"""A topology assignment as the v1beta2 Workload status spells it, and back.

Upstream writes one slice holding every domain, shortened where it can: a level whose
domains all have one value gets ``universal``; otherwise ``individual`` roots with the
longest common prefix and suffix taken out; pod counts are ``universal`` when all equal
(``singleCompactSliceEncoding`` in upstream's ``pkg/util/tas``). Reading accepts any number
of slices, as upstream does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from manager import core


def to_status(assignment: core.TopologyAssignment) -> dict[str, Any]:
    domains = assignment.domains
    if not domains:
        return {"levels": list(assignment.levels), "slices": []}
    counts = [d.count for d in domains]
    pod_counts: dict[str, Any] = (
        {"universal": counts[0]} if len(set(counts)) == 1 else {"individual": counts}
    )
    return {
        "levels": list(assignment.levels),
        "slices": [
            {
                "domainCount": len(domains),
                "podCounts": pod_counts,
                "valuesPerLevel": [
                    _compact([d.values[i] for d in domains]) for i in range(len(assignment.levels))
                ],
            }
        ],
    }


def _compact(values: Sequence[str]) -> dict[str, Any]:
    first = values[0]
    if all(v == first for v in values):
        return {"universal": first}
    prefix, suffix = first, first
    for value in values[1:]:
        prefix = _common_prefix(prefix, value)
        suffix = _common_prefix(suffix[::-1], value[::-1])[::-1]
    shortest = min(len(v) for v in values)
    if len(prefix) + len(suffix) > shortest:  # they must not overlap ("ababa", "aba")
        prefix = prefix[: shortest - len(suffix)]
    individual: dict[str, Any] = {}
    if prefix:
        individual["prefix"] = prefix
    if suffix:
        individual["suffix"] = suffix
    individual["roots"] = [v[len(prefix) : len(v) - len(suffix)] for v in values]
    return {"individual": individual}


def _common_prefix(a: str, b: str) -> str:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return a[:n]


def from_status(raw: Mapping[str, Any]) -> core.TopologyAssignment:
    """The assignment a status holds; ValueError if it is not well formed."""
    levels = tuple(str(level) for level in raw.get("levels") or ())
    domains: list[core.DomainAssignment] = []
    for piece in raw.get("slices") or ():
        count = int(piece["domainCount"])
        per_level = piece.get("valuesPerLevel") or []
        if len(per_level) != len(levels):
            raise ValueError("valuesPerLevel must have one entry per level")
        pods = piece.get("podCounts") or {}
        for i in range(count):
            values = tuple(_value_at(level, i) for level in per_level)
            n = pods["universal"] if "universal" in pods else pods["individual"][i]
            domains.append(core.DomainAssignment(values, int(n)))
    return core.TopologyAssignment(levels, tuple(domains))


def _value_at(level: Mapping[str, Any], i: int) -> str:
    if level.get("universal") is not None:
        return str(level["universal"])
    individual = level["individual"]
    return (
        f"{individual.get('prefix') or ''}{individual['roots'][i]}{individual.get('suffix') or ''}"
    )
