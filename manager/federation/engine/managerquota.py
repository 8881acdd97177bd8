"""The loop that keeps automated manager quotas equal to their workers' (upstream's
MultiKueue ``cqReconciler`` with ``MultiKueueManagerQuotaAutomation``): the rule is
``decisions/managerquota.py``; here its inputs are read from the informers the manager
already runs (its ClusterQueues, LocalQueues and AdmissionChecks; the registry's
MultiKueueConfigs and MultiKueueClusters; each worker's ClusterQueues and LocalQueues), and
its decisions are written through the federation's door for writes besides a workload's
(``statuswrites.py``): the ClusterQueue's ``spec.resourceGroups`` and its
``MultiKueueManagerQuotaAutomation`` condition.

No watch of its own: those informers list again on 410 Gone and reconnect with backoff. A
pass runs when any of them changes (at most one per ``batch_period``, however many changes
came in) and every ``resync_period`` besides. Each write carries the resourceVersion it was
decided from, so a concurrent change is never overwritten: a conflict (or any failure) is
decided again from fresh objects after a jittered, capped backoff. A quota written reaches
the admission core as every spec change does, through the ClusterQueue informer's event.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from manager.api import federated
from manager.api.view import at, items
from manager.controllers import conditions
from manager.controllers.state import ClusterState
from manager.federation.decisions import managerquota as mq
from manager.federation.engine.statuswrites import StatusWrites
from manager.federation.workers.registry import ClusterRegistry
from manager.federation.workers.remote import RemoteCluster
from manager.kube import resources as R
from manager.kube.api import Obj
from manager.kube.backoff import Backoff
from manager.kube.informer import Event
from manager.kube.tasks import wait_event

log = logging.getLogger(__name__)

BATCH_PERIOD = 0.25
"""Seconds a pass waits after a change for the changes that come with it (upstream's
``eventsBatchPeriod`` plays this part)."""
RESYNC_PERIOD = 30.0
"""Seconds between passes when nothing changed: a missed event costs at most this."""


class ManagerQuota:
    """Follows every manager ClusterQueue; writes only where the decision differs from what
    is there. Also a ``WorkerListener``: the registry tells it about the workers."""

    def __init__(
        self,
        state: ClusterState,
        registry: ClusterRegistry,
        status: StatusWrites,
        *,
        batch_period: float = BATCH_PERIOD,
        resync_period: float = RESYNC_PERIOD,
    ) -> None:
        self.state = state
        self.registry = registry
        self.status = status
        """The door of the federation's writes besides a workload's (``statuswrites.py``)."""
        self.batch_period = batch_period
        self.resync_period = resync_period
        self._dirty = asyncio.Event()
        self._dirty.set()  # the first pass runs at once
        self.passes = 0
        """Passes made."""
        self._workers: dict[str, mq.WorkerQueues] | None = None
        """The workers as read in the current pass (None between passes)."""
        for informer in (state.cluster_queues, state.local_queues, state.admission_checks):
            informer.subscribe(self._on_event)
        registry.listen(self)

    # -- WorkerListener ----------------------------------------------------------------

    def attach(self, remote: RemoteCluster) -> None:
        self._dirty.set()

    async def recover(self, remote: RemoteCluster) -> None:
        self._dirty.set()

    def capacity_changed(self) -> None:
        """A worker's queues, a MultiKueueConfig, or the set of workers changed."""
        self._dirty.set()

    def connectivity_changed(self, remote: RemoteCluster) -> None:
        self._dirty.set()

    def maintenance_changed(self, cluster: str) -> None:
        self._dirty.set()

    def _on_event(self, event: Event) -> None:
        self._dirty.set()

    # -- reading -----------------------------------------------------------------------

    def worker(self, name: str) -> mq.WorkerQueues:
        """One worker of a config as the informers hold it (not connected when unknown)."""
        remote = self.registry.remote(name)
        if remote is None or not remote.connected:
            return mq.WorkerQueues(name, connected=False)
        local_queues = {
            key: str(at(lq, "spec").get("clusterQueue") or "")
            for key, lq in remote.informers["localqueues"].cache.items()
        }
        return mq.WorkerQueues(
            name,
            connected=True,
            maintenance=federated.maintenance_of(self.registry.mk_clusters.get(name)),
            local_queues=local_queues,
            cluster_queues=remote.informers["clusterqueues"].cache,
        )

    def _worker_in_pass(self, name: str) -> mq.WorkerQueues:
        if self._workers is None:
            return self.worker(name)
        found = self._workers.get(name)
        if found is None:
            found = self._workers[name] = self.worker(name)
        return found

    def decide(self, cluster_queue: Obj) -> mq.Decision:
        name = str(cluster_queue["metadata"]["name"])
        found = federated.federation_of(
            cluster_queue, self.state.admission_checks.get, self.registry.mk_configs.get
        )
        if found is None:
            return mq.decide(
                cluster_queue, federated=False, config=None, local_queues=(), workers=()
            )
        config = self.registry.mk_configs.get(found.config) if found.config else None
        if config is None or at(config, "spec").get("quotaManagement") != mq.AUTOMATED:
            # Nothing to sum: the decision needs neither queues nor workers.
            return mq.decide(
                cluster_queue, federated=True, config=config, local_queues=(), workers=()
            )
        local_queues = [
            key
            for key, lq in self.state.local_queues.cache.items()
            if at(lq, "spec").get("clusterQueue") == name
        ]
        workers = [self._worker_in_pass(str(c)) for c in items(config, "spec", "clusters")]
        return mq.decide(
            cluster_queue,
            federated=True,
            config=config,
            local_queues=local_queues,
            workers=workers,
        )

    # -- writing -----------------------------------------------------------------------

    async def reconcile(self, cluster_queue: Obj) -> bool:
        """Make one ClusterQueue as decided; False when a write failed (decided again)."""
        decision = self.decide(cluster_queue)
        name = str(cluster_queue["metadata"]["name"])
        obj = cluster_queue
        if decision.resource_groups is not None:
            log.info(
                "ClusterQueue %s: nominal quota from workers %s: %s",
                name,
                ", ".join(decision.counted) or "(none)",
                {r: str(q) for r, q in decision.totals.items()},
            )
            written = await self.status.cluster_queue_quota(obj, decision.resource_groups)
            if written is None:
                return False
            obj = written
        conds = [dict(c) for c in items(obj, "status", "conditions")]
        if not _condition_changes(conds, decision.condition, obj):
            return True
        done = await self.status.conditions(
            R.CLUSTER_QUEUES, self.state.cluster_queues, obj, conds, only_over_read=True
        )
        return done is not None

    async def reconcile_all(self) -> bool:
        """One pass over every manager ClusterQueue; False when some write failed. Each
        worker is read once per pass, however many ClusterQueues its configs serve."""
        self._workers = {}
        try:
            results = [await self.reconcile(cq) for cq in self.state.cluster_queues.items()]
        finally:
            self._workers = None
        self.passes += 1
        return all(results)

    async def run(self) -> None:
        backoff = Backoff(initial=self.batch_period, cap=10.0)
        while True:
            await wait_event(self._dirty, timeout=self.resync_period)
            self._dirty.clear()
            if await self.reconcile_all():
                backoff.reset()
                await asyncio.sleep(self.batch_period)
            else:
                self._dirty.set()
                await asyncio.sleep(backoff.next_delay())


def _condition_changes(conds: list[dict[str, Any]], wanted: mq.Condition | None, obj: Obj) -> bool:
    """Edit ``conds`` to hold ``wanted`` (None: no such condition); True when it changed.
    As upstream, a condition of the same status, reason and message is left as it is."""
    if wanted is None:
        return conditions.remove(conds, mq.CONDITION)
    existing = conditions.find(conds, mq.CONDITION)
    if existing is not None and _same(existing, wanted):
        return False
    generation = obj["metadata"].get("generation")
    return conditions.set_condition(
        conds,
        mq.CONDITION,
        wanted.status,
        wanted.reason,
        wanted.message,
        generation=generation if isinstance(generation, int) else None,
    )


def _same(existing: Mapping[str, Any], wanted: mq.Condition) -> bool:
    return (
        existing.get("status") == ("True" if wanted.status else "False")
        and existing.get("reason") == wanted.reason
        and existing.get("message") == wanted.message
    )
