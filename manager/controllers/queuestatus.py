"""ClusterQueue and LocalQueue status, written as Kueue writes it: the Active condition,
pending/reserving/admitted counts, flavorsReservation and flavorsUsage.

Recomputed from the core every ``status_period`` seconds and written only when it changed,
so a burst of admissions costs one write per queue, not one per admission.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from manager import core
from manager.api import constants as C
from manager.api import quantity
from manager.api.view import at
from manager.controllers import conditions
from manager.controllers.state import ClusterState
from manager.kube import errors
from manager.kube import resources as R

log = logging.getLogger(__name__)

STATUS_WRITES_AT_ONCE = 8


def _usage(flavors: tuple[core.FlavorUsage, ...], *, borrowed: bool) -> list[dict[str, Any]]:
    result = []
    for f in flavors:
        resources = []
        for r in f.resources:
            entry: dict[str, Any] = {
                "name": r.name,
                "total": str(quantity.from_core_units(r.name, r.total)),
            }
            if borrowed:
                entry["borrowed"] = str(quantity.from_core_units(r.name, r.borrowed))
            resources.append(entry)
        result.append({"name": f.name, "resources": resources})
    return result


class QueueStatusWriter:
    def __init__(self, state: ClusterState, period: float) -> None:
        self.state = state
        self.period = period

    def _missing_checks(self, cq: dict[str, Any]) -> list[str]:
        strategy = at(cq, "spec", "admissionChecksStrategy")
        names = [r["name"] for r in strategy.get("admissionChecks") or []]
        return [n for n in names if self.state.admission_checks.get(n) is None]

    def cluster_queue_status(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        name = obj["metadata"]["name"]
        view = self.state.core.cluster_queue_status(core.ClusterQueueName(name))
        if view is None:
            return None
        active, reason, message = view.active, view.reason, view.message
        invalid = self.state.invalid.get(f"ClusterQueue/{name}")
        missing = self._missing_checks(obj)
        if invalid:
            active, reason, message = False, "InvalidSpec", invalid
        elif missing and active:
            active, reason = False, C.REASON_ADMISSION_CHECK_NOT_FOUND
            message = "Can't admit new workloads: missing AdmissionCheck(s): " + ", ".join(missing)
        conds = list(at(obj, "status").get("conditions") or [])
        conditions.set_condition(conds, C.ACTIVE, active, reason, message)
        return {
            "conditions": conds,
            "pendingWorkloads": view.pending,
            "reservingWorkloads": view.reserving,
            "admittedWorkloads": view.admitted,
            "flavorsReservation": _usage(view.flavors_reservation, borrowed=True),
            "flavorsUsage": _usage(view.flavors_usage, borrowed=True),
        }

    def local_queue_status(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
        view = self.state.core.local_queue_status(core.LocalQueueKey(key))
        if view is None:
            return None
        conds = list(at(obj, "status").get("conditions") or [])
        conditions.set_condition(conds, C.ACTIVE, view.active, view.reason, view.message)
        return {
            "conditions": conds,
            "pendingWorkloads": view.pending,
            "reservingWorkloads": view.reserving,
            "admittedWorkloads": view.admitted,
            "flavorsReservation": _usage(view.flavors_reservation, borrowed=False),
            "flavorsUsage": _usage(view.flavors_usage, borrowed=False),
        }

    async def write_once(self) -> int:
        """Write every queue status that changed; returns how many were written.

        The statuses are computed at once (one consistent view of the core), then written a
        few at a time: with hundreds of queues, one at a time would take a round trip each
        and leave the last ones stale for many periods."""
        changes: list[tuple[R.Resource, dict[str, Any], dict[str, Any]]] = []
        for informer, compute, res in (
            (self.state.cluster_queues, self.cluster_queue_status, R.CLUSTER_QUEUES),
            (self.state.local_queues, self.local_queue_status, R.LOCAL_QUEUES),
        ):
            for obj in informer.items():
                status = compute(obj)
                if status is not None and not _same(status, dict(at(obj, "status"))):
                    changes.append((res, obj["metadata"], status))
        slots = asyncio.Semaphore(STATUS_WRITES_AT_ONCE)

        async def write(res: R.Resource, meta: dict[str, Any], status: dict[str, Any]) -> bool:
            async with slots:
                try:
                    await self.state.api.patch(
                        res,
                        meta["name"],
                        {"status": status},
                        meta.get("namespace"),
                        subresource="status",
                    )
                except errors.KubeError as err:
                    log.info("status of %s %s not written: %s", res.kind, meta["name"], err)
                    return False
                return True

        results = await asyncio.gather(*(write(*change) for change in changes))
        return sum(results)

    async def run(self) -> None:
        while True:
            await self.write_once()
            await asyncio.sleep(self.period)


def _same(new: dict[str, Any], old: dict[str, Any]) -> bool:
    for key, value in new.items():
        if key == "conditions":
            if _strip_times(value) != _strip_times(old.get("conditions") or []):
                return False
        elif (
            old.get(key) != value
            and not (value == [] and key not in old)
            and not (value == 0 and key not in old)
        ):
            return False
    return True


def _strip_times(conds: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(
        (c.get("type"), c.get("status"), c.get("reason"), c.get("message")) for c in conds
    )
