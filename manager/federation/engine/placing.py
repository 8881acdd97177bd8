"""Placing a workload whose MultiKueue check is Pending.

Capacity-aware (default): one copy on the best-fitting worker (``capacity.py``); a copy not
admitted within ``admission_timeout`` is withdrawn and the next candidate tried; when every
worker says it can never hold the workload as configured, it keeps its manager quota for
``dispatch_deadline`` and is then given back (check Retry) with the reason. AllAtOnce /
Incremental (upstream's modes): copies on every (or ``incremental_step`` more) worker, the
first to admit wins and the others are deleted before the Job is created on the winner.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict

from manager.api import constants as C
from manager.api import dra, quantity
from manager.controllers import conditions, spans
from manager.controllers import eventreasons as told
from manager.controllers import workloadstatus as ws
from manager.federation.decisions import (
    capacity,
    choosing,
    devices,
    eligibility,
    many,
    references,
    topology,
)
from manager.federation.decisions.eligibility import WorkerEligibility
from manager.federation.engine import workloadview
from manager.federation.engine.lookups import Lookups
from manager.federation.engine.records import Placement, Stats
from manager.federation.engine.topologyview import TopologyView
from manager.federation.engine.writes import Writes
from manager.federation.settings import ALLOWED_CLUSTERS_ANNOTATION, DispatchMode
from manager.federation.workers.remote import RemoteCluster
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import Obj

log = logging.getLogger(__name__)

TOLD_REFUSALS = 4096
"""Refusals for references remembered (workload, worker), so each is told by one Event."""
DEVICE_NEEDS = 4096
"""Workloads whose device requests (read from their ResourceClaimTemplates) are remembered."""


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
        self._told_refusals: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._needs: OrderedDict[str, tuple[tuple[object, ...], devices.Need]] = OrderedDict()
        self._inventories: dict[str, tuple[int, devices.Inventory, dict[str, tuple[str, ...]]]]
        self._inventories = {}
        self._taken: dict[str, tuple[int, devices.Taken]] = {}
        self.topology = TopologyView()
        """TAS: each worker's domain trees, from its shim's report."""

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
        in_flight = self.records.in_flight(remote.name)
        return capacity.WorkerView(
            name=remote.name,
            local_queues=remote.informers["localqueues"].cache,
            cluster_queues=remote.informers["clusterqueues"].cache,
            flavors=remote.informers["resourceflavors"].cache,
            in_flight=in_flight.usage,
            waiting=in_flight.waiting,
            order=order,
        )

    def ineligible(
        self, obj: Obj, name: str, allowed: set[str] | None
    ) -> capacity.Candidate | None:
        """Why no copy may go to worker ``name`` whatever its capacity (None: it may), the
        same in every dispatch mode and in ``kfed whatif`` (``eligibility.py``)."""
        return eligibility.refusal(self.eligibility(obj, name, allowed))

    def eligibility(self, obj: Obj, name: str, allowed: set[str] | None) -> WorkerEligibility:
        """The facts ``eligibility.refusal`` judges, from the manager's live view."""
        namespace = str(obj["metadata"].get("namespace") or "")
        remote = self.registry.remote(name)
        res = self.look.kind_of(obj).resource
        permitted = allowed is None or name in allowed
        bound = self.look.namespace_bound(name, namespace)
        return WorkerEligibility(
            name=name,
            allowed=permitted,
            registered=self.registry.mk_clusters.get(name) is not None,
            namespace=namespace,
            namespace_bound=bound,
            # Asked only where it decides: a refusal is told by an Event, once.
            references_refusal=self.references_refusal(obj, name) if permitted and bound else None,
            connected=remote is not None and remote.connected,
            kind=f"{res.kind} ({res.api_version})",
            serves_kind=remote is not None and remote.serves(self.look.kind_of(obj)),
            blocked=self.look.blocked_reason(ws.key_of(obj), name),
            maintenance=self.look.maintenance(name),
        )

    def references_refusal(self, obj: Obj, name: str) -> str | None:
        """Why the worker's ``kfed.io/allowed-references`` keeps this workload away (None:
        it does not). Told once per workload and worker by a Warning Event on the Workload."""
        policy = references.policy_of(self.registry.mk_clusters.get(name))
        if policy is None:
            return None
        namespace = str(obj["metadata"].get("namespace") or "")
        used = references.of_objects(namespace, (obj, self.look.manager_job(obj)))
        refusal = references.refusal(policy, used, namespace=namespace, worker=name)
        told = (str(obj["metadata"].get("uid") or ws.key_of(obj)), name)
        if refusal is not None and self._told_refusals.get(told) != refusal:
            self._told_refusals[told] = refusal
            self._told_refusals.move_to_end(told)
            while len(self._told_refusals) > TOLD_REFUSALS:
                self._told_refusals.popitem(last=False)
            self.state.events.warning(
                obj, references.EVENT_REASON, f"not placed on {name}: {refusal}"
            )
        return refusal

    async def device_need(self, obj: Obj) -> devices.Need:
        """What each pod of the workload asks of a worker's devices: its pod sets' claims
        from the namespace's ResourceClaimTemplates as they are on the manager (read once
        per workload and admission, and remembered), times the admitted pod counts."""
        pod_sets = (obj.get("spec") or {}).get("podSets") or []
        names = dra.template_names(pod_sets)
        if not names:
            return devices.Need()
        admission = ws.status_of(obj).get("admission") or {}
        pods = {
            str(psa.get("name", "")): int(psa["count"])
            for psa in admission.get("podSetAssignments") or []
            if psa.get("count") is not None
        }
        meta = obj["metadata"]
        key = ws.key_of(obj)
        stamp = (meta.get("uid"), tuple(sorted(pods.items())))
        known = self._needs.get(key)
        if known is not None and known[0] == stamp:
            return known[1]
        templates: dict[str, Obj] = {}
        for name in names:
            try:
                templates[name] = await self.state.api.get(
                    R.RESOURCE_CLAIM_TEMPLATES, name, meta["namespace"]
                )
            except errors.NotFound:
                log.info("workload %s: ResourceClaimTemplate %s not found", key, name)
        need = devices.need_of(pod_sets, templates, pods)
        self._needs[key] = (stamp, need)
        self._needs.move_to_end(key)
        while len(self._needs) > DEVICE_NEEDS:
            self._needs.popitem(last=False)
        return need

    def worker_devices(self, remote: RemoteCluster) -> devices.WorkerDevices | None:
        """The worker's devices as the check reads them, from its informers; the inventory
        rebuilt only when its slices or classes changed, what is taken when its claims did."""
        if not remote.serves_devices:
            return None
        slices, claims, classes = remote.device_objects()
        inv = self._inventories.get(remote.name)
        if inv is None or inv[0] != remote.device_generation:
            inv = (
                remote.device_generation,
                devices.inventory(slices),
                devices.device_classes(classes),
            )
            self._inventories[remote.name] = inv
        held = self._taken.get(remote.name)
        if held is None or held[0] != remote.claims_generation:
            held = (remote.claims_generation, devices.taken(claims))
            self._taken[remote.name] = held
        return devices.WorkerDevices(inv[1], held[1], inv[2])

    def candidates(
        self, obj: Obj, clusters: list[str], need: devices.Need | None = None
    ) -> list[capacity.Candidate]:
        """Every worker of the config, evaluated for this workload: quota, then (for a
        workload that claims devices, ``need``) whether every pod gets its devices on one
        node there."""
        request = self.request(obj)
        allowed = self.allowed(obj)
        tas_need = topology.need_of(obj)
        result = []
        for order, name in enumerate(clusters):
            refused = self.ineligible(obj, name, allowed)
            remote = self.registry.remote(name)
            if refused is not None or remote is None:
                result.append(refused or capacity.Candidate(name, False, "not connected"))
                continue
            candidate = capacity.evaluate(
                self.worker_view(remote, order), request, self.state.flavors.cache
            )
            if need:
                candidate = devices.evaluate(
                    candidate, self.worker_devices(remote), need, serves=remote.serves_devices
                )
            # TAS: only a worker with domains that hold every pod set (docs/tas.md).
            candidate = topology.evaluate(
                candidate, self.topology.of(remote), tas_need, self._tas_in_flight(name)
            )
            result.append(candidate)
        return result

    def _tas_in_flight(self, worker: str) -> topology.Held:
        """TAS: what the copies sent to ``worker`` and not admitted yet are expected to take
        there (its report shows them once admitted)."""
        held: dict[str, dict[tuple[str, ...], dict[str, int]]] = {}
        for _, placement in self.records.placements():
            if placement.cluster == worker and placement.topology:
                topology.add_held(held, placement.topology)
        return held

    # -- placing -------------------------------------------------------------------------

    async def place(
        self, key: str, obj: Obj, check: str, clusters: list[str], copies: dict[str, Obj]
    ) -> float | None:
        if self.settings.dispatch_mode is DispatchMode.CAPACITY_AWARE:
            return await self._place_capacity_aware(key, obj, check, clusters, copies)
        return await self._place_many(key, obj, check, clusters, copies)

    def placed(self, placement: Placement, copy_: Obj | None, obj: Obj) -> choosing.Placed:
        """The facts ``choosing.judge_placement`` needs about the worker a copy went to."""
        remote = self.registry.remote(placement.cluster)
        if copy_ is None:
            state = choosing.CopyState.ABSENT
        elif ws.is_evicted(copy_) or not ws.is_active(copy_):
            state = choosing.CopyState.STOPPED
        elif ws.is_admitted(copy_):
            state = choosing.CopyState.ADMITTED
        else:
            state = choosing.CopyState.WAITING
        reachable = remote is not None and remote.connected
        may_move_in = 0.0
        if remote is not None and not reachable:
            may_move_in = self.look.may_move_at(remote, obj) - time.monotonic()
        return choosing.Placed(placement.cluster, placement.deadline, reachable, state, may_move_in)

    async def _place_capacity_aware(
        self, key: str, obj: Obj, check: str, clusters: list[str], copies: dict[str, Obj]
    ) -> float | None:
        record = self.records(key)
        if record.placement is None and copies:
            # After a restart: a copy already exists; follow it.
            record.placement = Placement(
                sorted(copies)[0],
                "",
                {},
                time.monotonic() + self.settings.admission_timeout,
                "recovered",
            )
        placement = record.placement
        if placement is not None:
            verdict = choosing.judge_placement(
                self.placed(placement, copies.get(placement.cluster), obj), time.monotonic()
            )
            match verdict.do:
                case choosing.Verdict.WIN:
                    remote = self.registry.remote(placement.cluster)
                    assert remote is not None  # reachable
                    return await self.write.won(key, obj, check, remote, copies)
                case choosing.Verdict.WAIT:
                    return await self._nominate_if_waiting(obj, check, placement, verdict.after)
            await self._withdraw(key, obj, placement.cluster, delete=verdict.delete_copy)

        need = await self.device_need(obj)
        facts = choosing.ChoosingFacts(
            now=time.monotonic(),
            candidates=tuple(self.candidates(obj, clusters, need)),
            tried=frozenset(record.tried),
            unplaceable_since=record.unplaceable_since,
            dispatch_deadline=self.settings.dispatch_deadline,
            unblocked_in=self.look.unblocked_in(key),
        )
        return await self._carry_out(key, obj, check, facts, choosing.choose(facts))

    async def _nominate_if_waiting(
        self, obj: Obj, check: str, placement: Placement, after: float | None
    ) -> float | None:
        """A copy not admitted yet: once it has waited ``nominate_after``, say so on the
        Workload (the check's message, ``nominatedClusterNames``); the seconds before
        looking again."""
        if placement.nominate_at is None:
            return after
        remaining = placement.nominate_at - time.monotonic()
        if remaining > 0:
            return remaining if after is None else min(after, remaining)
        placement.nominate_at = None
        await self.write.set_check(
            obj, check, "Pending", placement.waiting_message, nominated=[placement.cluster]
        )
        return after

    async def _withdraw(self, key: str, obj: Obj, cluster: str, *, delete: bool) -> None:
        """Give up the copy sent to ``cluster``: it was not admitted in time, it stopped, or
        the worker is gone (and surely runs nothing of it)."""
        record = self.records(key)
        self.stats.withdrawn += 1
        record.tried.add(cluster)
        record.placement = None
        remote = self.registry.remote(cluster)
        if delete and remote is not None:
            await self.write.delete_copy(remote, key, obj)
        self.state.metrics.failover(cluster, "retry")

    async def _carry_out(
        self, key: str, obj: Obj, check: str, facts: choosing.ChoosingFacts, choice: choosing.Choice
    ) -> float | None:
        record = self.records(key)
        record.tried = set(choice.tried)
        record.unplaceable_since = choice.unplaceable_since
        record.waiting = choice.do is not choosing.Choose.PLACE
        match choice.do:
            case choosing.Choose.PENDING:
                await self.write.set_check(obj, check, "Pending", choice.message)
                return choice.after
            case choosing.Choose.GIVE_BACK:
                # The manager evicts it, which releases the quota, and requeues it with
                # backoff, the reason kept in its Evicted condition.
                log.info("workload %s: %s", ws.key_of(obj), choice.message)
                self.stats.retries += 1
                await self.write.set_check(obj, check, "Retry", choice.message)
                return None
        return await self._send(key, obj, check, facts, choice)

    async def _send(
        self, key: str, obj: Obj, check: str, facts: choosing.ChoosingFacts, choice: choosing.Choice
    ) -> float | None:
        """PLACE: send a copy to the chosen worker and note where and why."""
        best = choice.best
        assert best is not None
        record = self.records(key)
        remote = self.registry.remote(best.cluster)
        assert remote is not None  # a candidate that fits is connected
        usage = {}
        for (flavor, resource), amount in self.request(obj).usage.items():
            worker_flavor = best.flavors.get(flavor, flavor)
            usage[(best.worker_cluster_queue, worker_flavor, resource)] = amount
        now = time.monotonic()
        record.placement = Placement(
            best.cluster,
            best.worker_cluster_queue,
            usage,
            now + self.settings.admission_timeout,
            best.reason,
            waiting_message=choice.message,
            nominate_at=now + self.settings.nominate_after,
            # TAS: held there in the manager's eyes until the worker admits it.
            topology=topology.expected(
                self.topology.of(remote), topology.need_of(obj), best.flavors
            ),
        )
        decision = {
            "cluster": best.cluster,
            "reason": best.reason,
            "rule": capacity.RULE,
            "candidates": [c.describe() for c in facts.candidates],
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
                "kfed.dispatch.rule": capacity.RULE,
                "kfed.dispatch.candidates": decision["candidates"],
                "kfed.dispatch.tried_before": sorted(facts.tried),
            },
        )
        if not await self.write.create_copy(remote, obj):
            record.placement = None
            return 1.0
        before, _ = workloadview.placement_of(obj)  # the previous decision, if any
        told.dispatched(
            self.state.events,
            obj,
            best.cluster,
            best.reason,
            previously=before.cluster if before is not None else "",
        )
        await self.write.annotate(obj, decision)
        return self.settings.nominate_after

    async def _place_many(
        self, key: str, obj: Obj, check: str, clusters: list[str], copies: dict[str, Obj]
    ) -> float | None:
        """Upstream's AllAtOnce and Incremental: ``many.choose_many`` decides."""
        record = self.records(key)
        allowed = self.allowed(obj)
        incremental = self.settings.dispatch_mode is DispatchMode.INCREMENTAL
        choice = many.choose_many(
            many.ManyFacts(
                now=time.monotonic(),
                usable=tuple(n for n in clusters if self.ineligible(obj, n, allowed) is None),
                has_copy=frozenset(copies),
                admitted=tuple(
                    (_admitted_at(c), name)
                    for name, c in copies.items()
                    if ws.is_admitted(c) and not ws.is_evicted(c)
                ),
                winner=record.winner,
                incremental=incremental,
                round=record.round,
                step=self.settings.incremental_step,
                round_timeout=self.settings.incremental_round_timeout,
            )
        )
        if choice.winner is not None:
            remote = self.registry.remote(choice.winner)
            if remote is None:
                return 1.0
            return await self.write.won(key, obj, check, remote, copies)
        record.round = choice.round
        if choice.send_to:
            spans.record(
                "manager",
                "dispatch",
                obj,
                attributes={
                    "kfed.dispatch.mode": str(self.settings.dispatch_mode),
                    "kfed.clusters": list(choice.send_to),
                },
            )
        # Each worker is a separate API server: the copies go out at once.
        remotes = [r for r in (self.registry.remote(n) for n in choice.send_to) if r is not None]
        await asyncio.gather(*(self.write.create_copy(r, obj) for r in remotes))
        await self.write.set_check(
            obj,
            check,
            "Pending",
            f"dispatched to {', '.join(choice.nominated) or 'no worker'}",
            nominated=sorted(choice.nominated),
        )
        if incremental:
            return 1.0
        return self.look.unblocked_in(key)
