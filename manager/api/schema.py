"""Kubernetes-only OpenAPI keywords, attached to pydantic models where they are declared.

The CRDs are generated from the models (``crdgen``), so everything a CRD schema needs
beyond what pydantic already knows (list semantics for server-side apply, CEL rules,
integer formats, pass-through subtrees) is written next to the field it belongs to:

- ``K8s(...)`` in ``Annotated[...]`` metadata adds keywords to one field's schema;
- ``model_extra(...)`` in a model's ``json_schema_extra`` adds them to a whole object.

Pydantic ignores these when validating; only the JSON schema (and thus the CRD) sees them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, GetJsonSchemaHandler
from pydantic_core import CoreSchema

ListType = Literal["atomic", "set", "map"]
MapType = Literal["atomic", "granular"]

# RFC 1123 names, as Kubernetes validates object names (a DNS subdomain) and labels.
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


@dataclass(frozen=True, slots=True)
class Rule:
    """One ``x-kubernetes-validations`` entry: a CEL rule the apiserver enforces.

    ``field_path`` (relative to the object the rule sits on) makes the apiserver's error
    name the offending field instead of the object that carries the rule.
    """

    rule: str
    message: str
    field_path: str | None = None

    def to_schema(self) -> dict[str, str]:
        out = {"rule": self.rule, "message": self.message}
        if self.field_path is not None:
            out["fieldPath"] = self.field_path
        return out


OPTIONAL_IN_SCHEMA = "x-kfed-optional-in-schema"
"""Marks a field the CRD generator leaves out of its parent's ``required`` (then drops)."""


@dataclass(frozen=True, slots=True)
class K8s:
    """Kubernetes schema keywords for one field, used as ``Annotated`` metadata."""

    list_type: ListType | None = None
    list_map_keys: tuple[str, ...] = ()
    map_type: MapType | None = None
    format: str | None = None
    rules: tuple[Rule, ...] = ()
    preserve_unknown_fields: bool = False
    optional_in_schema: bool = False
    """The CRD does not require the field although the model does: upstream's schema does
    not, and what upstream accepts kfed's API must accept too. Controllers then treat an
    object without it as not usable, with the reason (the model refuses it)."""

    def keywords(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.list_type is not None:
            out["x-kubernetes-list-type"] = self.list_type
        if self.list_map_keys:
            out["x-kubernetes-list-map-keys"] = list(self.list_map_keys)
        if self.map_type is not None:
            out["x-kubernetes-map-type"] = self.map_type
        if self.format is not None:
            out["format"] = self.format
        if self.rules:
            out["x-kubernetes-validations"] = [r.to_schema() for r in self.rules]
        if self.preserve_unknown_fields:
            out["x-kubernetes-preserve-unknown-fields"] = True
        if self.optional_in_schema:
            out[OPTIONAL_IN_SCHEMA] = True
        return out

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        # Keywords sit beside a possible $ref; crdgen merges them into the inlined target,
        # so a shared definition is never modified for every other user of it.
        return {**handler(schema), **self.keywords()}


def model_extra(*rules: Rule, preserve_unknown_fields: bool = False) -> dict[str, Any]:
    """``json_schema_extra`` for a model: CEL rules on the object, or pass-through."""
    return K8s(rules=rules, preserve_unknown_fields=preserve_unknown_fields).keywords()


def object_default() -> dict[str, Any]:
    """``json_schema_extra`` for a sub-object field that the apiserver defaults to ``{}``.

    Kueue defaults e.g. ``spec.preemption`` to ``{}`` so that the defaults of its own
    fields apply even when the user omits the whole object.
    """
    return {"default": {}}


def _int64(value: int) -> int:
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"{value} does not fit in an int64")
    return value


# The apiserver does not enforce a schema's int32 format by itself, and an out-of-range
# value would make the object unreadable for Kueue and kfed alike: hence explicit bounds.
# (Larger-than-int64 numbers already fail the apiserver's JSON decoding.)
Int32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1), K8s(format="int32")]
"""A Go int32 on the wire."""

Int64 = Annotated[int, AfterValidator(_int64), K8s(format="int64")]
"""A Go int64 on the wire."""

NonNegativeInt32 = Annotated[int, Field(ge=0, le=2**31 - 1), K8s(format="int32")]
"""A Go int32 that Kueue declares with ``Minimum=0``."""

DNSSubdomain = Annotated[str, Field(max_length=253, pattern=DNS1123_SUBDOMAIN)]
"""A reference to a cluster-scoped object by name (ClusterQueue, flavor, cohort...)."""

PodSetName = Annotated[str, Field(max_length=63, pattern=DNS1123_LABEL)]
"""A pod set name, an RFC 1123 label."""

ResourceName = Annotated[str, Field(max_length=317)]
"""A resource name such as ``cpu`` or ``nvidia.com/gpu`` (prefix + '/' + name).

The bound lets the apiserver estimate the cost of CEL rules that compare names.
"""
