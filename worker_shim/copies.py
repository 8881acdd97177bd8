"""The managers' copies on this worker, as fencing reads them: their Workloads and the jobs
made for them (every kind kfed places that this cluster serves), nothing else.

Fencing must not depend on the admitting controller: in a highly available shim only the
leader admits, but every replica fences (docs/operations.md), and a fence-only shim admits
nothing at all (upstream Kueue does). Both follow just these objects, selected by the
MultiKueue origin label every copy carries, so a standby's cost stays small.
"""

from __future__ import annotations

import asyncio
import logging

from manager.api import constants as C
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.jobkinds.informers import JobInformers
from manager.federation.workers.remoteobjects import FEDERATED_KINDS, KINDS_RECHECK_SECONDS
from manager.kube import discovery, errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.events import EventRecorder
from manager.kube.informer import Informer
from manager.kube.tasks import stop_tasks
from manager.telemetry.metrics import Metrics

log = logging.getLogger(__name__)

ORIGIN_SELECTOR = C.MULTIKUEUE_ORIGIN_LABEL
"""Objects that carry the origin label (of any manager): the managers' copies."""


class ManagerCopies:
    def __init__(self, api: KubeApi, *, metrics: Metrics, component: str) -> None:
        self.api = api
        self.metrics = metrics
        self.events = EventRecorder(
            api,
            component=component,
            on_written=metrics.event_written,
            on_dropped=metrics.event_dropped,
        )
        self.workloads = Informer(api, R.WORKLOADS, label_selector=ORIGIN_SELECTOR)
        self.job_kinds = JobInformers()
        # batch/v1 is always served: followed from the start, even before discovery answers.
        self.job_kinds.add(BATCH_JOB, Informer(api, R.JOBS, label_selector=ORIGIN_SELECTOR))
        self._tasks: list[asyncio.Task[None]] = []

    async def _follow_served_kinds(self) -> None:
        for kind in FEDERATED_KINDS:
            if kind in self.job_kinds:
                continue
            try:
                if not await discovery.serves(self.api, kind.resource):
                    continue
            except errors.KubeError as err:
                log.info("cannot tell whether %s is served yet: %s", kind.resource.kind, err)
                continue
            informer = Informer(self.api, kind.resource, label_selector=ORIGIN_SELECTOR)
            self.job_kinds.add(kind, informer)
            self._tasks.append(asyncio.create_task(informer.run(), name=f"copies/{kind}"))

    async def run(self) -> None:
        """Until cancelled. The kinds served are looked for before the Workloads are listed,
        so that once every informer has synced every job of a copy can be found; a kind whose
        CRD appears later (or that discovery could not tell yet) is followed from then on."""
        try:
            self._tasks.append(
                asyncio.create_task(self.job_kinds[BATCH_JOB].run(), name="copies/jobs")
            )
            await self._follow_served_kinds()
            self._tasks += [
                asyncio.create_task(self.workloads.run(), name="copies/workloads"),
                asyncio.create_task(self.events.run(), name="copies/events"),
            ]
            while True:
                await asyncio.sleep(KINDS_RECHECK_SECONDS)
                await self._follow_served_kinds()
        finally:
            await stop_tasks(self._tasks)
