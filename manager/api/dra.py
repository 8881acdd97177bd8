"""Quota for Dynamic Resource Allocation: what a workload's device claims cost, by upstream
Kueue's rules (its KueueDRAIntegration, ``pkg/dra/claims.go``).

A pod asks for devices through ``spec.resourceClaims``; each entry naming a
ResourceClaimTemplate gets one ResourceClaim per pod, created from the template. Its
``spec.devices.requests[].exactly`` says how many devices (``count``, 1 when omitted) of
which DeviceClass. Quota is not kept per DeviceClass: a mapping with the shape of Kueue's
``resources.deviceClassMappings`` names the quota resource each class is charged to
(``example.com/gpu``), and the workload's pods then request that resource like any other.

Pure: objects in (pod sets, ResourceClaimTemplates, the mapping), a charge or a refusal
out. The job controller reads the templates once, when it creates the Workload, and records
the charge on it (``CHARGE_ANNOTATION``); the conversion to the admission core adds it to
the pod set's requests, so the core never sees DRA at all. See docs/dra.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]

CHARGE_ANNOTATION = "kfed.io/dra-charge"
"""On a Workload: per pod set, the quota resources one pod's device claims are charged to,
as JSON (``{"main": {"example.com/gpu": "2"}}``). Written once, when the Workload is created;
the admission core adds it to the pod set's requests, on the manager and on the worker that
gets the copy."""
REFUSED_ANNOTATION = "kfed.io/dra-charge-refused"
"""On a Workload: why its device claims cannot be charged (the Workload is created inactive,
with that reason in its QuotaReserved condition)."""

MAX_MAPPINGS = 16
MAX_CLASSES_PER_MAPPING = 8
"""Upstream's limits on ``deviceClassMappings`` (pkg/config/validation.go)."""

# Upstream's wording (pkg/controller/core/workload_controller.go, handleDRA), so that what
# people search for or alert on reads the same under kfed.
RESOURCE_CLAIMS_MESSAGE = "KueueDRAIntegration feature does not support use of resource claims"
RESOURCE_CLAIMS_REQUEUED_MESSAGE = "DRA resource claims not supported"

_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


# --- the mapping ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeviceClassMapping:
    """One entry of Kueue's ``resources.deviceClassMappings``."""

    name: str
    """The quota resource (as in a ClusterQueue's ``coveredResources``)."""
    device_class_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeviceClassMappings:
    mappings: tuple[DeviceClassMapping, ...] = ()

    def resource_for(self, device_class: str) -> str | None:
        for mapping in self.mappings:
            if device_class in mapping.device_class_names:
                return mapping.name
        return None

    def to_json(self) -> str:
        return json.dumps(
            [
                {"name": m.name, "deviceClassNames": list(m.device_class_names)}
                for m in self.mappings
            ]
        )


def _qualified_name_problem(value: str) -> str | None:
    """Why ``value`` is not a Kubernetes qualified name (a label key), or None."""
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return "its prefix must be a DNS subdomain (lower case, at most 253 characters)"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return (
            "must be 63 characters or fewer, of alphanumerics, '-', '_' or '.', starting and "
            "ending with an alphanumeric (with an optional DNS subdomain prefix and '/')"
        )
    return None


def parse_device_class_mappings(text: str) -> DeviceClassMappings:
    """The mapping from its JSON form, upstream's shape:
    ``[{"name": "example.com/gpu", "deviceClassNames": ["gpu.example.com"]}]``.
    Checked as upstream checks its Configuration; raises ValueError naming every problem."""
    if not text.strip():
        return DeviceClassMappings()
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"not JSON: {err.msg} at character {err.pos}") from None
    if not isinstance(raw, list):
        raise ValueError('must be a JSON list of {"name": ..., "deviceClassNames": [...]}')
    problems: list[str] = []
    if len(raw) > MAX_MAPPINGS:
        problems.append(f"at most {MAX_MAPPINGS} mappings, got {len(raw)}")
    mappings: list[DeviceClassMapping] = []
    resource_of: dict[str, str] = {}
    for i, entry in enumerate(raw):
        at = f"deviceClassMappings[{i}]"
        if not isinstance(entry, dict) or set(entry) - {"name", "deviceClassNames"}:
            problems.append(f'{at}: must be {{"name": ..., "deviceClassNames": [...]}}')
            continue
        name, classes = entry.get("name"), entry.get("deviceClassNames")
        if not isinstance(name, str) or not name:
            problems.append(f"{at}.name: required")
            continue
        if why := _qualified_name_problem(name):
            problems.append(f"{at}.name: {name!r} {why}")
        if any(m.name == name for m in mappings):
            problems.append(f"{at}.name: {name!r} is a duplicate")
        if not isinstance(classes, list) or not classes:
            problems.append(f"{at}.deviceClassNames: at least one device class name is required")
            continue
        if len(classes) > MAX_CLASSES_PER_MAPPING:
            problems.append(
                f"{at}.deviceClassNames: at most {MAX_CLASSES_PER_MAPPING}, got {len(classes)}"
            )
        seen: set[str] = set()
        for j, device_class in enumerate(classes):
            cat = f"{at}.deviceClassNames[{j}]"
            if not isinstance(device_class, str) or not device_class:
                problems.append(f"{cat}: must be a non-empty string")
                continue
            if why := _qualified_name_problem(device_class):
                problems.append(f"{cat}: {device_class!r} {why}")
            if device_class in seen:
                problems.append(f"{cat}: {device_class!r} is a duplicate")
            seen.add(device_class)
            earlier = resource_of.setdefault(device_class, name)
            if earlier != name:
                problems.append(f"{cat}: {device_class!r} is already mapped to resource {earlier}")
        mappings.append(DeviceClassMapping(name, tuple(c for c in classes if isinstance(c, str))))
    if problems:
        raise ValueError("; ".join(problems))
    return DeviceClassMappings(tuple(mappings))


# --- what a workload's claims cost ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Charge:
    """Per pod set (by name), the quota one pod's device claims take. Empty: no claims."""

    per_pod: Mapping[str, Mapping[str, int]]

    def annotation(self) -> str:
        return json.dumps(
            {ps: {r: str(v) for r, v in sorted(res.items())} for ps, res in self.per_pod.items()},
            sort_keys=True,
        )


@dataclass(frozen=True, slots=True)
class Refused:
    """The claims cannot be charged: the workload must not be admitted (upstream keeps it
    pending as Inadmissible with these messages)."""

    message: str
    """For the QuotaReserved=False condition."""
    requeued_message: str
    """For the Requeued=False condition."""


@dataclass(frozen=True, slots=True)
class TemplateMissing:
    """A referenced ResourceClaimTemplate does not exist (yet): ask again later."""

    name: str
    message: str


def _claims(pod_set: Mapping[str, Any]) -> list[Obj]:
    spec = (pod_set.get("template") or {}).get("spec") or {}
    return [c for c in spec.get("resourceClaims") or [] if isinstance(c, dict)]


def template_names(pod_sets: Iterable[Mapping[str, Any]]) -> list[str]:
    """The ResourceClaimTemplates the pod sets reference, each once, in order."""
    names: list[str] = []
    for ps in pod_sets:
        for claim in _claims(ps):
            name = claim.get("resourceClaimTemplateName")
            if name and name not in names:
                names.append(str(name))
    return names


def has_claims(pod_sets: Iterable[Mapping[str, Any]]) -> bool:
    return any(_claims(ps) for ps in pod_sets)


def _field_error(path: str, kind: str, bad_value: object, detail: str = "") -> str:
    """A Kubernetes field error as Go's ``field.Error.Error()`` renders it:
    ``path: Invalid value: "All": detail``."""
    message = f"{path}: {kind}: {json.dumps(bad_value)}"
    return f"{message}: {detail}" if detail else message


class _Unsupported(Exception):
    def __init__(self, path: str, bad_value: object, detail: str) -> None:
        super().__init__(detail)
        self.path, self.bad_value, self.detail = path, bad_value, detail


def devices_per_class(template: Mapping[str, Any]) -> dict[str, int]:
    """Devices one claim made from ``template`` asks for, per DeviceClass. Raises
    _Unsupported for what upstream refuses to charge: ``firstAvailable``, a request without
    ``exactly``, ``allocationMode: All`` (or a mode it does not know). ``adminAccess``
    requests are free (they observe devices others hold); ``selectors`` narrow the devices
    but not their number, so they count as written."""
    claim_spec = (template.get("spec") or {}).get("spec") or {}
    out: dict[str, int] = {}
    for i, request in enumerate((claim_spec.get("devices") or {}).get("requests") or []):
        at = f"devices.requests[{i}]"
        if request.get("firstAvailable") is not None:
            raise _Unsupported(at, None, "FirstAvailable device selection is not supported")
        exactly = request.get("exactly")
        if exactly is None:
            raise _Unsupported(at, None, "Exactly must be set if FirstAvailable is nil")
        if exactly.get("adminAccess"):
            continue
        mode = exactly.get("allocationMode") or "ExactCount"
        if mode == "All":
            raise _Unsupported(
                f"{at}.exactly.allocationMode", "All", "AllocationMode 'All' is not supported"
            )
        if mode != "ExactCount":
            raise _Unsupported(
                f"{at}.exactly.allocationMode", mode, f"unsupported allocation mode: {mode}"
            )
        device_class = exactly.get("deviceClassName") or ""
        if not device_class:
            continue
        count = exactly.get("count")
        out[device_class] = out.get(device_class, 0) + (1 if count is None else int(count))
    return out


def charge(
    pod_sets: Sequence[Mapping[str, Any]],
    templates: Mapping[str, Mapping[str, Any]],
    mappings: DeviceClassMappings,
) -> Charge | Refused | TemplateMissing:
    """What one pod of each pod set is charged for its device claims, from the Workload's
    pod sets (``spec.podSets``), the namespace's ResourceClaimTemplates by name (the ones
    ``template_names`` lists; a missing one is absent) and the mapping. As upstream: a
    claim naming a ResourceClaim directly is refused (a shared claim is not the pod's to
    pay for), and so is a DeviceClass the mapping does not name; the first problem found
    is the one reported, with upstream's field path and words."""
    for i, ps in enumerate(pod_sets):
        for j, claim in enumerate(_claims(ps)):
            if claim.get("resourceClaimName"):
                return Refused(
                    f"{RESOURCE_CLAIMS_MESSAGE}: spec.podSets[{i}].template.spec."
                    f"resourceClaims[{j}] names ResourceClaim {claim['resourceClaimName']} "
                    "(resourceClaimName); only claims made from a resourceClaimTemplateName "
                    "can be charged to quota",
                    RESOURCE_CLAIMS_REQUEUED_MESSAGE,
                )
    per_pod: dict[str, dict[str, int]] = {}
    for i, ps in enumerate(pod_sets):
        name = str(ps.get("name", "main"))
        aggregated: dict[str, int] = {}
        for j, claim in enumerate(_claims(ps)):
            template_name = claim.get("resourceClaimTemplateName")
            if not template_name:
                continue
            at = f"spec.podSets[{i}].template.spec.resourceClaims[{j}]"
            template = templates.get(template_name)
            if template is None:
                detail = (
                    f"failed to get claim spec for ResourceClaimTemplate {template_name} in "
                    f'podset {name}: resourceclaimtemplates.resource.k8s.io "{template_name}" '
                    "not found"
                )
                return TemplateMissing(template_name, f"{at}: Internal error: {detail}")
            try:
                counts = devices_per_class(template)
            except _Unsupported as err:
                message = _field_error(
                    f"{at}.{err.path}",
                    "Invalid value",
                    err.bad_value,
                    f"ResourceClaimTemplate {template_name}: {err.detail}",
                )
                return Refused(message, message)
            for device_class in sorted(counts):
                resource = mappings.resource_for(device_class)
                if resource is None:
                    message = _field_error(
                        f"{at}.resourceClaimTemplateName",
                        "Not found",
                        f"DeviceClass {device_class} is not mapped in DRA configuration for "
                        f"podset {name}",
                    )
                    return Refused(message, message)
                aggregated[resource] = aggregated.get(resource, 0) + counts[device_class]
        if aggregated:
            per_pod[name] = aggregated
    return Charge(per_pod)


def recorded_charge(annotations: Mapping[str, str] | None) -> dict[str, dict[str, str]]:
    """The charge a Workload carries (``CHARGE_ANNOTATION``), per pod set; quantities as
    written. Empty when it has none; a value that is not the JSON kfed writes raises
    ValueError."""
    text = (annotations or {}).get(CHARGE_ANNOTATION)
    if not text:
        return {}
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"annotation {CHARGE_ANNOTATION} is not JSON: {err.msg}") from None
    if not isinstance(raw, dict) or not all(
        isinstance(v, dict) and all(isinstance(q, str | int) for q in v.values())
        for v in raw.values()
    ):
        raise ValueError(
            f'annotation {CHARGE_ANNOTATION} must map pod sets to {{"resource": "quantity"}}'
        )
    return {str(ps): {str(r): str(q) for r, q in res.items()} for ps, res in raw.items()}
