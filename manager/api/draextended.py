"""Extended resources served by DRA devices, by upstream Kueue's rules
(``KueueDRAIntegrationExtendedResource``, ``pkg/dra/extended_resources.go``).

With Kubernetes' ``DRAExtendedResource``, a DeviceClass with ``spec.extendedResourceName:
nvidia.com/gpu`` lets a plain ``nvidia.com/gpu: 1`` container request be served by one of the
class's devices on a node that has no ``nvidia.com/gpu`` of a device plugin (the scheduler
makes the pod's claim itself). For quota the request is then the class's: it is taken out of
the pod's requests and charged as the class's mapped resource (``deviceClassMappings``), or,
when the class is not mapped, under its own name again. Either way it is charged once, never
as ``nvidia.com/gpu`` and as the mapped resource both.

Per pod set, a pod's extended requests are summed over its containers and held against its
largest init container (as the scheduler counts a pod); when several classes name the same
resource, the one the scheduler picks serves it (the newest; on a tie, the first by name).
Only whole numbers of a DRA-served resource can be charged.

Pure: pod sets and DeviceClasses in, per pod set the resources replaced and their charge out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from manager.api import quantity
from manager.api.view import at

Obj = dict[str, Any]


def is_extended(name: str) -> bool:
    """A resource name a device plugin or DRA may serve: domain-prefixed, outside
    ``kubernetes.io`` (``nvidia.com/gpu``; not ``cpu``, ``hugepages-1Gi``, ``requests.*``)."""
    domain, slash, _ = name.partition("/")
    if not slash or domain == "kubernetes.io" or domain.endswith(".kubernetes.io"):
        return False
    return not name.startswith("requests.")


@dataclass(frozen=True, slots=True)
class ExtendedRequest:
    """One pod's request of an extended resource, and where it was first written."""

    total: quantity.Quantity
    path: str
    per_container: tuple[tuple[str, quantity.Quantity], ...]
    """(field path, quantity) of every container asking for it: each must be whole."""


def _container_requests(container: Mapping[str, Any]) -> dict[str, quantity.Quantity]:
    resources = container.get("resources") or {}
    # The apiserver defaults a missing request to its limit; extended resources take no other.
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    out: dict[str, quantity.Quantity] = {}
    for name, raw in merged.items():
        if not is_extended(str(name)):
            continue
        try:
            parsed = quantity.parse_quantity(raw)
        except quantity.QuantityError:
            continue
        if parsed > quantity.Quantity.ZERO:
            out[str(name)] = parsed
    return out


def pod_requests(pod_set: Mapping[str, Any], index: int) -> dict[str, ExtendedRequest]:
    """The extended resources one pod of ``pod_set`` (``spec.podSets[index]``) asks for."""
    spec = at(pod_set, "template", "spec")
    base = f"spec.podSets[{index}].template.spec"
    first: dict[str, str] = {}
    written: dict[str, list[tuple[str, quantity.Quantity]]] = {}
    init_max: dict[str, quantity.Quantity] = {}
    regular_sum: dict[str, quantity.Quantity] = {}
    for field_name, totals in (("initContainers", init_max), ("containers", regular_sum)):
        for j, container in enumerate(spec.get(field_name) or []):
            path = f"{base}.{field_name}[{j}]"
            for name, value in _container_requests(container).items():
                first.setdefault(name, path)
                written.setdefault(name, []).append((f"{path}.resources.requests.{name}", value))
                if name not in totals:
                    totals[name] = value
                elif totals is init_max:  # init containers run one after another
                    totals[name] = max(totals[name], value)
                else:  # the others together
                    totals[name] = totals[name] + value
    out: dict[str, ExtendedRequest] = {}
    for name in first:
        total = max(
            init_max.get(name, quantity.Quantity.ZERO),
            regular_sum.get(name, quantity.Quantity.ZERO),
        )
        out[name] = ExtendedRequest(total, first[name], tuple(written[name]))
    return out


def serving_class(classes: Iterable[Obj], resource: str) -> Obj | None:
    """The DeviceClass whose devices serve ``resource`` (``spec.extendedResourceName``), as
    the scheduler picks it among several: the newest, then the first by name; None: no
    class serves it (a device plugin's, or nobody's)."""
    serving = [c for c in classes if at(c, "spec").get("extendedResourceName") == resource]
    if not serving:
        return None
    newest = max(str(c["metadata"].get("creationTimestamp") or "") for c in serving)
    return min(
        (c for c in serving if str(c["metadata"].get("creationTimestamp") or "") == newest),
        key=lambda c: str(c["metadata"]["name"]),
    )


def whole(value: quantity.Quantity) -> int | None:
    """The whole number ``value`` is, or None (``500m``)."""
    units = value.int_value()
    return units if quantity.Quantity.parse(units) == value else None
