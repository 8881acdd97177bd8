"""An object of the name kfed is about to create on a worker is already there: whose is it,
and what may kfed do (pure). One of never-twice's guards: kfed never adopts, changes or
deletes an object it did not create, and never adopts a Job an earlier workload of the same
name left behind (still being deleted, or not collected yet).

``writes.py`` asks it before creating a copy's Job and when a create answers AlreadyExists,
for copies and Jobs alike.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from manager.api import constants as C
from manager.api.view import labels_of

Obj = dict[str, Any]


class SameName(StrEnum):
    NONE = "none"
    """Nothing of that name there: create it."""
    OURS = "ours"
    """Ours, made for this very workload: use it (a create that raced with an earlier one)."""
    EARLIER = "earlier"
    """Ours, made for an earlier workload of the same name: wait until it is gone."""
    FOREIGN = "foreign"
    """Not made by this manager (no origin label of ours): leave it alone, block the worker."""


def judge(existing: Obj | None, *, origin: str, workload_name: str | None) -> SameName:
    """``existing``: the object of that name on the worker (None: none); ``origin``: this
    manager's origin label value; ``workload_name``: the manager Workload it is for (None:
    a copy of the Workload itself, which carries no prebuilt-workload label)."""
    if existing is None:
        return SameName.NONE
    labels = labels_of(existing)
    if labels.get(C.MULTIKUEUE_ORIGIN_LABEL) != origin:
        return SameName.FOREIGN
    if workload_name is not None and labels.get(C.PREBUILT_WORKLOAD_LABEL) != workload_name:
        return SameName.EARLIER
    return SameName.OURS
