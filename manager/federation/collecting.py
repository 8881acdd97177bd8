"""Leftovers on the workers: copies the manager no longer places there, and our Jobs whose
Workload is gone. Collected when a lost worker comes back (before anything else happens
there) and every ``gc_interval``. A finished copy of a live workload is never collected: the
run it records is the job's result (the reconcile copies it first)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.federation import checkstatus
from manager.federation.lookups import Lookups, finished_unseen
from manager.federation.remote import RemoteCluster
from manager.federation.writes import Writes
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import Obj
from manager.telemetry import tracing

log = logging.getLogger(__name__)


class Collector:
    def __init__(self, look: Lookups, write: Writes, requeue: Callable[[str], None]) -> None:
        self.look = look
        self.write = write
        self.requeue = requeue
        self.state = look.state

    async def recover(self, remote: RemoteCluster) -> None:
        """Before anything else happens on a worker that was lost: remove copies the manager
        no longer places there (the workload moved, finished or is gone). Read afresh: the
        informers may not have caught up with what happened there while it was unreachable
        (a copy that finished meanwhile must be seen finished, never deleted as a leftover)."""
        try:
            fresh = await remote.api.list(R.WORKLOADS, label_selector=remote.origin_selector)
        except errors.KubeError as err:
            log.info("not recovering %s yet (%s): the garbage collection will", remote.name, err)
            return
        for copy_ in fresh["items"]:
            key = ws.key_of(copy_)
            obj = self.state.workloads.get(key)
            if finished_unseen(copy_, obj):
                self.requeue(key)  # the reconcile records that run: it never runs again
            elif not self._still_placed_there(key, obj, copy_, remote):
                with tracing.workload_context(obj or copy_):
                    log.info("removing stale copy of %s from %s", key, remote.name)
                    await self.write.delete_copy(remote, key, obj)
        await self._collect_orphan_jobs(remote)

    def _still_placed_there(
        self, key: str, obj: Obj | None, copy_: Obj, remote: RemoteCluster
    ) -> bool:
        if obj is None or not ws.has_reservation(obj) or ws.is_finished(obj):
            return False
        placement = self.look.records.placement(key)
        placed = ws.status_of(obj).get("clusterName") == remote.name or (
            placement is not None and placement.cluster == remote.name
        )
        return placed and ws.is_active(copy_)

    async def collect_garbage(self) -> int:
        """Delete remote copies of our origin whose manager workload is gone or finished."""
        removed = 0
        for remote in self.look.registry.active():
            for copy_ in list(remote.workloads().items()):
                key = ws.key_of(copy_)
                obj = self.state.workloads.get(key)
                if finished_unseen(copy_, obj):
                    continue  # the reconcile records that run first
                if obj is None or ws.is_finished(obj) or self._placed_elsewhere(obj, remote):
                    with tracing.workload_context(obj or copy_):
                        log.info("collecting the copy of %s on %s", key, remote.name)
                        await self.write.delete_copy(remote, key, obj)
                    removed += 1
            removed += await self._collect_orphan_jobs(remote)
        return removed

    def _placed_elsewhere(self, obj: Obj, remote: RemoteCluster) -> bool:
        """The workload runs on another worker now (its check Ready there): a copy here is a
        leftover, e.g. fenced while this worker was lost or unregistered, then re-added."""
        federated = self.look.multikueue_check(obj)
        if federated is None:
            return False
        cluster = ws.status_of(obj).get("clusterName")
        ready = checkstatus.check_state(obj, federated[0])[0] == "Ready"
        return ready and bool(cluster) and cluster != remote.name

    async def _collect_orphan_jobs(self, remote: RemoteCluster) -> int:
        """Our Jobs on a worker whose Workload is gone there and on the manager (left by a
        copy deleted while the worker was unreachable, or by an earlier registration): they
        would block a same-named Job submitted again."""
        removed = 0
        for job in list(remote.jobs().items()):
            meta = job["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            workload = (meta.get("labels") or {}).get(C.PREBUILT_WORKLOAD_LABEL, "")
            key = f"{meta['namespace']}/{workload}"
            owner = self.state.workloads.get(key)
            if remote.workloads().get(key) is None and (owner is None or ws.is_finished(owner)):
                log.info(
                    "collecting orphan Job %s/%s on %s",
                    meta["namespace"],
                    meta["name"],
                    remote.name,
                )
                with contextlib.suppress(errors.KubeError):
                    await remote.api.delete(
                        R.JOBS, meta["name"], meta["namespace"], propagation="Foreground"
                    )
                removed += 1
        return removed
