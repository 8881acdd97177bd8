"""The external frameworks the manager federates (``multiKueue.externalFrameworks``,
``jobkinds/external.py``): each is found by discovery on the manager (its resource's plural
name comes from there; its CRD must be installed on the manager as on the workers), then
followed there and federated, at start and, for a CRD installed later, within
``KINDS_RECHECK_SECONDS``, without a restart."""

from __future__ import annotations

import asyncio
import logging

from manager.api.externalframeworks import GroupVersionKind, parse_gvk
from manager.api.view import at, items
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.base import JobKind, Obj
from manager.controllers.jobkinds.external import ExternalKind, check_federated, resource_from
from manager.controllers.state import ClusterState
from manager.federation.workers.remoteobjects import KINDS_RECHECK_SECONDS
from manager.kube import errors
from manager.kube.informer import Informer
from manager.kube.tasks import stop_tasks

log = logging.getLogger(__name__)


WORKLOADS_BY_OWNER = "controller-owner-uid"


def owner_uids(workload: Obj) -> list[str]:
    """The uid of the object that owns a Workload as its controller (none: no such owner)."""
    refs = items(workload, "metadata", "ownerReferences")
    return [str(r["uid"]) for r in refs if r.get("controller") and r.get("uid")]


class ExternalKinds:
    def __init__(
        self,
        names: tuple[str, ...],
        state: ClusterState,
        kinds: list[JobKind],
        recheck: float = KINDS_RECHECK_SECONDS,
    ) -> None:
        self.pending: list[GroupVersionKind] = [parse_gvk(n) for n in check_federated(names)]
        self.state = state
        self.kinds = kinds
        """The registry's list of federated kinds (``ClusterRegistry.kinds``): a kind found
        is added to it, and so followed on every worker that serves it."""
        self.recheck = recheck
        if self.pending:
            state.workloads.add_index(WORKLOADS_BY_OWNER, owner_uids)

    def workload_of(self, job: Obj) -> str | None:
        """The manager's Workload a job of such a kind owns (its controller names it as it
        likes): what wakes the dispatcher when the job changes."""
        uid = str(at(job, "metadata").get("uid") or "")
        found = self.state.workloads.by_index(WORKLOADS_BY_OWNER, uid) if uid else []
        return ws.key_of(found[0]) if found else None

    async def find(self) -> list[Informer]:
        """Federate each pending kind the manager serves now; returns the new informers of
        its objects on the manager (the caller runs them)."""
        started = []
        for gvk in list(self.pending):
            path = f"/apis/{gvk.group}/{gvk.version}"
            try:
                document = await self.state.api.request("GET", path)
            except errors.NotFound:
                continue
            except errors.KubeError as err:
                log.info("cannot tell whether %s is served yet: %s", gvk.name, err)
                continue
            resource = resource_from(gvk, document.get("resources") or [])
            if resource is None:
                continue
            self.pending.remove(gvk)
            kind = ExternalKind(resource, self.workload_of)
            started.append(self.state.add_job_kind(kind))
            self.kinds.append(kind)
            log.info("federating %s (%s, external framework)", gvk.kind, resource.plural)
        return started

    async def run(self) -> None:
        """Look again for the kinds not served yet; run the informers of those found."""
        tasks: list[asyncio.Task[None]] = []
        try:
            while self.pending:
                await asyncio.sleep(self.recheck)
                for informer in await self.find():
                    tasks.append(asyncio.create_task(informer.run(), name=repr(informer)))
            if tasks:
                await asyncio.gather(*tasks)
        finally:
            await stop_tasks(tasks)
