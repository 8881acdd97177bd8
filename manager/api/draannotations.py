"""What a Workload records of its devices' charge (api/dra.py), in its annotations: the
charge per pod set, the extended resources DRA devices serve, and why a charge was refused;
and the records read back."""

from __future__ import annotations

import json
from collections.abc import Mapping

CHARGE_ANNOTATION = "kfed.io/dra-charge"
"""On a Workload: per pod set, the quota resources one pod's device claims are charged to,
as JSON (``{"main": {"example.com/gpu": "2"}}``). Written once, when the Workload is created;
the admission core adds it to the pod set's requests, on the manager and on the worker that
gets the copy."""
REPLACED_ANNOTATION = "kfed.io/dra-extended-resources"
"""On a Workload: per pod set, the extended resources (``nvidia.com/gpu``) its containers ask
for that DRA devices serve, as JSON (``{"main": ["nvidia.com/gpu"]}``). They are taken out of
the pod set's requests: ``CHARGE_ANNOTATION`` charges them, as their DeviceClass's resource."""
REFUSED_ANNOTATION = "kfed.io/dra-charge-refused"
"""On a Workload: why its device claims cannot be charged (the Workload is created inactive,
with that reason in its QuotaReserved condition)."""


def recorded_replaced(annotations: Mapping[str, str] | None) -> dict[str, tuple[str, ...]]:
    """The extended resources a Workload records as served by DRA (``REPLACED_ANNOTATION``),
    per pod set; ValueError when it is not the JSON kfed writes."""
    text = (annotations or {}).get(REPLACED_ANNOTATION)
    if not text:
        return {}
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"annotation {REPLACED_ANNOTATION} is not JSON: {err.msg}") from None
    if not isinstance(raw, dict) or not all(
        isinstance(v, list) and all(isinstance(n, str) for n in v) for v in raw.values()
    ):
        raise ValueError(f'annotation {REPLACED_ANNOTATION} must map pod sets to ["resource"]')
    return {str(ps): tuple(names) for ps, names in raw.items()}


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
