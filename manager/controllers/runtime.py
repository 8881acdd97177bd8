"""One cluster's controllers, wired: informers -> core -> scheduling loop, the Workload and
Job controllers with their work queues, and the queue status writer.

``ClusterController.run()`` lists everything first (``synced``), then rebuilds the core from
the Workloads that already hold quota (so a restart never admits anything twice) and only
then starts scheduling.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from manager.api import dra
from manager.controllers import devicecatalogue
from manager.controllers.admission import AdmissionLoop
from manager.controllers.jobkinds import registry as jobkinds
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.jobs import JobController
from manager.controllers.queuestatus import QueueStatusWriter
from manager.controllers.settings import ControllerSettings
from manager.controllers.state import ClusterState
from manager.controllers.topologyungater import TopologyUngater
from manager.controllers.workloads import WorkloadController
from manager.kube import discovery, errors
from manager.kube.api import KubeApi
from manager.kube.events import EventRecorder, EventSettings
from manager.kube.tasks import stop_tasks
from manager.kube.workqueue import QueueClosed, WorkQueue
from manager.telemetry.metrics import Metrics

log = logging.getLogger(__name__)

Reconcile = Callable[[str], Awaitable[float | None]]

EVENT_COMPONENTS = {"manager": "kfed-manager", "worker": "kfed-worker-shim"}
"""Who reports the Events this cluster's controllers write (``source.component``,
``reportingComponent``; the instance is the host name): ``kubectl describe`` shows it as
"From"."""


async def run_workers(queue: WorkQueue, reconcile: Reconcile, count: int) -> None:
    """``count`` workers taking keys off ``queue``; a failed reconcile is retried with the
    key's own backoff, a successful one may ask to be looked at again later."""

    async def worker() -> None:
        while True:
            try:
                key = await queue.get()
            except QueueClosed:
                return
            try:
                again = await reconcile(key)
            except (errors.KubeError, TimeoutError) as err:
                delay = queue.retry(key)
                log.info("%s %s: %s; retrying in %.2fs", queue.name, key, err, delay)
            except Exception:
                delay = queue.retry(key)
                log.exception("%s %s failed; retrying in %.2fs", queue.name, key, delay)
            else:
                queue.forget(key)
                if again is not None:
                    queue.add_after(key, again)
            finally:
                queue.done(key)

    await asyncio.gather(*(worker() for _ in range(count)))


class ClusterController:
    def __init__(
        self,
        api: KubeApi,
        settings: ControllerSettings | None = None,
        *,
        metrics: Metrics | None = None,
        admit_after: asyncio.Event | None = None,
    ) -> None:
        self.settings = settings or ControllerSettings()
        self.state = ClusterState(
            api,
            metrics=metrics,
            fair_sharing=self.settings.fair_sharing,
            topology_aware=self.settings.topology_aware,
            unadmitted_workloads_observability=self.settings.unadmitted_workloads_observability,
        )
        self.admit_after = admit_after
        """Set when the core knows enough to admit (kfed's manager: once it has seen its
        workers, whose flavors decide which flavors a workload may get together); None: at
        once."""
        self.state.events = EventRecorder(
            api if self.settings.event_qps > 0 else None,
            component=EVENT_COMPONENTS.get(self.settings.role, f"kfed-{self.settings.role}"),
            settings=EventSettings(
                global_qps=self.settings.event_qps, global_burst=self.settings.event_burst
            ),
            on_written=self.state.metrics.event_written,
            on_dropped=self.state.metrics.event_dropped,
        )
        self.admission = AdmissionLoop(self.state, self.settings)
        self.workloads = WorkloadController(self.state, self.admission, self.settings)
        self.admission.resync = self.workloads.queue.add
        self.device_catalogue: devicecatalogue.CatalogueSource = self._own_devices
        """Where a charge reads DeviceClasses and ResourceSlices: this cluster's own; kfed's
        manager installs its workers' (``FederationController``)."""
        self.jobs = JobController(
            self.state,
            role=self.settings.role,
            device_class_mappings=self.settings.device_class_mappings,
            device_catalogue=self._devices,
        )
        """The batch/v1 Job controller (always on)."""
        self.job_controllers = [self.jobs]
        self._kinds_to_find = [
            k for k in jobkinds.parse(self.settings.integrations) if k is not BATCH_JOB
        ]
        """Kinds asked for whose CRD is not served yet."""
        self._late_tasks: list[asyncio.Task[None]] = []
        self.queue_status = QueueStatusWriter(self.state, self.settings.status_period)
        self.ungater = (
            TopologyUngater(self.state, self.state.pods) if self.state.pods is not None else None
        )
        """Gives each pod of a pod set placed by topology its domain (TAS only)."""
        self.synced = asyncio.Event()

    async def _own_devices(self, slices: bool) -> dra.DeviceCatalogue:
        return await devicecatalogue.of_cluster(self.state.api, slices)

    async def _devices(self, slices: bool) -> dra.DeviceCatalogue:
        return await self.device_catalogue(slices)

    async def _admit(self) -> None:
        if self.admit_after is not None:
            await self.admit_after.wait()
        await self.admission.run()

    async def _served_kinds(self) -> list[JobKind]:
        """The kinds still to find whose CRD is served now (one discovery read each)."""
        found = []
        for kind in list(self._kinds_to_find):
            try:
                if await discovery.serves(self.state.api, kind.resource):
                    found.append(kind)
            except errors.KubeError as err:
                log.info("cannot tell whether %s is served yet: %s", kind.resource.kind, err)
        return found

    def _enable(self, kind: JobKind) -> JobController:
        self._kinds_to_find.remove(kind)
        jobs = self.state.add_job_kind(kind)
        controller = JobController(
            self.state,
            role=self.settings.role,
            kind=kind,
            jobs=jobs,
            device_class_mappings=self.settings.device_class_mappings,
            device_catalogue=self._devices,
        )
        self.job_controllers.append(controller)
        log.info("queueing %s (%s)", kind.resource.kind, kind.resource.api_version)
        return controller

    def _workers_of(self, controller: JobController) -> asyncio.Task[None]:
        return asyncio.create_task(
            run_workers(controller.queue, controller.reconcile, self.settings.workers),
            name=repr(controller),
        )

    async def _find_kinds_later(self) -> None:
        """A kind whose CRD is installed after the start is queued from then on."""
        while self._kinds_to_find:
            await asyncio.sleep(self.settings.job_kind_discovery_seconds)
            for kind in await self._served_kinds():
                controller = self._enable(kind)
                jobs = self.state.job_kinds[kind]
                self._late_tasks.append(asyncio.create_task(jobs.run(), name=repr(jobs)))
                self._late_tasks.append(self._workers_of(controller))

    async def run(self) -> None:
        for kind in await self._served_kinds():
            self._enable(kind)
        tasks = [asyncio.create_task(i.run(), name=repr(i)) for i in self.state.informers]
        try:
            await asyncio.gather(*(i.synced.wait() for i in self.state.informers))
            # Reconcile every workload once before the first cycle: this re-registers the
            # reservations that exist in the API (restart) so the core never admits twice.
            for key in list(self.state.workloads.cache):
                await self.workloads.reconcile(key)
            self.synced.set()
            log.info("cluster controller synced: %d workloads", len(self.state.workloads.cache))
            tasks += [
                asyncio.create_task(self._admit(), name="admission"),
                asyncio.create_task(
                    run_workers(
                        self.workloads.queue, self.workloads.reconcile, self.settings.workers
                    ),
                    name="workloads",
                ),
                *(self._workers_of(c) for c in self.job_controllers),
                asyncio.create_task(self.queue_status.run(), name="queue-status"),
                asyncio.create_task(self.state.events.run(), name="events"),
                asyncio.create_task(self._find_kinds_later(), name="job-kinds"),
            ]
            if self.ungater is not None:
                tasks.append(
                    asyncio.create_task(
                        run_workers(self.ungater.queue, self.ungater.reconcile, 4),
                        name="topology-ungater",
                    )
                )
            self.state.kick()
            await asyncio.gather(*tasks)
        finally:
            self.workloads.queue.close()
            if self.ungater is not None:
                self.ungater.queue.close()
            for controller in self.job_controllers:
                controller.queue.close()
            await stop_tasks(tasks + self._late_tasks)
