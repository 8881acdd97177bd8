"""A corpus of Kueue documents generated from upstream's CRD schemas: for every field path
upstream declares, one document that sets that field (with whatever it and its parents
require). Sent with strict field validation to upstream's CRDs and to kfed's, it shows
whether any manifest written for upstream, using any field, applies to kfed unchanged: the
behavioural side of the schema conformance test (tests/unit/api/test_api_conformance.py).

Values are the simplest the schema allows: an enum's first value, the default, the minimum,
a short string that matches the pattern. Cross-field rules (CEL) are not modelled: a document
upstream refuses is simply not part of the comparison, and the test reports how many were.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

Schema = dict[str, Any]
Path = tuple[str, ...]
ITEM, VALUE = "[]", "{}"
"""Path steps into a list's items and a map's values; the rest are property names."""

BASES: dict[str, dict[str, Any]] = {
    "AdmissionCheck": {"spec": {"controllerName": "example.com/controller"}},
    "ClusterQueue": {"spec": {}},
    "Cohort": {"spec": {}},
    "LocalQueue": {"spec": {"clusterQueue": "corpus-cq"}},
    "MultiKueueCluster": {
        "spec": {"clusterSource": {"kubeConfig": {"location": "s", "locationType": "Secret"}}}
    },
    "MultiKueueConfig": {"spec": {"clusters": ["corpus-worker"]}},
    "ProvisioningRequestConfig": {"spec": {"provisioningClassName": "example.com/class"}},
    "ResourceFlavor": {"spec": {}},
    "Topology": {"spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}},
    "WorkloadPriorityClass": {"value": 1},
    "Workload": {
        "spec": {
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                }
            ]
        }
    },
}
"""A valid object of each kind (what upstream requires, nothing more): each case's document
is merged over it, so a Workload case keeps a pod set with a container."""

_STRINGS = ("a", "a1", "example.com/a", "kueue.x-k8s.io/a", "A", "1", "a-b", "1m")
_TIME = "2026-01-01T00:00:00Z"


class NoValue(ValueError):
    """No value of ours fits this schema node (a pattern none of our strings match...)."""


@dataclass(frozen=True, slots=True)
class Case:
    path: Path
    document: dict[str, Any]
    """The top-level fields (spec, status, value...) without apiVersion, kind, metadata."""

    @property
    def name(self) -> str:
        return "".join(step if step in (ITEM, VALUE) else f".{step}" for step in self.path)


def leaf_paths(node: Schema, path: Path = ()) -> Iterator[Path]:
    """Every path that ends in a node with no sub-schema of its own."""
    nested = False
    for name, sub in (node.get("properties") or {}).items():
        nested = True
        yield from leaf_paths(sub, (*path, name))
    if isinstance(node.get("items"), dict):
        nested = True
        yield from leaf_paths(node["items"], (*path, ITEM))
    if isinstance(node.get("additionalProperties"), dict):
        nested = True
        yield from leaf_paths(node["additionalProperties"], (*path, VALUE))
    if not nested:
        yield path


def _string(node: Schema) -> str:
    if node.get("format") == "date-time":
        return _TIME
    low, high = node.get("minLength", 0), node.get("maxLength", 1 << 30)
    pattern = node.get("pattern")
    for candidate in _STRINGS:
        if not low <= len(candidate) <= high:
            continue
        if pattern is None or _matches(pattern, candidate):
            return candidate
    raise NoValue(f"no string fits pattern {pattern!r} and length {low}..{high}")


def _matches(pattern: str, text: str) -> bool:
    """Go's RE2 takes ``(?i)`` anywhere; Python only at the start."""
    flags = re.IGNORECASE if "(?i)" in pattern else 0
    return re.search(pattern.replace("(?i)", ""), text, flags) is not None


def _number(node: Schema) -> int:
    value = node.get("minimum", 1)
    if node.get("exclusiveMinimum") is True:
        value += 1
    if "maximum" in node and value > node["maximum"]:
        raise NoValue(f"minimum {value} above maximum {node['maximum']}")
    return int(value)


def minimal(node: Schema) -> Any:
    """The simplest value of ``node``: its required fields only, for objects."""
    if "default" in node:
        return copy.deepcopy(node["default"])
    if "enum" in node:
        return node["enum"][0]
    if node.get("x-kubernetes-int-or-string"):
        return "1" if "pattern" not in node or _matches(node["pattern"], "1") else 1
    kind = node.get("type")
    if kind == "string":
        return _string(node)
    if kind in ("integer", "number"):
        return _number(node)
    if kind == "boolean":
        return True
    if kind == "array":
        count = node.get("minItems", 0)
        if count > 1:
            raise NoValue(f"a list of at least {count} items")
        return [minimal(node["items"])] * count
    if isinstance(node.get("additionalProperties"), dict):
        return {}
    properties = node.get("properties") or {}
    return {name: minimal(properties[name]) for name in node.get("required", [])}


def setting(node: Schema, path: Path) -> Any:
    """The simplest value of ``node`` in which ``path`` is set."""
    if not path:
        return _set_leaf(node)
    step, rest = path[0], path[1:]
    if step == ITEM:
        if node.get("minItems", 0) > 1:
            raise NoValue(f"a list of at least {node['minItems']} items")
        return [setting(node["items"], rest)]
    if step == VALUE:
        return {"a": setting(node["additionalProperties"], rest)}
    value = minimal(node)
    value[step] = setting(node["properties"][step], rest)
    return value


def _set_leaf(node: Schema) -> Any:
    # Not the default: a field left at its default proves less (it may be the default's
    # doing that the document is accepted).
    plain = {k: v for k, v in node.items() if k != "default"}
    if plain.get("type") == "object" and not plain.get("properties"):
        return {}
    return minimal(plain)


def merged(base: Any, over: Any) -> Any:
    """``over`` on top of ``base``: objects key by key, lists item by item."""
    if isinstance(base, dict) and isinstance(over, dict):
        return {**base, **{k: merged(base[k], v) if k in base else v for k, v in over.items()}}
    if isinstance(base, list) and isinstance(over, list):
        return [merged(b, o) for b, o in zip(base, over, strict=False)] + over[len(base) :]
    return over


def cases(
    root: Schema, *, under: str, base: dict[str, Any] | None = None
) -> tuple[list[Case], dict[Path, str]]:
    """One case per leaf path below the top-level field ``under`` (``spec``, ``status``, or
    ``""`` for the other top-level fields but apiVersion, kind and metadata), each merged over
    ``base``; and the paths no document could be made for, with the reason."""
    made: list[Case] = []
    skipped: dict[Path, str] = {}
    for path in leaf_paths(root):
        top = path[0] if path else ""
        if (under and top != under) or (
            not under and top in ("apiVersion", "kind", "metadata", "status", "spec")
        ):
            continue
        try:
            document = setting(root, path)
        except NoValue as err:
            skipped[path] = str(err)
            continue
        for field in ("apiVersion", "kind", "metadata"):
            document.pop(field, None)
        made.append(Case(path, merged(copy.deepcopy(base or {}), document)))
    return made, skipped
