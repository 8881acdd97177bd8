"""What a workload asks of a worker's devices (pure): per pod set, what ONE pod's claims
request (a DeviceClass, a count and the request's own CEL selectors), read from the pod
sets' ResourceClaimTemplates, and how many pods."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from manager.api import dracel
from manager.api.view import at


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    where: str
    """``<template>/<request>``, for messages."""
    device_class: str
    count: int
    selectors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PodSetNeed:
    name: str
    pods: int
    requests: tuple[DeviceRequest, ...]
    """What ONE pod of the pod set asks for, every claim of it together."""


@dataclass(frozen=True, slots=True)
class Need:
    pod_sets: tuple[PodSetNeed, ...] = ()

    def __bool__(self) -> bool:
        return any(r.count for ps in self.pod_sets for r in ps.requests)


def template_requests(name: str, template: Mapping[str, Any]) -> list[DeviceRequest]:
    """The device requests of one claim made from ``template`` (``adminAccess`` requests
    take nothing; ``firstAvailable`` and ``allocationMode: All`` are refused by the charge
    before any placement, so they are not modelled)."""
    out: list[DeviceRequest] = []
    for request in at(template, "spec", "spec", "devices").get("requests") or []:
        exactly = request.get("exactly")
        if not exactly or exactly.get("adminAccess"):
            continue
        if (exactly.get("allocationMode") or "ExactCount") != "ExactCount":
            continue
        count = exactly.get("count")
        out.append(
            DeviceRequest(
                f"{name}/{request.get('name', '')}",
                str(exactly.get("deviceClassName", "")),
                1 if count is None else int(count),
                dracel.selector_expressions(exactly.get("selectors")),
            )
        )
    return out


def need_of(
    pod_sets: Sequence[Mapping[str, Any]],
    templates: Mapping[str, Mapping[str, Any]],
    pods: Mapping[str, int] | None = None,
) -> Need:
    """Per pod set, what one pod asks for (every ``resourceClaimTemplateName`` entry of its
    pod spec, each a claim of its own), and how many pods (``pods`` by pod set name, e.g. the
    admitted counts; else the pod set's ``count``). A template absent from ``templates``
    contributes nothing (the caller reads them; a missing one already kept the workload from
    being created)."""
    out: list[PodSetNeed] = []
    for ps in pod_sets:
        name = str(ps.get("name", "main"))
        spec = at(ps, "template", "spec")
        requests: list[DeviceRequest] = []
        for claim in spec.get("resourceClaims") or []:
            template_name = claim.get("resourceClaimTemplateName")
            template = templates.get(str(template_name)) if template_name else None
            if template is not None:
                requests.extend(template_requests(str(template_name), template))
        count = (pods or {}).get(name, int(ps.get("count", 1) or 0))
        out.append(PodSetNeed(name, count, tuple(requests)))
    return Need(tuple(out))
