"""Status back to the manager: the remote job's status copied to the manager's job (whose
own controller then finishes the Workload), and what is left of it when its pods are gone.
The same for every kind: its adapter says which status the manager takes and which fields
count running pods."""

from __future__ import annotations

import contextlib
import logging

from manager.api import constants as C
from manager.controllers import conditions
from manager.controllers import workloadstatus as ws
from manager.controllers.state import ClusterState
from manager.federation.engine import topologyback
from manager.federation.engine.lookups import Lookups
from manager.federation.engine.topologyview import TopologyView
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import Obj
from manager.kube.update import patch_guarded

log = logging.getLogger(__name__)


class JobStatus:
    def __init__(self, state: ClusterState, look: Lookups) -> None:
        self.state = state
        self.look = look
        self.topology = TopologyView()
        """TAS: the workers' racks, to spell out where a workload's pods went."""

    async def sync(self, cluster: str, obj: Obj) -> None:
        """Copy the status of the workload's job on ``cluster`` to the manager's job."""
        remote = self.look.registry.remote(cluster)
        if remote is not None:  # TAS: where its pods went (topologyback.py)
            copied = remote.workloads().get(ws.key_of(obj))
            await topologyback.copy_back(self.state, cluster, obj, copied, self.topology.of(remote))
        job = self.look.manager_job(obj)
        kind = self.look.kind_of(obj)
        remote_job = self.look.final_remote_job(remote, obj) if remote is not None else None
        if job is None or remote_job is None:
            return
        if kind.is_suspended(job) and kind.outcome(remote_job) is None:
            return  # requeued: only a final state (it finished there unseen) is copied
        status = kind.status_for_manager(remote_job)
        current = job.get("status") or {}
        if not status or status == current:
            return
        # A merge patch only overwrites: fields the worker no longer reports (active: 0 is
        # omitted) must be removed explicitly, or a finished Job would keep active pods.
        dropped = [k for k in kind.status_counters if k in current and k not in status]
        patch = {**dict.fromkeys(dropped), **status}
        if current.get("startTime"):
            # The apiserver refuses to move startTime of a running Job: after a move to
            # another worker the manager's Job keeps the time it first started.
            patch.pop("startTime", None)
        if all(current.get(k) == v for k, v in patch.items()):
            return
        meta = job["metadata"]
        try:
            await self.state.api.patch(
                kind.resource,
                meta["name"],
                {"status": patch},
                meta["namespace"],
                subresource="status",
            )
        except errors.NotFound:
            return
        except errors.Invalid as err:
            log.warning(
                "status of %s %s/%s not synced from %s: %s",
                kind.resource.kind,
                meta["namespace"],
                meta["name"],
                cluster,
                err.message,
            )

    async def reset(self, obj: Obj) -> None:
        """Its pods are gone from the worker: the manager's Job no longer shows them."""
        job = self.look.manager_job(obj)
        kind = self.look.kind_of(obj)
        status = (job or {}).get("status") or {}
        if job is None or not any(status.get(k) for k in kind.status_counters):
            return
        meta = job["metadata"]
        with contextlib.suppress(errors.KubeError):
            await self.state.api.patch(
                kind.resource,
                meta["name"],
                {"status": dict.fromkeys(kind.status_counters)},
                meta["namespace"],
                subresource="status",
            )

    async def finish_from(self, cluster: str, obj: Obj, remote_wl: Obj) -> None:
        """The copy on ``cluster`` finished: its result is the workload's."""
        remote = self.look.registry.remote(cluster)
        if remote is None:
            return
        job = self.look.manager_job(obj)
        if job is not None and self.look.final_remote_job(remote, obj) is not None:
            await self.sync(cluster, obj)
            return  # the manager's Job controller finishes the Workload from its Job status
        finished = conditions.find(ws.status_of(remote_wl).get("conditions"), C.FINISHED)
        if finished is not None:
            succeeded = finished.get("reason") == C.REASON_SUCCEEDED
            message = str(finished.get("message", ""))
        else:  # its job there ended; the shim has not written it on the copy yet
            key = ws.key_of(obj)
            ended = [
                k.outcome(j)
                for k, j in self.look.remote_jobs_of(remote, key)
                if self.look.counts(remote, key, j)  # never a stopped run's end
            ]
            outcome = next((o for o in ended if o is not None), None)
            if outcome is None:
                return
            succeeded, message = outcome.succeeded, outcome.message
        with contextlib.suppress(errors.NotFound):
            await patch_guarded(
                self.state.api,
                R.WORKLOADS,
                obj,
                lambda o: ws.finish(o, succeeded, message),
                subresource="status",
            )
