"""The federation's writes besides a workload's, through one door: the Active condition of
each MultiKueueCluster (the registry's verdict on its connection) and of each MultiKueue
AdmissionCheck (``checkstatus.check_active``), and the Events that tell a worker's changes.
Each write is the status conditions as decided; a failed one is logged and made again on
the next pass."""

from __future__ import annotations

import logging

from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj
from manager.kube.events import EventRecorder
from manager.kube.informer import Informer

log = logging.getLogger(__name__)


class StatusWrites:
    def __init__(self, api: KubeApi, events: EventRecorder) -> None:
        self.api = api
        self.events = events
        """The manager's recorder, which the Events below go through (and whose writer
        runs with the manager's)."""

    # -- Events: what changed, told on the object (an EventSink) ------------------------

    def normal(self, obj: Obj, reason: str, message: str) -> None:
        self.events.normal(obj, reason, message)

    def warning(self, obj: Obj, reason: str, message: str) -> None:
        self.events.warning(obj, reason, message)

    async def conditions(
        self, res: R.Resource, informer: Informer, obj: Obj, conds: list[Obj]
    ) -> Obj | None:
        """Write ``conds`` as the status conditions of the cluster-scoped ``obj`` (a
        MultiKueueCluster or an AdmissionCheck); the object as written (None: not written)."""
        name = obj["metadata"]["name"]
        try:
            written = await self.api.patch(
                res, name, {"status": {"conditions": conds}}, subresource="status"
            )
        except errors.KubeError as err:
            log.info("status of %s %s not written: %s", res.kind, name, err)
            return None
        informer.remember_written(name, obj, written)
        return written
