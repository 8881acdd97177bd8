"""The dispatcher's writes, for the applier: the MultiKueue check of a manager Workload, and
the copies, Jobs and ResourceClaimTemplates on the workers (created, taken back, deleted).
Decisions are made in ``decisions/``; these perform them, count them and trace them."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from enum import StrEnum
from typing import Any

from manager.api import constants as C
from manager.api import draclaims
from manager.api.view import annotations_of, items
from manager.controllers import eventreasons as told
from manager.controllers import spans
from manager.controllers import workloadstatus as ws
from manager.controllers.admission import queued_since
from manager.controllers.runtime import ClusterController
from manager.federation.decisions import checkstatus
from manager.federation.engine import remoteobjects
from manager.federation.engine.lookups import Lookups
from manager.federation.engine.records import Stats
from manager.federation.settings import (
    FENCE_AFTER_ANNOTATION,
    PLACEMENT_ANNOTATION,
    RAN_ON_ANNOTATION,
)
from manager.federation.workers.remote import RemoteCluster
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import Obj
from manager.kube.update import patch_guarded
from manager.telemetry import tracing
from manager.telemetry.metrics import FailoverReason

log = logging.getLogger(__name__)

FAILOVER_METRIC_REASON: dict[str, FailoverReason] = {
    "lost": "lost",
    "unregistered": "lost",
    "drain": "drain",
    "evicted": "evicted",
    "vanished": "evicted",
}
"""``retry`` reasons as the ``kfed_failovers_total`` reason label counts them."""


class Created(StrEnum):
    CREATED = "created"
    TAKEN = "taken"
    """AlreadyExists: something holds the name there (judged on the next read)."""
    FAILED = "failed"


class Writes:
    def __init__(
        self,
        manager: ClusterController,
        look: Lookups,
        stats: Stats,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.wall_clock = wall_clock
        """Wall clock: waits measured from the API server's timestamps."""
        self.manager = manager
        self.state = manager.state
        self.look = look
        self.records = look.records
        self.settings = look.settings
        self.stats = stats

    # -- the manager's Workload ----------------------------------------------------------

    async def set_check(
        self, obj: Obj, check: str, state: str, message: str, **kw: Any
    ) -> Obj | None:
        return await self._write_status(
            obj, lambda o: checkstatus.set_check(o, check, state, message, **kw)
        )

    async def set_ready(self, obj: Obj, check: str, cluster: str) -> Obj | None:
        """The check Ready on ``cluster``, and the Workload Admitted in the same write when
        no other check waits (``checkstatus.ready_and_admitted``)."""
        message = f'The workload was admitted on "{cluster}"'
        written = await self._write_status(
            obj,
            lambda o: checkstatus.ready_and_admitted(o, check, message, cluster_name=cluster),
        )
        if written is not None and checkstatus.check_state(obj, check)[0] != "Ready":
            told.admitted_on(self.state.events, written, cluster)
        if written is not None and ws.is_admitted(written) and not ws.is_admitted(obj):
            now = self.wall_clock()
            self.state.metrics.admitted(
                ws.cluster_queue_of(written),
                waited=now - queued_since(written),
                workload=written,
                checks_waited=now - (ws.reservation_time(written) or now),
            )
            told.admitted(
                self.state.events,
                written,
                ws.cluster_queue_of(written),
                now - (ws.reservation_time(written) or now),
            )
        return written

    async def _write_status(self, obj: Obj, mutate: Callable[[Obj], Obj | None]) -> Obj | None:
        try:
            written = await patch_guarded(
                self.state.api, R.WORKLOADS, obj, mutate, subresource="status"
            )
        except errors.NotFound:
            return None
        if written is not None:
            self.state.workloads.remember_written(ws.key_of(written), obj, written)
        return written

    async def retry(
        self, obj: Obj, check: str, message: str, *, reason: str, evicted: str = ""
    ) -> None:
        """Give the workload back to the manager's queue, to be placed again (a failover
        when its worker was lost, a move when it drains, a requeue when evicted there).
        ``reason``: lost | drain | evicted | vanished | unregistered."""
        self.stats.retries += 1
        log.info("workload %s: %s", ws.key_of(obj), message)
        if await self.set_check(obj, check, "Retry", message) is None:
            return
        cluster = str(ws.status_of(obj).get("clusterName") or "")
        self.state.metrics.failover(cluster, FAILOVER_METRIC_REASON.get(reason, "lost"))
        told.failover(self.state.events, obj, cluster, reason, message)
        if reason == "evicted":  # by the worker itself (upstream counts only these)
            self.state.metrics.evicted_remotely(ws.cluster_queue_of(obj), cluster, evicted)
        spans.record(
            "manager",
            "failover",
            obj,
            attributes={
                "kfed.failover.reason": reason,
                "kfed.failover.from_cluster": cluster or None,
                "kfed.failover.message": message,
            },
        )

    async def annotate(self, obj: Obj, decision: dict[str, Any]) -> Obj:
        """Record the placement decision on the Workload; returns the Workload as written
        (or ``obj`` when the write failed), the base of the next write: computing that from
        the object before this one would only meet a conflict (409) and a re-read."""
        meta = obj["metadata"]
        try:
            written = await self.state.api.patch(
                R.WORKLOADS,
                meta["name"],
                {"metadata": {"annotations": {PLACEMENT_ANNOTATION: json.dumps(decision)}}},
                meta["namespace"],
            )
        except errors.KubeError:
            return obj
        self.state.workloads.remember_written(ws.key_of(written), obj, written)
        return written

    async def record_ran_on(self, obj: Obj, cluster: str) -> Obj:
        """Where its run ended, on the Workload, when ``status.clusterName`` will not say it
        (requeued meanwhile, or placed elsewhere): `kfed explain` reads it once the copies
        are gone. Returns the Workload as written (``obj`` when nothing was), the base of
        the next write."""
        ran_on = annotations_of(obj).get(RAN_ON_ANNOTATION)
        if cluster in (ws.status_of(obj).get("clusterName"), ran_on):
            return obj
        meta = obj["metadata"]
        try:
            written = await self.state.api.patch(
                R.WORKLOADS,
                meta["name"],
                {"metadata": {"annotations": {RAN_ON_ANNOTATION: cluster}}},
                meta["namespace"],
            )
        except errors.KubeError as err:
            log.info("recording where %s ran failed: %s", ws.key_of(obj), err)
            return obj
        self.state.workloads.remember_written(ws.key_of(written), obj, written)
        return written

    # -- copies on the workers ---------------------------------------------------------

    async def create_copy(self, remote: RemoteCluster, obj: Obj) -> Created:
        """The workload's copy on ``remote`` (TAKEN: something holds its name there)."""
        body = remoteobjects.remote_workload(
            obj,
            origin=self.settings.origin,
            annotations={
                tracing.TRACEPARENT_ANNOTATION: tracing.traceparent_of(obj),
                # When the worker's shim fences this copy: with the policy, a manager outage
                # shorter than the outage timeout leaves at-most-once jobs running.
                FENCE_AFTER_ANNOTATION: str(
                    self.settings.fence_after(self.look.failover_policy(obj))
                ),
            },
        )
        namespace = body["metadata"]["namespace"]
        try:
            try:
                await remote.api.create(R.WORKLOADS, body, namespace)
            except errors.NotFound:
                await remote.ensure_namespace(namespace)
                await remote.api.create(R.WORKLOADS, body, namespace)
            self.stats.remote_workloads_created += 1
            self._created(remote, obj, "Workload")
            return Created.CREATED
        except errors.AlreadyExists:
            return Created.TAKEN
        except errors.KubeError as err:
            log.info("creating the copy of %s on %s failed: %s", ws.key_of(obj), remote.name, err)
            return Created.FAILED

    def _created(self, remote: RemoteCluster, obj: Obj, kind: str) -> None:
        self.state.metrics.remote_object_created(
            remote.name, kind, cluster_queue=ws.cluster_queue_of(obj)
        )
        spans.record(
            "manager",
            "remote.create",
            obj,
            attributes={"kfed.cluster": remote.name, "k8s.kind": kind},
        )

    async def delete_copy(self, remote: RemoteCluster, key: str, obj: Obj | None) -> bool:
        """The copy of ``key`` on ``remote`` and every Job of ours made for it; True when
        the copy was there to delete. A live workload's run that has not ended is
        remembered as stopped: its Job may yet end Failed as its pods are deleted, and that
        end is never the job's result (``leftovers.run_end``)."""
        namespace, name = key.split("/", 1)
        live = obj is not None and not ws.is_finished(obj)
        for kind, job in self.look.remote_jobs_of(remote, key):
            meta = job["metadata"]
            if live and kind.outcome(job) is None and meta.get("uid"):
                self.look.records.stopped(str(meta["uid"]))
            try:
                # Foreground: the job stays (so this copy counts as still running) until its
                # pods are gone, however long their termination grace.
                await remote.api.delete(
                    kind.resource, meta["name"], namespace, propagation="Foreground"
                )
            except errors.NotFound:
                pass
            except errors.KubeError as err:
                log.info("deleting our job of %s on %s: %s", key, remote.name, err)
        await self.delete_claim_templates(remote, key, obj)
        try:
            await remote.api.delete(R.WORKLOADS, name, namespace)
        except errors.NotFound:
            return False
        except errors.KubeError as err:
            log.info("deleting the copy of %s on %s: %s", key, remote.name, err)
        return True

    def wake_manager(self, key: str) -> None:
        """Tell the manager's workload controller to look at ``key`` (its eviction may wait
        for its copies to be gone)."""
        self.manager.workloads.queue.add(key)

    # -- the winner --------------------------------------------------------------------

    async def create_job(self, remote: RemoteCluster, obj: Obj) -> Created:
        """The workload's job on ``remote`` (the worker that admitted its copy)."""
        job = self.look.manager_job(obj)
        assert job is not None  # decided with the manager's job there
        kind = self.look.kind_of(obj)
        body = remoteobjects.remote_job(
            job,
            workload_name=obj["metadata"]["name"],
            origin=self.settings.origin,
            annotations={tracing.TRACEPARENT_ANNOTATION: tracing.traceparent_of(obj)},
            kind=kind,
        )
        try:
            await remote.api.create(kind.resource, body, body["metadata"]["namespace"])
        except errors.AlreadyExists:
            return Created.TAKEN
        self.stats.remote_jobs_created += 1
        self._created(remote, obj, kind.resource.kind)
        return Created.CREATED

    async def create_claim_template(self, remote: RemoteCluster, obj: Obj, source: Obj) -> Created:
        """A ResourceClaimTemplate its pods claim devices from, copied from the manager's
        ``source`` to ``remote``: only the one worker that runs it ever gets them."""
        body = remoteobjects.remote_claim_template(
            source, workload_name=obj["metadata"]["name"], origin=self.settings.origin
        )
        what = "ResourceClaimTemplate"
        try:
            await remote.api.create(R.RESOURCE_CLAIM_TEMPLATES, body, body["metadata"]["namespace"])
        except errors.AlreadyExists:
            return Created.TAKEN
        except errors.KubeError as err:
            name = body["metadata"]["name"]
            log.info("creating %s %s on %s failed: %s", what, name, remote.name, err)
            return Created.FAILED
        self._created(remote, obj, what)
        return Created.CREATED

    async def delete_orphan(
        self, remote: RemoteCluster, res: R.Resource, obj: Obj, *, foreground: bool = False
    ) -> None:
        """One of our objects on ``remote`` whose workload is gone (the garbage collection's
        verdict); ``foreground``: a job stays until its pods are gone."""
        meta = obj["metadata"]
        log.info(
            "collecting orphan %s %s/%s on %s",
            res.kind,
            meta["namespace"],
            meta["name"],
            remote.name,
        )
        try:
            if foreground:
                await remote.api.delete(
                    res, meta["name"], meta["namespace"], propagation="Foreground"
                )
            else:
                await remote.api.delete(res, meta["name"], meta["namespace"], uid=meta.get("uid"))
        except errors.KubeError as err:
            log.info("deleting %s %s on %s: %s", res.kind, meta["name"], remote.name, err)

    async def delete_claim_templates(
        self, remote: RemoteCluster, key: str, obj: Obj | None
    ) -> None:
        """Our ResourceClaimTemplates made for the workload ``key`` on ``remote``: those
        labelled with our origin and that workload, chosen by the API server (one request;
        one not ours, or ours for another workload, is never selected). None is asked for
        when the workload's pods, or its copy's there, claim no template: none was made (a
        request per deleted copy would cost AllAtOnce a write each); with neither at hand,
        the garbage collection finds them by their labels."""
        source = obj if obj is not None else remote.workloads().get(key)
        if not remote.serves_devices or not draclaims.template_names(
            items(source, "spec", "podSets")
        ):
            return
        namespace, name = key.split("/", 1)
        ours = f"{remote.origin_selector},{C.PREBUILT_WORKLOAD_LABEL}={name}"
        try:
            await remote.api.delete_collection(
                R.RESOURCE_CLAIM_TEMPLATES, namespace, label_selector=ours
            )
        except errors.KubeError as err:
            log.info("deleting the templates of %s on %s: %s", key, remote.name, err)
