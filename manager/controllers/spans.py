"""The steps of a workload's life that its trace shows, and the attributes each carries.

The same controllers run on the manager (global queues) and in every worker shim (the copy
the manager placed there); a worker's steps are named ``remote.<step>`` so one trace reads
as the story: submit, queueing, admission, dispatch, remote.create, remote.queueing,
remote.admission, running, finish (and eviction, failover when things go wrong).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from manager import core
from manager.api.view import at
from manager.controllers import workloadstatus as ws
from manager.telemetry import tracing

Obj = Mapping[str, Any]


def step_name(role: str, step: str) -> str:
    return step if role == "manager" else f"remote.{step}"


def workload_attributes(role: str, obj: Obj) -> dict[str, Any]:
    meta = at(obj, "metadata")
    return {
        tracing.ROLE_ATTRIBUTE: role,
        "k8s.namespace.name": meta.get("namespace"),
        "kueue.workload": meta.get("name"),
        "kfed.job.kind": ws.owner_kind(obj) or None,
        "kueue.local_queue": at(obj, "spec").get("queueName"),
        "kueue.cluster_queue": at(obj, "status", "admission").get("clusterQueue"),
    }


def admission_attributes(admission: core.Admission, borrowing: bool) -> dict[str, Any]:
    flavors = sorted(
        f"{psa.name}: {resource}={flavor}"
        for psa in admission.pod_set_assignments
        for resource, flavor in psa.flavors.items()
    )
    return {
        "kueue.cluster_queue": admission.cluster_queue,
        "kueue.flavors": flavors,
        "kueue.borrowing": borrowing,
        "kueue.decision": "QuotaReserved"
        + (" (borrowing from the cohort)" if borrowing else " (within nominal quota)"),
    }


def record(
    role: str,
    step: str,
    obj: Obj,
    *,
    attributes: Mapping[str, Any] | None = None,
    start: float | str | None = None,
    end: float | str | None = None,
    error: str | None = None,
) -> None:
    """One step of ``obj``'s life, as a span of its trace."""
    tracing.record(
        step_name(role, step),
        obj,
        start=start,
        end=end,
        error=error,
        attributes={**workload_attributes(role, obj), **(attributes or {})},
    )
