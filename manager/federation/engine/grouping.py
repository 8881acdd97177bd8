"""Reads a workload's ``WorkloadGroup`` (``group.py``) from the informers and the
dispatcher's record: the dispatcher's one read per reconcile. What the workload's step needs
besides is read here too: to be placed, its placement facts (``placing.PlacingReader``); a
copy that may win, the winner's facts; followed or finished, its job there and the
manager's; its copies to go, which ended unseen (``runreading.RunReader``: the fresh reads
never-twice needs, each named with its reason)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from manager.controllers import workloadstatus as ws
from manager.federation.decisions import checkstatus, routing
from manager.federation.decisions.group import WorkloadGroup
from manager.federation.engine.lookups import Lookups
from manager.federation.engine.placing import PlacingReader
from manager.federation.engine.retaining import Retaining, ran_on
from manager.federation.engine.runreading import RunReader
from manager.federation.workers.registry import ClusterRegistry

Obj = dict[str, Any]


class GroupReader:
    """Reads a ``WorkloadGroup`` from the informers (and the dispatcher's record)."""

    def __init__(
        self,
        look: Lookups,
        registry: ClusterRegistry,
        retaining: Retaining,
        placing: PlacingReader,
        runs: RunReader,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.look = look
        self.registry = registry
        self.retaining = retaining
        self.placing = placing
        self.runs = runs
        self.clock = clock

    async def read(self, key: str) -> WorkloadGroup:
        """The group of ``key``: from the informers, and what its step needs besides."""
        group = self._read(key)
        obj, step = group.workload, routing.route(group.facts).step
        match step:
            case routing.Step.CLEAN_UP | routing.Step.RETAIN | routing.Step.STOP:
                holders = self.runs.holders(key)
                live = obj is not None and not ws.is_finished(obj)
                ended = await self.runs.ended_unseen(key, holders) if live else frozenset()
                return replace(group, holders=holders, ended_unseen=ended)
            case routing.Step.FOLLOW if obj is not None and group.placed_on is not None:
                return replace(group, sync=self.runs.sync(group.placed_on.name, obj))
            case routing.Step.RECORD_FINISHED if obj is not None and group.finished_copy:
                cluster, copy_ = group.finished_copy
                sync = self.runs.sync(cluster, obj)
                run_end = self.runs.run_end(cluster, obj, copy_)
                return replace(group, sync=sync, run_end=run_end)
        if obj is None or step not in (routing.Step.WIN, routing.Step.PLACE):
            return group
        now = self.clock()
        ended_on = group.finished_copy[0] if group.finished_copy else ""
        wins = await self.runs.wins(key, obj, dict(group.copies), now, ended_on)
        if step is routing.Step.WIN:
            return replace(group, wins=wins)
        # Only a workload to be placed: evaluating the workers is the costly part of a read.
        placing = await self.placing.read(key, obj, list(group.workers), dict(group.copies), now)
        return replace(group, wins=wins, placing=placing)

    def _read(self, key: str) -> WorkloadGroup:
        obj = self.look.state.workloads.get(key)
        if obj is None:
            return WorkloadGroup(key)
        federation = self.look.multikueue_check(obj)
        if federation is None:
            return WorkloadGroup(key, obj, facts=routing.WorkloadFacts(federated=False))
        check, workers = federation
        copies = self.look.copies(key)
        done = self.look.finished_copy(key, copies)
        state = checkstatus.check_state(obj, check)[0]
        cluster = str(ws.status_of(obj).get("clusterName") or "")
        return WorkloadGroup(
            key,
            obj,
            check,
            tuple(workers),
            copies,
            done,
            self._facts(obj, state, done, copies),
            self.look.worker_facts(cluster, obj) if state == "Ready" else None,
            ran_on(obj) if ws.is_finished(obj) else "",
        )

    def _facts(
        self, obj: Obj, check_state: str, done: tuple[str, Obj] | None, copies: dict[str, Obj]
    ) -> routing.WorkloadFacts:
        rejection = self.look.no_adapter(obj)
        if rejection is None and (unmanaged := self.look.not_managed_by_multikueue(obj)):
            rejection = f"The owner is not managed by Kueue: {unmanaged}"
        return routing.WorkloadFacts(
            check_state=check_state,
            holds_quota=ws.has_reservation(obj),
            finished=ws.is_finished(obj),
            deleting=bool(obj["metadata"].get("deletionTimestamp")),
            evicted=ws.is_evicted(obj),
            finished_copy=done is not None,
            finished_copy_worker_known=done is not None
            and self.registry.remote(done[0]) is not None,
            rejection=rejection,
            retention_left=self._retention_left(obj, copies),
        )

    def _retention_left(self, obj: Obj, copies: dict[str, Obj]) -> float:
        """Seconds the finished run's objects still stay on the worker it ran on: only when
        its copy there ran and ended (a copy that never ran is not kept)."""
        if not ws.is_finished(obj):
            return 0.0
        cluster = ran_on(obj)
        remote = self.registry.remote(cluster) if cluster else None
        copy_ = copies.get(cluster)
        if remote is None or copy_ is None:
            return 0.0
        if not self.look.ended_there(remote, ws.key_of(obj), copy_):
            return 0.0
        return self.retaining.left(obj)
