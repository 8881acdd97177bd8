"""Status back to the manager, written: the remote job's status patched onto the manager's
job (whose own controller then finishes the Workload; what to patch is ``jobsync.py``'s), a
run's end on the Workload, and what is left of the job when its pods are gone."""

from __future__ import annotations

import contextlib
import logging

from manager.controllers import workloadstatus as ws
from manager.controllers.state import ClusterState
from manager.federation.engine.lookups import Lookups
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import Obj
from manager.kube.update import patch_guarded

log = logging.getLogger(__name__)


class JobStatus:
    def __init__(self, state: ClusterState, look: Lookups) -> None:
        self.state = state
        self.look = look

    async def patch_status(self, obj: Obj, patch: Obj) -> None:
        """Patch the status of the workload's job on the manager (``jobsync.status_patch``)."""
        job = self.look.manager_job(obj)
        if job is None:
            return
        kind = self.look.kind_of(obj)
        meta = job["metadata"]
        body, subresource = kind.status_write(job, patch)
        try:
            await self.state.api.patch(
                kind.resource, meta["name"], body, meta["namespace"], subresource=subresource
            )
        except errors.NotFound:
            return
        except errors.Invalid as err:
            log.warning(
                "status of %s %s/%s not synced: %s",
                kind.resource.kind,
                meta["namespace"],
                meta["name"],
                err.message,
            )

    async def reset(self, obj: Obj) -> None:
        """Its pods are gone from the worker: the manager's Job no longer shows them."""
        job = self.look.manager_job(obj)
        kind = self.look.kind_of(obj)
        if job is None or not any(kind.mirrored_status(job).get(k) for k in kind.status_counters):
            return
        meta = job["metadata"]
        body, subresource = kind.status_write(job, dict.fromkeys(kind.status_counters))
        with contextlib.suppress(errors.KubeError):
            await self.state.api.patch(
                kind.resource, meta["name"], body, meta["namespace"], subresource=subresource
            )

    async def finish_workload(self, obj: Obj, succeeded: bool, message: str) -> None:
        """The run's end on the manager's Workload, where its job's status did not bring it."""
        with contextlib.suppress(errors.NotFound):
            await patch_guarded(
                self.state.api,
                R.WORKLOADS,
                obj,
                lambda o: ws.finish(o, succeeded, message),
                subresource="status",
            )
