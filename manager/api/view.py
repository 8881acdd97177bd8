"""Read-only typed views of Kubernetes objects as the API hands them over: JSON dicts.

Controllers and the CLI read objects straight from informers and list calls. Parsing each
into its pydantic model costs far more than reading the two fields they need (a Workload
parse takes some 60 µs, a read through :func:`at` about 1 µs, and the informers see
thousands of objects), so they read through these instead. This is the
one place that says what an absent section means and what a malformed one does:

- absent, null or empty: an empty (read-only) mapping or sequence, as ``.get(k) or {}``
  always did;
- a section of the wrong type (``spec: "x"``): :class:`MalformedObject`, a ``ValueError``
  naming the object and the field, rather than an ``AttributeError`` deep in a controller.
  The controllers' worker loop logs it and backs the key off; nothing crashes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

Obj = Mapping[str, Any]

EMPTY: Mapping[str, Any] = MappingProxyType({})
"""The empty section; read-only, so that no caller can fill in a mapping others share."""

_NO_ITEMS: tuple[Any, ...] = ()


class MalformedObject(ValueError):
    """A section of an object is not of the type the API gives it."""

    def __init__(self, obj: Obj, path: tuple[str, ...], value: object, wanted: str) -> None:
        self.path = path
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else EMPTY
        kind = obj.get("kind") or "object"
        where = "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p)
        super().__init__(
            f"{kind} {where or '(unnamed)'}: {'.'.join(path)} is not {wanted} "
            f"(got {type(value).__name__})"
        )


def at(obj: Obj | None, *path: str) -> Mapping[str, Any]:
    """The mapping at ``path`` inside ``obj`` (``at(job, "spec", "template")``): empty where
    any step is absent, null or empty; :class:`MalformedObject` where one is not a mapping."""
    if not obj:
        return EMPTY
    current: Obj = obj
    for key in path:
        value = current.get(key)
        if not value:
            return EMPTY
        # ``type() is dict`` first: JSON gives dicts, and the ABC check costs ten times more.
        if type(value) is not dict and not isinstance(value, Mapping):
            raise _malformed(obj, path, "an object")
        current = value
    return current


def _malformed(obj: Obj, path: tuple[str, ...], wanted: str) -> MalformedObject:
    """The error for the first step of ``path`` that is not a mapping (found again here, off
    the fast path)."""
    current: Any = obj
    for depth, key in enumerate(path):
        current = current.get(key)
        if not isinstance(current, Mapping):
            return MalformedObject(obj, path[: depth + 1], current, wanted)
    return MalformedObject(obj, path, current, wanted)


def items(obj: Obj | None, *path: str) -> Sequence[Any]:
    """The list at ``path`` inside ``obj`` (``items(wl, "spec", "podSets")``): empty where
    absent, null or empty; :class:`MalformedObject` where it or a step is of another type."""
    if not path:
        raise TypeError("items() needs the path of a list")
    value = at(obj, *path[:-1]).get(path[-1])
    if not value:
        return _NO_ITEMS
    if type(value) is not list and not isinstance(value, tuple):
        raise MalformedObject(obj or EMPTY, path, value, "a list")
    return value


class ObjectView:
    """One object's well-known fields, typed: ``ObjectView(job).labels.get(...)``.

    A view holds only the dict, and reads on each access: it is as cheap to make as a
    tuple, and it never goes stale when an informer replaces the object's sections.
    """

    __slots__ = ("obj",)

    def __init__(self, obj: Obj) -> None:
        self.obj = obj

    @property
    def metadata(self) -> Mapping[str, Any]:
        return at(self.obj, "metadata")

    @property
    def spec(self) -> Mapping[str, Any]:
        return at(self.obj, "spec")

    @property
    def status(self) -> Mapping[str, Any]:
        return at(self.obj, "status")

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind") or "")

    @property
    def name(self) -> str:
        return str(self.metadata.get("name") or "")

    @property
    def namespace(self) -> str:
        return str(self.metadata.get("namespace") or "")

    @property
    def uid(self) -> str:
        return str(self.metadata.get("uid") or "")

    @property
    def labels(self) -> Mapping[str, str]:
        return at(self.obj, "metadata", "labels")

    @property
    def annotations(self) -> Mapping[str, str]:
        return at(self.obj, "metadata", "annotations")

    @property
    def owner_references(self) -> Sequence[Mapping[str, Any]]:
        return items(self.obj, "metadata", "ownerReferences")

    @property
    def conditions(self) -> Sequence[Mapping[str, Any]]:
        return items(self.obj, "status", "conditions")


def labels_of(obj: Obj | None) -> Mapping[str, str]:
    """``metadata.labels``; empty where there are none."""
    return at(obj, "metadata", "labels")


def annotations_of(obj: Obj | None) -> Mapping[str, str]:
    """``metadata.annotations``; empty where there are none."""
    return at(obj, "metadata", "annotations")
