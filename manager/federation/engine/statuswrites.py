"""The federation's writes besides a workload's, through one door: the Active condition of
each MultiKueueCluster (the registry's verdict on its connection) and of each MultiKueue
AdmissionCheck (``checkstatus.check_active``), a manager ClusterQueue's quota and condition
when its quota follows the workers (``managerquota.py``), and the Events that tell a worker's
changes.
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
        self,
        res: R.Resource,
        informer: Informer,
        obj: Obj,
        conds: list[Obj],
        *,
        only_over_read: bool = False,
    ) -> Obj | None:
        """Write ``conds`` as the status conditions of the cluster-scoped ``obj`` (a
        MultiKueueCluster, an AdmissionCheck, or a ClusterQueue's quota automation); the
        object as written (None: not written). ``only_over_read``: only over the version
        ``obj`` is (a conflict otherwise), for conditions others write beside ours."""
        name = obj["metadata"]["name"]
        patch: Obj = {"status": {"conditions": conds}}
        if only_over_read:
            patch["metadata"] = {"resourceVersion": obj["metadata"].get("resourceVersion")}
        try:
            written = await self.api.patch(res, name, patch, subresource="status")
        except errors.KubeError as err:
            log.info("status of %s %s not written: %s", res.kind, name, err)
            return None
        informer.remember_written(name, obj, written)
        return written

    async def cluster_queue_quota(self, obj: Obj, resource_groups: list[Obj]) -> Obj | None:
        """Write a manager ClusterQueue's ``spec.resourceGroups`` as its quota automation
        decided them (``managerquota.py``), only over the version they were decided from; the
        object as written (None: not written). Not put in the informer ahead of its watch
        event: the admission core takes a spec change from that event, which would then look
        like a status change and be dropped, leaving the core on the old quota."""
        name = obj["metadata"]["name"]
        patch = {
            "metadata": {"resourceVersion": obj["metadata"].get("resourceVersion")},
            "spec": {"resourceGroups": resource_groups},
        }
        try:
            written: Obj = await self.api.patch(R.CLUSTER_QUEUES, name, patch)
        except errors.KubeError as err:
            log.info("quota of ClusterQueue %s not written: %s", name, err)
            return None
        return written
