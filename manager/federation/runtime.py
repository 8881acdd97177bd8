"""The manager's federation, wired: the manager cluster's own controllers (global queues),
the worker registry, the dispatcher and its loops (rescan of waiting workloads, garbage
collection, AdmissionCheck status), and the manager quotas that follow the workers
(``engine/managerquota.py``)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from manager.api import constants as C
from manager.api import dra, federated
from manager.api.view import at, items
from manager.controllers import conditions, devicecatalogue
from manager.controllers.runtime import ClusterController, run_workers
from manager.controllers.settings import ControllerSettings
from manager.federation.decisions import checkstatus, colocation
from manager.federation.engine.dispatch import Dispatcher
from manager.federation.engine.externalkinds import ExternalKinds
from manager.federation.engine.managerquota import ManagerQuota
from manager.federation.engine.statuswrites import StatusWrites
from manager.federation.settings import FederationSettings
from manager.federation.workers.registry import ClusterRegistry
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj
from manager.kube.tasks import stop_tasks
from manager.telemetry.metrics import Metrics

log = logging.getLogger(__name__)

RESCAN_PERIOD = 0.5
"""Seconds between rescans of the workloads waiting for capacity (and of the flavors each
worker offers together): at most one per period however many worker events came in."""
ADMISSION_CHECK_STATUS_PERIOD = 1.0
"""Seconds between looks at the AdmissionChecks' Active condition."""


class FederationController:
    def __init__(
        self,
        api: KubeApi,
        settings: FederationSettings | None = None,
        controller_settings: ControllerSettings | None = None,
        *,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings or FederationSettings()
        self.workers_seen = asyncio.Event()
        """Set once every worker had its first chance to connect and the core was told which
        flavors each offers (``colocation.py``): the manager admits nothing before."""
        self.manager = ClusterController(
            api, controller_settings, metrics=metrics, admit_after=self.workers_seen
        )
        self.metrics = self.manager.state.metrics
        self.status = StatusWrites(api, self.manager.state.events)
        # One monotonic clock for every timing of the federation: its workers' connections
        # and the dispatcher's reconcile.
        self.registry = ClusterRegistry(api, self.settings, status=self.status, clock=clock)
        self.dispatcher = Dispatcher(self.manager, self.registry, self.settings, clock=clock)
        self.external_kinds = ExternalKinds(
            self.settings.external_frameworks, self.manager.state, self.registry.kinds
        )
        """``multiKueue.externalFrameworks``: federated once found on the manager."""
        self.registry.listen(self.dispatcher)
        self.manager_quota = (
            ManagerQuota(self.manager.state, self.registry, self.status)
            if self.settings.manager_quota_automation
            else None
        )
        """Manager quotas that follow the workers (``quotaManagement: Automated``)."""
        self.manager.device_catalogue = self.device_catalogue
        self.ready = asyncio.Event()
        self._places: dict[str, colocation.Places] = {}
        self.manager.state.set_colocation(self.places)

    async def device_catalogue(self, slices: bool) -> dra.DeviceCatalogue:
        """What a charge reads of DRA (docs/dra.md): the DeviceClasses and ResourceSlices of
        every connected worker, as its device informers hold them (no request made): the
        devices are there, not on the manager. Waits until every worker had its first chance
        to connect, so that a job created at start-up is not charged without them."""
        await self.workers_seen.wait()
        parts: list[tuple[str, dra.DeviceCatalogue]] = []
        for remote in self.registry.active():
            found, _, classes = remote.device_objects()
            catalogue = dra.DeviceCatalogue(
                {c["metadata"]["name"]: c for c in classes}, found if slices else []
            )
            parts.append((remote.name, catalogue))
        return devicecatalogue.merged(parts)

    async def run(self) -> None:
        await self.external_kinds.find()  # before the manager runs its informers: it runs them
        tasks = [
            asyncio.create_task(self.manager.run(), name="manager-cluster"),
            asyncio.create_task(self.registry.run(), name="registry"),
            asyncio.create_task(self.external_kinds.run(), name="external-kinds"),
        ]
        try:
            await self.manager.synced.wait()
            await self.registry.synced.wait()
            self._refresh_places()
            self.workers_seen.set()
            tasks += [
                asyncio.create_task(
                    run_workers(
                        self.dispatcher.queue,
                        self.dispatcher.reconcile,
                        self.settings.dispatch_workers,
                    ),
                    name="dispatch",
                ),
                asyncio.create_task(self._rescan_loop(), name="rescan"),
                asyncio.create_task(self._gc_loop(), name="gc"),
                asyncio.create_task(
                    self._admission_check_status_loop(), name="admissioncheck-status"
                ),
            ]
            if self.manager_quota is not None:
                # After every worker had its first chance to connect: before, a worker not
                # connected yet would take its share away for nothing.
                tasks.append(asyncio.create_task(self.manager_quota.run(), name="manager-quota"))
            for key in list(self.manager.state.workloads.cache):
                self.dispatcher.queue.add(key)
            self.ready.set()
            await asyncio.gather(*tasks)
        finally:
            self.dispatcher.queue.close()
            await stop_tasks(tasks)

    async def _rescan_loop(self) -> None:
        while True:
            self.dispatcher.rescan()
            self._refresh_places()
            await asyncio.sleep(RESCAN_PERIOD)

    def places(self, cluster_queue: Obj) -> colocation.Places:
        """The flavors of a manager ClusterQueue each of its workers offers together (the
        admission core keeps a workload's flavors within one of them); ``()`` when it is not
        federated or no worker's queues are known yet."""
        name = str(cluster_queue["metadata"]["name"])
        found = self.dispatcher.federation_of(name)
        if found is None:
            return ()
        views = [
            self.dispatcher.worker_view(remote, order)
            for order, worker in enumerate(found[1])
            if (remote := self.registry.remote(worker)) is not None
        ]
        state = self.manager.state
        local_queues = [
            key
            for key, lq in state.local_queues.cache.items()
            if at(lq, "spec").get("clusterQueue") == name
        ]
        return colocation.places(cluster_queue, local_queues, views, state.flavors.cache)

    def _refresh_places(self) -> None:
        """Feed the ClusterQueues whose places changed (a worker's queues or flavors, a
        MultiKueueConfig, a LocalQueue) to the core again; unchanged ones cost a comparison."""
        changed = []
        for cq in self.manager.state.cluster_queues.items():
            name = str(cq["metadata"]["name"])
            now = self.places(cq)
            if self._places.get(name, ()) != now:
                self._places[name] = now
                changed.append(name)
        if changed:
            log.info("flavors each worker offers together, for %s: %s", changed, self._places)
            self.manager.state.refeed_cluster_queues(changed)

    async def _gc_loop(self) -> None:
        if self.settings.gc_interval <= 0:
            return
        while True:
            await asyncio.sleep(self.settings.gc_interval)
            try:
                removed = await self.dispatcher.collect_garbage()
                if removed:
                    log.info("garbage collection removed %d remote workloads", removed)
            except errors.KubeError as err:
                log.info("garbage collection: %s", err)
            except Exception:
                # A sweep is best effort and the next one starts over: a fault in one (once, a
                # closed connection's bare RuntimeError) must not end the whole federation.
                log.exception("garbage collection failed; trying again next sweep")

    async def _admission_check_status_loop(self) -> None:
        """AdmissionCheck Active condition for our controller name, as upstream reports it."""
        state = self.manager.state
        while True:
            for ac in state.admission_checks.items():
                if not federated.is_multikueue_check(ac):
                    continue
                config = federated.config_name(ac)
                names = self.registry.clusters_of_config(config) if config else []
                active, reason, message = checkstatus.check_active(
                    config,
                    bool(config) and self.registry.mk_configs.get(config) is not None,
                    names,
                    up={n for n in names if (r := self.registry.remote(n)) and r.connected},
                    registered=set(self.registry.clusters),
                )
                conds = list(items(ac, "status", "conditions"))
                if conditions.set_condition(conds, C.ACTIVE, active, reason, message):
                    await self.status.conditions(
                        R.ADMISSION_CHECKS, state.admission_checks, ac, conds
                    )
            await asyncio.sleep(ADMISSION_CHECK_STATUS_PERIOD)
