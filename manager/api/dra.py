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

The claims of the pod sets are read in draclaims.py; what a Workload records of the charge
is draannotations.py's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from manager.api import dracel, dracounters, draextended, view
from manager.api.draclaims import Unsupported, claims_of, devices_per_class, field_error

# The mapping travels with every charge: callers keep naming it ``dra.DeviceClassMappings``.
from manager.api.dramappings import DeviceClassMapping as DeviceClassMapping
from manager.api.dramappings import DeviceClassMappings as DeviceClassMappings
from manager.api.dramappings import parse_device_class_mappings as parse_device_class_mappings

Obj = dict[str, Any]

# Upstream's wording (pkg/controller/core/workload_controller.go, handleDRA), so that what
# people search for or alert on reads the same under kfed.
RESOURCE_CLAIMS_MESSAGE = "KueueDRAIntegration feature does not support use of resource claims"
RESOURCE_CLAIMS_REQUEUED_MESSAGE = "DRA resource claims not supported"

# --- what a workload's claims cost ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Charge:
    """Per pod set (by name), the quota one pod's device claims take (and its extended
    resources served by DRA devices). Empty: nothing to charge."""

    per_pod: Mapping[str, Mapping[str, int]]
    replaced: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Per pod set, the extended resources (``nvidia.com/gpu``) DRA devices serve: taken out
    of its requests, since ``per_pod`` charges them (``draextended``)."""

    def annotation(self) -> str:
        return json.dumps(
            {ps: {r: str(v) for r, v in sorted(res.items())} for ps, res in self.per_pod.items()},
            sort_keys=True,
        )

    def replaced_annotation(self) -> str:
        return json.dumps(
            {ps: sorted(names) for ps, names in self.replaced.items()}, sort_keys=True
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


@dataclass(frozen=True, slots=True)
class DevicesUnknown:
    """A counter charge cannot be told from the devices known now (none published yet that
    match, a DeviceClass not there yet): ask again later, as upstream retries."""

    message: str


@dataclass(frozen=True, slots=True)
class DeviceCatalogue:
    """The DRA objects a charge reads besides the templates: DeviceClasses by name (which
    serve an extended resource; their selectors) and ResourceSlices (what partitions
    consume). On the manager, those of its workers; on a worker, its own."""

    classes: Mapping[str, Obj] = field(default_factory=dict)
    slices: Sequence[Obj] = ()


def _add(into: dict[str, int], resource: str, amount: int) -> None:
    into[resource] = into.get(resource, 0) + amount


def charge(
    pod_sets: Sequence[Mapping[str, Any]],
    templates: Mapping[str, Mapping[str, Any]],
    mappings: DeviceClassMappings,
    catalogue: DeviceCatalogue | None = None,
) -> Charge | Refused | TemplateMissing | DevicesUnknown:
    """What one pod of each pod set is charged for its devices, from the Workload's pod sets
    (``spec.podSets``), the namespace's ResourceClaimTemplates by name (the ones
    ``template_names`` lists; a missing one is absent), the mapping and, for extended
    resources and counters, the DeviceClasses and ResourceSlices (``catalogue``; None: none
    known, so no extended resource is DRA-served). Upstream's steps, in its order:

    1. a claim naming a ResourceClaim directly is refused (a shared claim is not the pod's to
       pay for);
    2. each template's devices counted per DeviceClass and mapped (an unmapped class is
       refused), except classes a mapping charges by counters;
    3. extended resources a DeviceClass serves, replaced by that class's resource
       (``draextended``);
    4. requests of counter-charged classes, by the counters their devices consume
       (``dracounters``).

    The first problem found is the one reported, with upstream's field path and words."""
    for i, ps in enumerate(pod_sets):
        for j, claim in enumerate(claims_of(ps)):
            if claim.get("resourceClaimName"):
                return Refused(
                    f"{RESOURCE_CLAIMS_MESSAGE}: spec.podSets[{i}].template.spec."
                    f"resourceClaims[{j}] names ResourceClaim {claim['resourceClaimName']} "
                    "(resourceClaimName); only claims made from a resourceClaimTemplateName "
                    "can be charged to quota",
                    RESOURCE_CLAIMS_REQUEUED_MESSAGE,
                )
    catalogue = catalogue or DeviceCatalogue()
    per_pod: dict[str, dict[str, int]] = {}
    for i, ps in enumerate(pod_sets):
        counted = _counted_by_number(i, ps, templates, mappings)
        if not isinstance(counted, dict):
            return counted
        if counted:
            per_pod[str(ps.get("name", "main"))] = counted
    replaced: dict[str, tuple[str, ...]] = {}
    for i, ps in enumerate(pod_sets):
        name = str(ps.get("name", "main"))
        served = _extended(i, ps, catalogue, mappings)
        if isinstance(served, Refused):
            return served
        for quota_key, amount in served.values():
            _add(per_pod.setdefault(name, {}), quota_key, amount)
        if served:
            replaced[name] = tuple(sorted(served))
    for i, ps in enumerate(pod_sets):
        by_counter = _counted_by_counters(i, ps, templates, mappings, catalogue)
        if not isinstance(by_counter, dict):
            return by_counter
        name = str(ps.get("name", "main"))
        for resource, amount in by_counter.items():
            _add(per_pod.setdefault(name, {}), resource, amount)
    return Charge(per_pod, replaced)


def _counted_by_number(
    i: int,
    ps: Mapping[str, Any],
    templates: Mapping[str, Mapping[str, Any]],
    mappings: DeviceClassMappings,
) -> dict[str, int] | Refused | TemplateMissing:
    """Step 2 for pod set ``i``: its templates' devices, by number, per quota resource."""
    name = str(ps.get("name", "main"))
    aggregated: dict[str, int] = {}
    for j, claim in enumerate(claims_of(ps)):
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
        except Unsupported as err:
            message = field_error(
                f"{at}.{err.path}",
                "Invalid value",
                err.bad_value,
                f"ResourceClaimTemplate {template_name}: {err.detail}",
            )
            return Refused(message, message)
        for device_class in sorted(counts):
            resource = mappings.resource_for(device_class)
            if resource is None:
                message = field_error(
                    f"{at}.resourceClaimTemplateName",
                    "Not found",
                    f"DeviceClass {device_class} is not mapped in DRA configuration for "
                    f"podset {name}",
                )
                return Refused(message, message)
            if mappings.counters_for(device_class):
                continue  # charged by the counters its devices consume (step 4)
            _add(aggregated, resource, counts[device_class])
    return aggregated


def _extended(
    i: int, ps: Mapping[str, Any], catalogue: DeviceCatalogue, mappings: DeviceClassMappings
) -> dict[str, tuple[str, int]] | Refused:
    """Step 3 for pod set ``i``: per extended resource a DeviceClass serves, the quota
    resource it is charged as (the class's mapped one, else its own name) and how much."""
    out: dict[str, tuple[str, int]] = {}
    for resource, request in sorted(draextended.pod_requests(ps, i).items()):
        served_by = draextended.serving_class(catalogue.classes.values(), resource)
        if served_by is None:
            continue  # a device plugin's (or nobody's): an ordinary request
        device_class = str(served_by["metadata"]["name"])
        quota_key = mappings.resource_for(device_class) or resource
        if mappings.counters_for(device_class):
            message = field_error(
                request.path,
                "Invalid value",
                resource,
                f"extended resource {resource} resolves to DeviceClass {device_class} with "
                "counters configured; use ResourceClaimTemplates with CEL selectors for "
                "counter-based quota",
            )
            return Refused(message, message)
        for path, value in request.per_container:
            if draextended.whole(value) is None:
                message = field_error(
                    path,
                    "Invalid value",
                    value.canonical(),
                    "extended resource quantity must be an integer",
                )
                return Refused(message, message)
        out[resource] = (quota_key, request.total.int_value())
    return out


def _counted_by_counters(
    i: int,
    ps: Mapping[str, Any],
    templates: Mapping[str, Mapping[str, Any]],
    mappings: DeviceClassMappings,
    catalogue: DeviceCatalogue,
) -> dict[str, int] | Refused | DevicesUnknown:
    """Step 4 for pod set ``i``: requests of counter-charged classes, per quota resource."""
    aggregated: dict[str, int] = {}
    for j, claim in enumerate(claims_of(ps)):
        template = templates.get(str(claim.get("resourceClaimTemplateName") or ""))
        if template is None:
            continue
        claim_at = f"spec.podSets[{i}].template.spec.resourceClaims[{j}]"
        requests = view.items(template, "spec", "spec", "devices", "requests")
        for k, request in enumerate(requests):
            exactly = request.get("exactly")
            if not exactly or exactly.get("adminAccess"):
                continue
            device_class = str(exactly.get("deviceClassName") or "")
            sources = mappings.counters_for(device_class)
            if not sources:
                continue
            at = f"{claim_at}.devices.requests[{k}]"
            class_selectors = dracounters.class_selectors(catalogue.classes, device_class)
            if class_selectors is None:
                return DevicesUnknown(
                    f"{at}: Internal error: failed to get DeviceClass {device_class}: "
                    f'deviceclasses.resource.k8s.io "{device_class}" not found'
                )
            own = dracel.selector_expressions(exactly.get("selectors"))
            for n, expression in enumerate(own):
                if why := dracel.compile_problem(expression):
                    message = field_error(
                        f"{at}.exactly.selectors[{n}].cel.expression",
                        "Invalid value",
                        expression,
                        f"CEL compilation failed: {why}",
                    )
                    return Refused(message, message)
            count = exactly.get("count")
            for resource, source in sources:
                amount = dracounters.charged(
                    source,
                    class_selectors,
                    own,
                    1 if count is None else int(count),
                    catalogue.slices,
                )
                if isinstance(amount, dracounters.NotYet):
                    return DevicesUnknown(f"{at}: Internal error: {amount.message}")
                _add(aggregated, resource, amount)
    return aggregated
