"""Upstream Kueue's external frameworks as its configuration names them: the kinds whose
Workloads their own controller makes (``integrations.externalFrameworks``: a list of names)
and those MultiKueue federates with its generic adapter (``multiKueue.externalFrameworks``: a
list of ``{name: ...}``). Each name is ``Kind.version.group`` (``PipelineRun.v1.tekton.dev``):
the kind up to the first dot, the version up to the second, the group the rest, as upstream's
``schema.ParseKindArg`` reads it.

Checked as upstream's ``pkg/config/validation.go`` checks them: each name well formed, none
twice in its list, none the kind of a built-in integration (the caller says which those are:
``jobkinds/external.built_in``). The federation's adapter for such a kind is
``controllers/jobkinds/external.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    ValidationError,
    ValidationInfo,
    model_validator,
)


@dataclass(frozen=True, slots=True)
class GroupVersionKind:
    group: str
    version: str
    kind: str

    @property
    def name(self) -> str:
        """As upstream's configuration names it: ``Kind.version.group``."""
        return f"{self.kind}.{self.version}.{self.group}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


BuiltIn = Mapping[GroupVersionKind, str]
"""The kinds of the built-in integrations, each with its integration name."""


def parse_gvk(text: str) -> GroupVersionKind:
    """``Kind.version.group``; a ValueError says what is wrong. Unlike upstream, each part
    must be there: a custom resource always has a kind, a version and a group."""
    parts = text.split(".", 2)
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"{text!r} is not Kind.version.group (e.g. Widget.v1.example.com)")
    kind, version, group = parts
    if not kind[0].isupper():
        raise ValueError(f"{text!r}: a kind starts with a capital letter (Kind.version.group)")
    return GroupVersionKind(group, version, kind)


def _gvk_name(text: str) -> str:
    parse_gvk(text)
    return text


GvkName = Annotated[str, AfterValidator(_gvk_name)]


class MultiKueueExternalFramework(BaseModel):
    """One entry of ``multiKueue.externalFrameworks`` (upstream's
    ``MultiKueueExternalFramework``: its only field is ``name``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: GvkName


class ExternalFrameworks(BaseModel):
    """Both lists, checked (validation context ``built_in``: the built-in kinds)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    integrations: tuple[GvkName, ...] = ()
    multikueue: tuple[MultiKueueExternalFramework, ...] = ()

    @model_validator(mode="after")
    def _each_once_and_not_built_in(self, info: ValidationInfo) -> ExternalFrameworks:
        built_in: BuiltIn = (info.context or {}).get("built_in") or {}
        _distinct(PATHS["integrations"], self.integrations, built_in)
        _distinct(PATHS["multikueue"], [f.name for f in self.multikueue], built_in)
        return self

    @property
    def federated(self) -> tuple[str, ...]:
        """The names of ``multiKueue.externalFrameworks``."""
        return tuple(f.name for f in self.multikueue)


PATHS = {
    "integrations": "integrations.externalFrameworks",
    "multikueue": "multiKueue.externalFrameworks",
}


def _distinct(path: str, names: Iterable[str], built_in: BuiltIn) -> None:
    seen: set[GroupVersionKind] = set()
    for index, name in enumerate(names):
        gvk = parse_gvk(name)
        if gvk in seen:
            raise ValueError(f"{path}[{index}]: {name!r} is there twice")
        seen.add(gvk)
        if gvk in built_in:
            raise ValueError(
                f"{path}[{index}]: {name!r} is the built-in integration {built_in[gvk]}: "
                "kfed federates it with its own adapter"
            )


def check(
    integrations: object = (), multikueue: object = (), *, built_in: BuiltIn | None = None
) -> ExternalFrameworks:
    """The two lists checked; a ValueError with one line per problem, each led by where it
    is (``multiKueue.externalFrameworks[1].name``)."""
    try:
        return ExternalFrameworks.model_validate(
            {"integrations": integrations, "multikueue": multikueue},
            context={"built_in": built_in or {}},
        )
    except ValidationError as err:
        raise ValueError("; ".join(_where(e) for e in err.errors())) from None


def _where(error: Mapping[str, Any]) -> str:
    loc = [str(p) for p in error.get("loc", ())]
    message = str(error.get("msg", "")).removeprefix("Value error, ")
    if not loc:
        return message
    path = PATHS.get(loc[0], loc[0]) + "".join(
        f"[{p}]" if p.isdigit() else f".{p}" for p in loc[1:]
    )
    return f"{path}: {message}"


def names_flag(text: str) -> tuple[str, ...]:
    """``--multikueue-external-frameworks``: comma-separated ``Kind.version.group`` names,
    each well formed and given once (the manager refuses a built-in kind when it starts)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    return check(multikueue=[{"name": n} for n in names]).federated
