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

from manager.controllers.admission import AdmissionLoop
from manager.controllers.jobs import JobController
from manager.controllers.queuestatus import QueueStatusWriter
from manager.controllers.settings import ControllerSettings
from manager.controllers.state import ClusterState
from manager.controllers.workloads import WorkloadController
from manager.kube import errors
from manager.kube.api import KubeApi
from manager.kube.tasks import stop_tasks
from manager.kube.workqueue import QueueClosed, WorkQueue
from manager.telemetry.metrics import Metrics

log = logging.getLogger(__name__)

Reconcile = Callable[[str], Awaitable[float | None]]


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
    ) -> None:
        self.settings = settings or ControllerSettings()
        self.state = ClusterState(api, metrics=metrics, fair_sharing=self.settings.fair_sharing)
        self.admission = AdmissionLoop(self.state, self.settings)
        self.workloads = WorkloadController(self.state, self.admission, self.settings)
        self.admission.resync = self.workloads.queue.add
        self.jobs = JobController(self.state, role=self.settings.role)
        self.queue_status = QueueStatusWriter(self.state, self.settings.status_period)
        self.synced = asyncio.Event()

    async def run(self) -> None:
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
                asyncio.create_task(self.admission.run(), name="admission"),
                asyncio.create_task(
                    run_workers(
                        self.workloads.queue, self.workloads.reconcile, self.settings.workers
                    ),
                    name="workloads",
                ),
                asyncio.create_task(
                    run_workers(self.jobs.queue, self.jobs.reconcile, self.settings.workers),
                    name="jobs",
                ),
                asyncio.create_task(self.queue_status.run(), name="queue-status"),
            ]
            self.state.kick()
            await asyncio.gather(*tasks)
        finally:
            self.workloads.queue.close()
            self.jobs.queue.close()
            await stop_tasks(tasks)
