"""Every change the dispatcher makes, in one place: the MultiKueue check of a manager
Workload, and the copies and Jobs on the workers (created, taken back, deleted). Decisions
are made elsewhere (``dispatch.py``, ``placing.py``, ``following.py``); these perform them,
count them and trace them."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from manager.api import constants as C
from manager.api import dra
from manager.controllers import eventreasons as told
from manager.controllers import spans
from manager.controllers import workloadstatus as ws
from manager.controllers.admission import queued_since
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.runtime import ClusterController
from manager.federation.decisions import checkstatus, samename
from manager.federation.engine import remoteobjects
from manager.federation.engine.lookups import Lookups, foreign_reason
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


class Writes:
    def __init__(self, manager: ClusterController, look: Lookups, stats: Stats) -> None:
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
            told.got_reservation(self.state.events, written, cluster)
        if written is not None and ws.is_admitted(written) and not ws.is_admitted(obj):
            self.state.metrics.admitted(
                ws.cluster_queue_of(written),
                waited=time.time() - queued_since(written),
                workload=written,
                checks_waited=time.time() - (ws.reservation_time(written) or time.time()),
            )
            told.admitted(
                self.state.events,
                written,
                ws.cluster_queue_of(written),
                time.time() - (ws.reservation_time(written) or time.time()),
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
        annotations = obj["metadata"].get("annotations") or {}
        if cluster in (ws.status_of(obj).get("clusterName"), annotations.get(RAN_ON_ANNOTATION)):
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

    async def create_copy(self, remote: RemoteCluster, obj: Obj) -> bool:
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
            return True
        except errors.AlreadyExists:
            existing = await self.read_remote(remote, R.WORKLOADS, body)
            if samename.judge(existing, origin=self.settings.origin, workload_name=None) is (
                samename.SameName.FOREIGN
            ):
                assert existing is not None
                self.block(ws.key_of(obj), remote.name, foreign_reason("Workload", existing))
                return False
            return True
        except errors.KubeError as err:
            log.info("creating the copy of %s on %s failed: %s", ws.key_of(obj), remote.name, err)
            return False

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

    async def read_remote(self, remote: RemoteCluster, res: R.Resource, body: Obj) -> Obj | None:
        meta = body["metadata"]
        try:
            return await remote.api.get(res, meta["name"], meta["namespace"])
        except errors.NotFound:
            return None

    def block(self, key: str, cluster: str, reason: str) -> None:
        """Do not place ``key`` on ``cluster`` for a while: an object kfed did not create
        holds the name there. Never touched; looked at again after the recheck time."""
        log.warning("workload %s: not placing it on %s: %s", key, cluster, reason)
        until = time.monotonic() + self.settings.foreign_object_recheck
        self.records(key).blocked[cluster] = (reason, until)

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

    async def delete_everywhere(self, key: str, obj: Obj | None, *, keep: str = "") -> None:
        """Every copy of ``key`` (but those on worker ``keep``: a finished run's, retained).
        For a workload that lives on unfinished, a copy is read afresh first: one that
        finished while the manager could not see it is kept (the reconcile records that run
        as the job's result), whatever a lagging cache says."""
        live = obj is not None and not ws.is_finished(obj)
        for remote in self.look.registry.active():
            if remote.name == keep:
                continue
            copy_ = remote.workloads().get(key)
            if copy_ is None and not self.look.remote_jobs_of(remote, key):
                continue
            if live and await self._finished_there(remote, key):
                log.info("workload %s finished on %s unseen: its copy is kept", key, remote.name)
                continue
            if await self.delete_copy(remote, key, obj):
                # Only a copy that was there: a worker that never had one is not named.
                log.info("removed the copy of %s on %s", key, remote.name)
        self.manager.workloads.queue.add(key)  # its eviction may be waiting for this

    async def _finished_there(self, remote: RemoteCluster, key: str) -> bool:
        """The run of ``key`` on ``remote`` ended, judged from its copy and our jobs there
        read afresh: when the worker was just reachable again, the informers may still show
        a job running that ended while it could not be seen (found in CI: the copy was
        deleted with its completed job, and the job was about to run again)."""
        namespace, name = key.split("/", 1)
        body = {"metadata": {"name": name, "namespace": namespace}}
        try:
            fresh = await self.read_remote(remote, R.WORKLOADS, body)
            jobs = await self.fresh_jobs_of(remote, key)
        except errors.KubeError:
            return True  # cannot tell: keep it; the next reconcile looks again
        return self.look.ended_there(remote, key, fresh, jobs)

    async def fresh_jobs_of(self, remote: RemoteCluster, key: str) -> list[tuple[JobKind, Obj]]:
        """Our jobs on ``remote`` made for the workload ``key``, listed afresh, every kind
        the worker serves."""
        namespace, name = key.split("/", 1)
        selector = f"{remote.origin_selector},{C.PREBUILT_WORKLOAD_LABEL}={name}"
        found: list[tuple[JobKind, Obj]] = []
        for kind in list(remote.job_informers):
            listed = await remote.api.list(kind.resource, namespace, label_selector=selector)
            found.extend((kind, job) for job in listed["items"])
        return found

    # -- the winner --------------------------------------------------------------------

    async def won(
        self, key: str, obj: Obj, check: str, remote: RemoteCluster, copies: dict[str, Obj]
    ) -> float | None:
        """``remote`` admitted the copy: every other copy goes, the Job is created there and
        the check set Ready on it."""
        self.records(key).winner = remote.name
        # Every other copy goes first, so at most one worker can ever run the job (each on
        # its own API server: at once).
        others = [self.look.registry.remote(n) for n in copies if n != remote.name]
        await asyncio.gather(*(self.delete_copy(o, key, obj) for o in others if o is not None))
        job = self.look.manager_job(obj)
        kind = self.look.kind_of(obj)
        name = obj["metadata"]["name"]
        earlier = self.look.same_named_remote_job(remote, obj)  # the informer: ours only
        there = samename.judge(earlier, origin=self.settings.origin, workload_name=name)
        if there is samename.SameName.EARLIER:
            assert earlier is not None
            return await self.wait_for_earlier_job(obj, check, remote, earlier)
        if job is not None and there is samename.SameName.NONE:
            # Its pods' ResourceClaimTemplates first: the pods name them when they are made.
            not_yet = await self.claim_templates_there(key, obj, check, remote)
            if not_yet is not None:
                return not_yet
            body = remoteobjects.remote_job(
                job,
                workload_name=obj["metadata"]["name"],
                origin=self.settings.origin,
                annotations={tracing.TRACEPARENT_ANNOTATION: tracing.traceparent_of(obj)},
                kind=kind,
            )
            what = kind.resource.kind
            try:
                await remote.api.create(kind.resource, body, body["metadata"]["namespace"])
                self.stats.remote_jobs_created += 1
                self._created(remote, obj, what)
            except errors.AlreadyExists:
                # Read afresh: the informer shows ours only, and may lag.
                existing = await self.read_remote(remote, kind.resource, body)
                match samename.judge(existing, origin=self.settings.origin, workload_name=name):
                    case samename.SameName.NONE:
                        return 0.5  # deleted meanwhile: create it on the next pass
                    case samename.SameName.FOREIGN:
                        assert existing is not None
                        return await self.refuse_worker(key, obj, check, remote, what, existing)
                    case samename.SameName.EARLIER:
                        assert existing is not None
                        return await self.wait_for_earlier_job(obj, check, remote, existing)
        written = await self.set_ready(obj, check, remote.name)
        if written is not None:
            self._placed(key, written, remote.name)
        return None

    async def claim_templates_there(
        self, key: str, obj: Obj, check: str, remote: RemoteCluster
    ) -> float | None:
        """The ResourceClaimTemplates the workload's pods claim devices from, created on
        the worker that admitted its copy (None: all there, ours, made for it; else the
        seconds before trying again). Created here, just before the Job and after every
        other copy was deleted, rather than with the copy: only the one worker that runs
        it ever gets them, and a same-named one that is not ours is found before any pod
        could be made from it. As for Jobs (``samename.judge``): one kfed did not create
        is never touched and the worker is refused with the reason; ours for an earlier
        workload is waited for (its copy's removal deletes it)."""
        names = dra.template_names((obj.get("spec") or {}).get("podSets") or [])
        namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        what = "ResourceClaimTemplate"
        for template_name in names:
            try:
                source = await self.state.api.get(
                    R.RESOURCE_CLAIM_TEMPLATES, template_name, namespace
                )
            except errors.NotFound:
                await self.set_check(
                    obj,
                    check,
                    "Pending",
                    f"admitted on {remote.name}; its {what} {namespace}/{template_name} is gone "
                    "from the manager: its pods could not claim their devices there (create it "
                    "again)",
                )
                return 5.0
            body = remoteobjects.remote_claim_template(
                source, workload_name=name, origin=self.settings.origin
            )
            try:
                await remote.api.create(R.RESOURCE_CLAIM_TEMPLATES, body, namespace)
                self._created(remote, obj, what)
                continue
            except errors.AlreadyExists:
                existing = await self.read_remote(remote, R.RESOURCE_CLAIM_TEMPLATES, body)
            except errors.KubeError as err:
                log.info("creating %s %s on %s failed: %s", what, template_name, remote.name, err)
                return 1.0
            match samename.judge(existing, origin=self.settings.origin, workload_name=name):
                case samename.SameName.NONE:
                    return 0.5  # deleted meanwhile: create it on the next pass
                case samename.SameName.FOREIGN:
                    assert existing is not None
                    return await self.refuse_worker(key, obj, check, remote, what, existing)
                case samename.SameName.EARLIER:
                    assert existing is not None
                    return await self.wait_for_earlier_job(obj, check, remote, existing, what)
        return None

    async def delete_claim_templates(
        self, remote: RemoteCluster, key: str, obj: Obj | None
    ) -> None:
        """Our ResourceClaimTemplates made for the workload ``key`` on ``remote`` (read first:
        one that is not ours, or ours for another workload, is left alone). The names come
        from the workload or its copy there; with neither, the garbage collection finds
        them by their labels."""
        if not remote.serves_devices:
            return
        namespace, name = key.split("/", 1)
        source = obj if obj is not None else remote.workloads().get(key)
        names = dra.template_names(((source or {}).get("spec") or {}).get("podSets") or [])
        for template_name in names:
            body = {"metadata": {"name": template_name, "namespace": namespace}}
            try:
                there = await self.read_remote(remote, R.RESOURCE_CLAIM_TEMPLATES, body)
                if samename.judge(there, origin=self.settings.origin, workload_name=name) is (
                    samename.SameName.OURS
                ):
                    assert there is not None
                    await remote.api.delete(
                        R.RESOURCE_CLAIM_TEMPLATES,
                        template_name,
                        namespace,
                        uid=there["metadata"].get("uid"),
                    )
            except errors.KubeError as err:
                log.info("deleting %s %s on %s: %s", "template", template_name, remote.name, err)

    def _placed(self, key: str, written: Obj, cluster: str) -> None:
        """Count and trace a placement: dispatch latency from the manager's reservation."""
        self.state.metrics.admitted_remotely(ws.cluster_queue_of(written), cluster)
        record = self.records(key)
        record.placement, record.tried = None, set()
        started, record.reserved_at = record.reserved_at, None
        if started is None:
            return
        latency = time.monotonic() - started
        self.stats.dispatch_latencies.append(latency)
        self.state.metrics.dispatch_done(cluster, latency)
        spans.record(
            "manager",
            "placement",
            written,
            start=time.time() - latency,
            attributes={"kfed.cluster": cluster, "kfed.dispatch.latency_seconds": latency},
        )

    async def refuse_worker(
        self, key: str, obj: Obj, check: str, remote: RemoteCluster, kind: str, foreign: Obj
    ) -> float | None:
        """An object kfed did not create holds the name there: leave it alone, take our copy
        back (it holds the worker's quota for nothing) and place the workload elsewhere."""
        self.block(key, remote.name, foreign_reason(kind, foreign))
        record = self.records(key)
        record.winner, record.placement = None, None
        record.tried.add(remote.name)
        await self.delete_copy(remote, key, obj)
        await self.set_check(
            obj, check, "Pending", f"not placed on {remote.name}: {foreign_reason(kind, foreign)}"
        )
        return 0.1

    async def wait_for_earlier_job(
        self, obj: Obj, check: str, remote: RemoteCluster, earlier: Obj, kind: str = "Job"
    ) -> float:
        """A Job (or ResourceClaimTemplate) of this name that an earlier workload left on the
        worker (being deleted, or to be collected) must be gone before ours is created:
        never adopt it."""
        meta = earlier["metadata"]
        how = "being deleted" if meta.get("deletionTimestamp") else "not yet collected"
        await self.set_check(
            obj,
            check,
            "Pending",
            f"admitted on {remote.name}; waiting for the {kind} {meta['namespace']}/{meta['name']} "
            f"of an earlier workload to be removed there ({how})",
        )
        return 1.0
