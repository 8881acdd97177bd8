"""The device claims of a workload's pod sets (pure): the ResourceClaimTemplates they name,
what one claim made from a template asks for per DeviceClass (refusing, with upstream's
field path and words, what upstream does not charge), and whether a charge may need the
DeviceClasses and ResourceSlices (api/dra.py charges with these)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from manager.api import draextended, view
from manager.api.dramappings import DeviceClassMappings

Obj = dict[str, Any]


def claims_of(pod_set: Mapping[str, Any]) -> list[Obj]:
    claims = view.items(pod_set, "template", "spec", "resourceClaims")
    return [c for c in claims if isinstance(c, dict)]


def template_names(pod_sets: Iterable[Mapping[str, Any]]) -> list[str]:
    """The ResourceClaimTemplates the pod sets reference, each once, in order."""
    names: list[str] = []
    for ps in pod_sets:
        for claim in claims_of(ps):
            name = claim.get("resourceClaimTemplateName")
            if name and name not in names:
                names.append(str(name))
    return names


def has_claims(pod_sets: Iterable[Mapping[str, Any]]) -> bool:
    return any(claims_of(ps) for ps in pod_sets)


def field_error(path: str, kind: str, bad_value: object, detail: str = "") -> str:
    """A Kubernetes field error as Go's ``field.Error.Error()`` renders it:
    ``path: Invalid value: "All": detail``."""
    message = f"{path}: {kind}: {json.dumps(bad_value)}"
    return f"{message}: {detail}" if detail else message


class Unsupported(Exception):
    def __init__(self, path: str, bad_value: object, detail: str) -> None:
        super().__init__(detail)
        self.path, self.bad_value, self.detail = path, bad_value, detail


def devices_per_class(template: Mapping[str, Any]) -> dict[str, int]:
    """Devices one claim made from ``template`` asks for, per DeviceClass. Raises
    Unsupported for what upstream refuses to charge: ``firstAvailable``, a request without
    ``exactly``, ``allocationMode: All`` (or a mode it does not know). ``adminAccess``
    requests are free (they observe devices others hold); ``selectors`` narrow the devices
    but not their number, so they count as written."""
    out: dict[str, int] = {}
    for i, request in enumerate(view.items(template, "spec", "spec", "devices", "requests")):
        at = f"devices.requests[{i}]"
        if request.get("firstAvailable") is not None:
            raise Unsupported(at, None, "FirstAvailable device selection is not supported")
        exactly = request.get("exactly")
        if exactly is None:
            raise Unsupported(at, None, "Exactly must be set if FirstAvailable is nil")
        if exactly.get("adminAccess"):
            continue
        mode = exactly.get("allocationMode") or "ExactCount"
        if mode == "All":
            raise Unsupported(
                f"{at}.exactly.allocationMode", "All", "AllocationMode 'All' is not supported"
            )
        if mode != "ExactCount":
            raise Unsupported(
                f"{at}.exactly.allocationMode", mode, f"unsupported allocation mode: {mode}"
            )
        device_class = exactly.get("deviceClassName") or ""
        if not device_class:
            continue
        count = exactly.get("count")
        out[device_class] = out.get(device_class, 0) + (1 if count is None else int(count))
    return out


def needs_catalogue(pod_sets: Sequence[Mapping[str, Any]], mappings: DeviceClassMappings) -> bool:
    """Whether a charge of these pod sets may read DeviceClasses or ResourceSlices: some
    container asks for an extended resource (a DeviceClass may serve it), or a mapping counts
    partitions by a counter and the pods claim devices."""
    if mappings.counter_based and has_claims(pod_sets):
        return True
    return any(draextended.pod_requests(ps, i) for i, ps in enumerate(pod_sets))
