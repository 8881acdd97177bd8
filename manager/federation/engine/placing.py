"""The placement part of a workload's group read: what ``placement.place`` needs to place a
workload whose MultiKueue check is Pending, read from the informers and the record.

Capacity-aware: the copy already sent and how it stands there (``choosing.Placed``) and,
when a copy is to be sent (``placement.needs_choice``), every worker of its config
evaluated for it (eligibility, quota, devices). AllAtOnce / Incremental: the eligible
workers and the copies admitted (``many.ManyFacts``). Reads only; the applier writes. The
devices a workload needs and a worker has are read by devicereading.py.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import replace

from manager.api import constants as C
from manager.api import quantity
from manager.api.view import annotations_of, at, items
from manager.controllers import conditions
from manager.controllers import workloadstatus as ws
from manager.federation.decisions import (
    capacity,
    choosing,
    deviceneed,
    devices,
    eligibility,
    growth,
    many,
    placement,
    references,
    samename,
    topology,
)
from manager.federation.decisions.eligibility import WorkerEligibility
from manager.federation.engine.devicereading import DeviceReader
from manager.federation.engine.lookups import Lookups, foreign_reason
from manager.federation.engine.records import InFlight, Placement, ToldRefusals
from manager.federation.engine.topologyview import TopologyView
from manager.federation.settings import ALLOWED_CLUSTERS_ANNOTATION, DispatchMode
from manager.federation.workers.remote import RemoteCluster
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import Obj

log = logging.getLogger(__name__)


def _admitted_at(remote_wl: Obj) -> str:
    c = conditions.find(ws.status_of(remote_wl).get("conditions"), C.ADMITTED) or {}
    return str(c.get("lastTransitionTime", ""))


class PlacingReader:
    def __init__(self, look: Lookups, told: ToldRefusals, topology: TopologyView) -> None:
        self.look = look
        self.told = told
        self.topology = topology
        """TAS: each worker's domain trees, from its shim's report."""
        self.state = look.state
        self.registry = look.registry
        self.settings = look.settings
        self.records = look.records
        self.device_reader = DeviceReader(look.state)
        """Devices: the workloads' needs and the workers' devices (devicereading.py)."""

    # -- what the workload needs and where it may go ----------------------------------------

    def request(self, obj: Obj) -> capacity.Request:
        usage: dict[tuple[str, str], int] = {}
        for psa in items(obj, "status", "admission", "podSetAssignments"):
            flavors = psa.get("flavors") or {}
            for resource, value in (psa.get("resourceUsage") or {}).items():
                flavor = flavors.get(resource)
                if flavor:
                    fr = (flavor, resource)
                    usage[fr] = usage.get(fr, 0) + quantity.to_core_units(resource, value)
        return capacity.Request(
            obj["metadata"]["namespace"], str(at(obj, "spec").get("queueName", "")), usage
        )

    def allowed(self, obj: Obj) -> set[str] | None:
        job = self.look.manager_job(obj) or {}
        for source in (obj, job):
            value = annotations_of(source).get(ALLOWED_CLUSTERS_ANNOTATION)
            if value:
                return {c.strip() for c in value.split(",") if c.strip()}
        return None

    def worker_view(
        self, remote: RemoteCluster, order: int, without: Placement | None = None
    ) -> capacity.WorkerView:
        """The worker's queues and what is in flight to it; ``without``: the copy being
        withdrawn there, no longer counted (it is gone by the time the new one is sent)."""
        in_flight = self.records.in_flight(remote.name)
        if without is not None and without.cluster == remote.name:
            in_flight = InFlight(in_flight.waiting, dict(in_flight.usage))
            in_flight.add(without, -1)
        return capacity.WorkerView(
            name=remote.name,
            local_queues=remote.informers["localqueues"].cache,
            cluster_queues=remote.informers["clusterqueues"].cache,
            flavors=remote.informers["resourceflavors"].cache,
            in_flight=in_flight.usage,
            waiting=in_flight.waiting,
            order=order,
            grows=growth.grown_flavors(
                remote.informers["resourceflavors"].cache, remote.node_pools()
            ),
        )

    def ineligible(
        self,
        obj: Obj,
        name: str,
        allowed: set[str] | None,
        refusals: dict[str, str],
        foreign: dict[str, str] | None = None,
    ) -> capacity.Candidate | None:
        """Why no copy may go to worker ``name`` whatever its capacity (None: it may), the
        same in every dispatch mode and in ``kfed whatif`` (``eligibility.py``); a
        references refusal is added to ``refusals``. ``foreign``: workers found just now
        to hold a same-named Workload kfed did not create, blocked from now on."""
        facts = self.eligibility(obj, name, allowed)
        if foreign and name in foreign and facts.blocked is None:
            facts = replace(facts, blocked=foreign[name])
        if facts.references_refusal is not None:
            refusals[name] = facts.references_refusal
        return eligibility.refusal(facts)

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
            # Asked only where it decides: a refusal is told by an Event, once (the applier).
            references_refusal=self.references_refusal(obj, name) if permitted and bound else None,
            connected=remote is not None and remote.connected,
            kind=f"{res.kind} ({res.api_version})",
            serves_kind=remote is not None and remote.serves(self.look.kind_of(obj)),
            blocked=self.look.blocked_reason(ws.key_of(obj), name),
            maintenance=self.look.maintenance(name),
        )

    def references_refusal(self, obj: Obj, name: str) -> str | None:
        """Why the worker's ``kfed.io/allowed-references`` keeps this workload away (None:
        it does not)."""
        policy = references.policy_of(self.registry.mk_clusters.get(name))
        if policy is None:
            return None
        namespace = str(obj["metadata"].get("namespace") or "")
        used = references.of_objects(namespace, (obj, self.look.manager_job(obj)))
        return references.refusal(policy, used, namespace=namespace, worker=name)

    def candidates(
        self,
        obj: Obj,
        clusters: list[str],
        need: deviceneed.Need | None = None,
        *,
        without: Placement | None = None,
        refusals: dict[str, str] | None = None,
        foreign: dict[str, str] | None = None,
    ) -> list[capacity.Candidate]:
        """Every worker of the config, evaluated for this workload: quota, then (for a
        workload that claims devices, ``need``) whether every pod gets its devices on one
        node there."""
        request = self.request(obj)
        allowed = self.allowed(obj)
        tas_need = topology.need_of(obj)
        result = []
        for order, name in enumerate(clusters):
            said = {} if refusals is None else refusals
            refused = self.ineligible(obj, name, allowed, said, foreign)
            remote = self.registry.remote(name)
            if refused is not None or remote is None:
                result.append(refused or capacity.Candidate(name, False, "not connected"))
                continue
            candidate = capacity.evaluate(
                self.worker_view(remote, order, without), request, self.state.flavors.cache
            )
            if need:
                candidate = devices.evaluate(
                    candidate,
                    self.device_reader.worker_devices(remote),
                    need,
                    serves=remote.serves_devices,
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
        for _, sent in self.records.placements():
            if sent.cluster == worker and sent.topology:
                topology.add_held(held, sent.topology)
        return held

    def _expected_topology(
        self, obj: Obj, candidates: list[capacity.Candidate]
    ) -> dict[str, topology.Held]:
        """TAS: for each worker that fits, what a copy sent there would take of its domains
        ({} for a workload that asks for no topology)."""
        need = topology.need_of(obj)
        if not need:
            return {}
        expected = {}
        for candidate in candidates:
            remote = self.registry.remote(candidate.cluster)
            if candidate.fits and remote is not None:
                trees = self.topology.of(remote)
                expected[candidate.cluster] = topology.expected(trees, need, candidate.flavors)
        return expected

    # -- the facts ---------------------------------------------------------------------

    async def read(
        self, key: str, obj: Obj, clusters: list[str], copies: dict[str, Obj], now: float
    ) -> placement.PlacingFacts:
        """What ``placement.place`` needs about the workload ``key``, read now."""
        settings = self.settings
        refusals: dict[str, str] = {}
        record = self.records.get(key)
        taken = await self._copies_taken(obj, sorted(record.copy_taken) if record else [])
        foreign = {cluster: who for cluster, who in taken if who}
        facts = placement.PlacingFacts(
            now,
            settings.dispatch_mode,
            unblocked_in=self.look.unblocked_in(key),
            admission_timeout=settings.admission_timeout,
            nominate_after=settings.nominate_after,
            copies_taken=taken,
            foreign_object_recheck=settings.foreign_object_recheck,
        )
        if settings.dispatch_mode is not DispatchMode.CAPACITY_AWARE:
            allowed = self.allowed(obj)
            usable = tuple(
                n for n in clusters if self.ineligible(obj, n, allowed, refusals, foreign) is None
            )
            holding = set(copies) | ({record.winner} if record and record.winner else set())
            facts = replace(
                facts,
                many=many.ManyFacts(
                    now=now,
                    usable=usable,
                    has_copy=frozenset(copies),
                    admitted=tuple(
                        (_admitted_at(c), name)
                        for name, c in copies.items()
                        if ws.is_admitted(c) and not ws.is_evicted(c)
                    ),
                    winner=record.winner if record else None,
                    incremental=settings.dispatch_mode is DispatchMode.INCREMENTAL,
                    round=record.round if record else None,
                    step=settings.incremental_step,
                    round_timeout=settings.incremental_round_timeout,
                ),
                reachable=frozenset(n for n in holding if self.registry.remote(n) is not None),
            )
            return replace(facts, untold_refusals=self._untold(obj, refusals))
        sent_record = record.placement if record is not None else None
        sent = self._sent(obj, sent_record, copies, now)
        if sent is not None and sent.placed.cluster in foreign:
            sent = replace(sent, foreign=foreign[sent.placed.cluster])
        if placement.needs_choice(sent, now):
            need = await self.device_reader.device_need(obj)
            candidates = self.candidates(
                obj, clusters, need, without=sent_record, refusals=refusals, foreign=foreign
            )
            facts = replace(
                facts,
                usage=self.request(obj).usage,
                choosing=choosing.ChoosingFacts(
                    now=now,
                    candidates=tuple(candidates),
                    tried=frozenset(record.tried) if record else frozenset(),
                    unplaceable_since=record.unplaceable_since if record else None,
                    dispatch_deadline=settings.dispatch_deadline,
                    unblocked_in=facts.unblocked_in,
                ),
                expected_topology=self._expected_topology(obj, candidates),
            )
        return replace(facts, sent=sent, untold_refusals=self._untold(obj, refusals))

    async def _copies_taken(self, obj: Obj, clusters: list[str]) -> tuple[tuple[str, str], ...]:
        """(worker, who made it: "" when ours or gone) of each worker where creating its copy
        met AlreadyExists. Fresh: the Workload informer shows ours only; whose is it?"""
        found = []
        meta = obj["metadata"]
        for cluster in clusters:
            remote = self.registry.remote(cluster)
            existing = None
            if remote is not None:
                with contextlib.suppress(errors.NotFound):
                    existing = await remote.api.get(R.WORKLOADS, meta["name"], meta["namespace"])
            origin = self.settings.origin
            whose = samename.judge(existing, origin=origin, workload_name=None)
            if whose is samename.SameName.FOREIGN and existing is not None:
                found.append((cluster, foreign_reason("Workload", existing)))
            else:
                found.append((cluster, ""))
        return tuple(found)

    def _sent(
        self, obj: Obj, sent: Placement | None, copies: dict[str, Obj], now: float
    ) -> placement.Sent | None:
        if sent is not None:
            placed = self.placed(sent.cluster, sent.deadline, copies.get(sent.cluster), obj, now)
            return placement.Sent(placed, False, sent.nominate_at, sent.waiting_message)
        if copies:
            # After a restart: a copy already exists; follow it.
            cluster = sorted(copies)[0]
            deadline = now + self.settings.admission_timeout
            return placement.Sent(self.placed(cluster, deadline, copies[cluster], obj, now), True)
        return None

    def placed(
        self, cluster: str, deadline: float, copy_: Obj | None, obj: Obj, now: float
    ) -> choosing.Placed:
        """The facts ``choosing.judge_placement`` needs about the worker a copy went to."""
        remote = self.registry.remote(cluster)
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
            may_move_in = self.look.may_move_at(remote, obj) - now
        return choosing.Placed(cluster, deadline, reachable, state, may_move_in)

    def _untold(self, obj: Obj, refusals: dict[str, str]) -> tuple[tuple[str, str], ...]:
        """The references refusals found in this read that were not told yet."""
        who = ToldRefusals.who(obj)
        return tuple((w, r) for w, r in refusals.items() if self.told.said(who, w) != r)
