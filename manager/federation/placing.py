"""Placing a workload whose MultiKueue check is Pending.

Capacity-aware (default): one copy on the best-fitting worker (``capacity.py``); a copy not
admitted within ``admission_timeout`` is withdrawn and the next candidate tried; when every
worker says it can never hold the workload as configured, it keeps its manager quota for
``dispatch_deadline`` and is then given back (check Retry) with the reason. AllAtOnce /
Incremental (upstream's modes): copies on every (or ``incremental_step`` more) worker, the
first to admit wins and the others are deleted before the Job is created on the winner.
"""

from __future__ import annotations

import logging
import time

from manager.api import constants as C
from manager.api import quantity
from manager.controllers import conditions, spans
from manager.controllers import workloadstatus as ws
from manager.federation import capacity
from manager.federation.lookups import Lookups
from manager.federation.records import Placement, Stats, WorkloadRecord
from manager.federation.remote import RemoteCluster
from manager.federation.settings import ALLOWED_CLUSTERS_ANNOTATION, DispatchMode
from manager.federation.writes import Writes
from manager.kube.api import Obj

log = logging.getLogger(__name__)

RULE = "best fit, then fewest waiting, then config order"


def _admitted_at(remote_wl: Obj) -> str:
    c = conditions.find(ws.status_of(remote_wl).get("conditions"), C.ADMITTED) or {}
    return str(c.get("lastTransitionTime", ""))


class Placer:
    def __init__(self, look: Lookups, write: Writes, stats: Stats) -> None:
        self.look = look
        self.write = write
        self.stats = stats
        self.state = look.state
        self.registry = look.registry
        self.settings = look.settings
        self.records = look.records

    # -- what the workload needs and where it may go ----------------------------------------

    def request(self, obj: Obj) -> capacity.Request:
        usage: dict[tuple[str, str], int] = {}
        admission = ws.status_of(obj).get("admission") or {}
        for psa in admission.get("podSetAssignments") or []:
            flavors = psa.get("flavors") or {}
            for resource, value in (psa.get("resourceUsage") or {}).items():
                flavor = flavors.get(resource)
                if flavor:
                    fr = (flavor, resource)
                    usage[fr] = usage.get(fr, 0) + quantity.to_core_units(resource, value)
        return capacity.Request(
            obj["metadata"]["namespace"], str((obj.get("spec") or {}).get("queueName", "")), usage
        )

    def allowed(self, obj: Obj) -> set[str] | None:
        job = self.look.manager_job(obj) or {}
        for source in (obj, job):
            value = ((source.get("metadata") or {}).get("annotations") or {}).get(
                ALLOWED_CLUSTERS_ANNOTATION
            )
            if value:
                return {c.strip() for c in value.split(",") if c.strip()}
        return None

    def worker_view(self, remote: RemoteCluster, order: int) -> capacity.WorkerView:
        in_flight: dict[tuple[str, str, str], int] = {}
        waiting = 0
        for _, placement in self.records.placements():
            if placement.cluster == remote.name:
                waiting += 1
                for k, v in placement.usage.items():
                    in_flight[k] = in_flight.get(k, 0) + v
        return capacity.WorkerView(
            name=remote.name,
            local_queues=remote.informers["localqueues"].cache,
            cluster_queues=remote.informers["clusterqueues"].cache,
            flavors=remote.informers["resourceflavors"].cache,
            in_flight=in_flight,
            waiting=waiting,
            order=order,
        )

    def candidates(self, obj: Obj, clusters: list[str]) -> list[capacity.Candidate]:
        """Every worker of the config, evaluated for this workload."""
        request = self.request(obj)
        allowed = self.allowed(obj)
        result = []
        for order, name in enumerate(clusters):
            entry = self.registry.clusters.get(name)
            remote = entry.remote if entry else None
            maintenance = self.look.maintenance(name)
            if allowed is not None and name not in allowed:
                result.append(
                    capacity.Candidate(
                        name, False, f"not in the job's {ALLOWED_CLUSTERS_ANNOTATION}", never=True
                    )
                )
            elif remote is None or not remote.connected:
                result.append(capacity.Candidate(name, False, "not connected"))
            elif (blocked := self.look.blocked_reason(ws.key_of(obj), name)) is not None:
                result.append(capacity.Candidate(name, False, blocked))
            elif maintenance in ("cordon", "drain"):
                result.append(capacity.Candidate(name, False, f"in maintenance ({maintenance})"))
            else:
                result.append(
                    capacity.evaluate(
                        self.worker_view(remote, order), request, self.state.flavors.cache
                    )
                )
        return result

    # -- placing -------------------------------------------------------------------------

    async def place(
        self, key: str, obj: Obj, check: str, clusters: list[str], copies: dict[str, Obj]
    ) -> float | None:
        if self.settings.dispatch_mode is DispatchMode.CAPACITY_AWARE:
            return await self._place_capacity_aware(key, obj, check, clusters, copies)
        return await self._place_many(key, obj, check, clusters, copies)

    async def _place_capacity_aware(
        self, key: str, obj: Obj, check: str, clusters: list[str], copies: dict[str, Obj]
    ) -> float | None:
        record = self.records(key)
        placement = record.placement
        if placement is None and copies:
            # After a restart: a copy already exists; follow it.
            cluster = sorted(copies)[0]
            placement = Placement(
                cluster, "", {}, time.monotonic() + self.settings.admission_timeout, "recovered"
            )
            record.placement = placement
        if placement is not None:
            remote = self.registry.remote(placement.cluster)
            copy_ = copies.get(placement.cluster)
            if remote is not None and remote.connected and copy_ is not None:
                if ws.is_admitted(copy_) and not ws.is_evicted(copy_):
                    return await self.write.won(key, obj, check, remote, copies)
                if (
                    time.monotonic() < placement.deadline
                    and ws.is_active(copy_)
                    and not ws.is_evicted(copy_)
                ):
                    return placement.deadline - time.monotonic()
            elif remote is not None and remote.connected and time.monotonic() < placement.deadline:
                return 0.5  # created, not seen by our informer yet
            # Not admitted in time (or the worker went away): withdraw, try the next one.
            self.stats.withdrawn += 1
            record.tried.add(placement.cluster)
            record.placement = None
            if remote is not None and remote.connected:
                await self.write.delete_copy(remote, key, obj)
            elif remote is not None and not self.look.lost_long_enough(remote, obj):
                # It may still admit and run it there: wait until it surely cannot.
                record.placement = placement
                return self.look.lost_remaining(remote, obj)
            self.state.metrics.failover(placement.cluster, "retry")

        candidates = self.candidates(obj, clusters)
        tried = set(record.tried)
        fresh = [c for c in candidates if c.cluster not in tried]
        if not any(c.fits for c in fresh) and tried:
            record.tried = set()  # every candidate had its turn: start over
            fresh = candidates
        best = capacity.choose(fresh)
        if best is None:
            record.waiting = True
            reasons = "; ".join(c.describe() for c in candidates) or "no worker clusters configured"
            if capacity.never_placeable(candidates):
                return await self._unplaceable(record, obj, check, reasons)
            record.unplaceable_since = None
            await self.write.set_check(
                obj, check, "Pending", f"no worker can admit it now: {reasons}"
            )
            return self.look.unblocked_in(key)
        record.waiting = False
        record.unplaceable_since = None
        remote = self.registry.remote(best.cluster)
        assert remote is not None
        usage = {}
        for (flavor, resource), amount in self.request(obj).usage.items():
            worker_flavor = best.flavors.get(flavor, flavor)
            usage[(best.worker_cluster_queue, worker_flavor, resource)] = amount
        record.placement = Placement(
            best.cluster,
            best.worker_cluster_queue,
            usage,
            time.monotonic() + self.settings.admission_timeout,
            best.reason,
        )
        decision = {
            "cluster": best.cluster,
            "reason": best.reason,
            "rule": RULE,
            "candidates": [c.describe() for c in candidates],
            "at": time.time(),
        }
        spans.record(
            "manager",
            "dispatch",
            obj,
            attributes={
                "kfed.dispatch.mode": str(self.settings.dispatch_mode),
                "kfed.cluster": best.cluster,
                "kfed.dispatch.reason": best.reason,
                "kfed.dispatch.rule": RULE,
                "kfed.dispatch.candidates": decision["candidates"],
                "kfed.dispatch.tried_before": sorted(tried),
            },
        )
        if not await self.write.create_copy(remote, obj):
            record.placement = None
            return 1.0
        await self.write.annotate(obj, decision)
        await self.write.set_check(
            obj,
            check,
            "Pending",
            f"dispatched to {best.cluster}: {best.reason}",
            nominated=[best.cluster],
        )
        return self.settings.admission_timeout

    async def _unplaceable(
        self, record: WorkloadRecord, obj: Obj, check: str, reasons: str
    ) -> float | None:
        """No worker can ever hold it as the workers are configured. It keeps its manager
        quota for ``dispatch_deadline`` (a worker may be given the queue or flavor); then the
        check goes Retry: the manager evicts it, which releases the quota, and requeues it
        with backoff, the reason kept in its Evicted condition."""
        deadline = self.settings.dispatch_deadline
        if record.unplaceable_since is None:
            record.unplaceable_since = time.monotonic()
        left = deadline - (time.monotonic() - record.unplaceable_since)
        if left > 0:
            await self.write.set_check(
                obj,
                check,
                "Pending",
                f"no worker can ever admit it as configured: {reasons}; its quota is released "
                f"{deadline:g}s after this was first seen (dispatch deadline) unless one can",
            )
            return left
        record.unplaceable_since = None
        message = (
            f"no worker could admit it within the dispatch deadline of {deadline:g}s: {reasons}; "
            "quota released, requeued"
        )
        log.info("workload %s: %s", ws.key_of(obj), message)
        self.stats.retries += 1
        await self.write.set_check(obj, check, "Retry", message)
        return None

    async def _place_many(
        self, key: str, obj: Obj, check: str, clusters: list[str], copies: dict[str, Obj]
    ) -> float | None:
        admitted = [
            (_admitted_at(c), name)
            for name, c in copies.items()
            if ws.is_admitted(c) and not ws.is_evicted(c)
        ]
        if admitted:
            # Once a winner is chosen it stays chosen: a later reconcile may see another copy
            # admitted as early (timestamps have 1 s resolution) before it sees our own
            # Ready; choosing again would stop the job on the first winner and start it on
            # a second one.
            winner = self.records(key).winner or min(admitted)[1]
            remote = self.registry.remote(winner)
            if remote is None:
                return 1.0
            return await self.write.won(key, obj, check, remote, copies)
        allowed = self.allowed(obj)
        usable = [
            n
            for n in clusters
            if (allowed is None or n in allowed)
            and self.look.maintenance(n) == ""
            and self.look.blocked_reason(key, n) is None
            and (r := self.registry.remote(n)) is not None
            and r.connected
        ]
        if self.settings.dispatch_mode is DispatchMode.INCREMENTAL:
            record = self.records(key)
            step, started = record.round or (1, time.monotonic())
            if time.monotonic() - started >= self.settings.incremental_round_timeout:
                step, started = step + 1, time.monotonic()
            record.round = (step, started)
            usable = usable[: step * self.settings.incremental_step]
        new = [n for n in usable if n not in copies]
        if new:
            spans.record(
                "manager",
                "dispatch",
                obj,
                attributes={
                    "kfed.dispatch.mode": str(self.settings.dispatch_mode),
                    "kfed.clusters": new,
                },
            )
        for name in new:
            remote = self.registry.remote(name)
            if remote is not None:
                await self.write.create_copy(remote, obj)
        await self.write.set_check(
            obj,
            check,
            "Pending",
            f"dispatched to {', '.join(usable) or 'no worker'}",
            nominated=sorted(usable),
        )
        if self.settings.dispatch_mode is DispatchMode.INCREMENTAL:
            return 1.0
        return self.look.unblocked_in(key)
