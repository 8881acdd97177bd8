"""Conflict-safe writes: compute a change from the object as we know it, send it guarded by
its resourceVersion, and on a conflict read the object afresh and compute again.

The ``mutate`` function receives a deep copy and returns the patch body to send (a merge
patch, e.g. ``{"status": {...}}``), or None when nothing needs to change (or the change no
longer applies, e.g. the object was finished meanwhile).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from manager.kube import errors
from manager.kube.api import KubeApi, Obj
from manager.kube.jsoncopy import copy_json
from manager.kube.resources import Resource

log = logging.getLogger(__name__)

Mutate = Callable[[Obj], dict[str, Any] | None]


async def patch_guarded(
    api: KubeApi,
    res: Resource,
    current: Obj,
    mutate: Mutate,
    *,
    subresource: str | None = None,
    attempts: int = 5,
) -> Obj | None:
    """Returns the written object, or None when ``mutate`` said there was nothing to do.
    Raises errors.NotFound when the object is gone, errors.Conflict after ``attempts``."""
    meta = current["metadata"]
    name, namespace, uid = meta["name"], meta.get("namespace"), meta.get("uid")
    obj = current
    for attempt in range(attempts):
        body = mutate(copy_json(obj))
        if body is None:
            return None
        body.setdefault("metadata", {})["resourceVersion"] = obj["metadata"]["resourceVersion"]
        try:
            return await api.patch(res, name, body, namespace, subresource=subresource)
        except errors.Conflict:
            log.debug(
                "conflict writing %s %s/%s (attempt %d)", res.kind, namespace, name, attempt + 1
            )
            obj = await api.get(res, name, namespace)
            if uid and obj["metadata"].get("uid") != uid:
                raise errors.NotFound(
                    404, "NotFound", f"{res.kind} {namespace}/{name} was replaced"
                ) from None
    raise errors.Conflict(
        409,
        "Conflict",
        f"{res.kind} {namespace}/{name}: still conflicting after {attempts} attempts",
    )
