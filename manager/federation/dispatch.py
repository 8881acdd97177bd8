"""The MultiKueue admission check controller: places each workload that holds quota on the
manager on worker clusters, follows it there, and brings its status back.

Per manager Workload (one reconcile at a time, keyed ``namespace/name``):

1. Not federated (its ClusterQueue has no MultiKueue check): nothing to do.
2. Gone, finished, or no longer holding quota: remove every remote copy.
3. A remote copy finished: copy the remote Job's final status to the manager's Job (whose
   own controller then finishes the Workload); the copies go in step 2 afterwards.
4. Check Ready (placed on ``status.clusterName``): keep the manager's Job status in sync; if
   the copy was evicted there, vanished, or its worker is lost (and surely fenced, or lost
   for longer than the unfenced timeout), set the check to Retry: the manager evicts and
   requeues it, and it is placed again.
5. Check Pending: place it. Capacity-aware (default): one copy on the best-fitting worker
   (see capacity.py); if that worker has not admitted it within ``admission_timeout`` it is
   withdrawn and the next candidate tried. AllAtOnce / Incremental: copies on every (or
   ``incremental_step`` more) workers, the first to admit wins and the others are deleted
   before the Job is created on the winner. Once admitted remotely: create the Job there,
   set the check Ready and ``clusterName``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from manager.api import constants as C
from manager.api import quantity
from manager.controllers import conditions, spans
from manager.controllers import workloadstatus as ws
from manager.controllers.jobs import job_finished
from manager.controllers.runtime import ClusterController
from manager.federation import capacity, checkstatus, failover, remoteobjects
from manager.federation.registry import ClusterRegistry
from manager.federation.remote import RemoteCluster
from manager.federation.settings import (
    ALLOWED_CLUSTERS_ANNOTATION,
    FAILOVER_POLICY_ANNOTATION,
    FENCE_AFTER_ANNOTATION,
    PLACEMENT_ANNOTATION,
    DispatchMode,
    FailoverPolicy,
    FederationSettings,
    failover_policy,
)
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import Obj
from manager.kube.informer import Event
from manager.kube.update import patch_guarded
from manager.kube.workqueue import WorkQueue
from manager.telemetry import tracing
from manager.telemetry.metrics import FailoverReason

log = logging.getLogger(__name__)

# Job status counters the worker omits when they drop to zero. Other fields (startTime) the
# apiserver forbids removing from a running Job, and they are only ever replaced.
_POD_COUNTERS = ("active", "ready", "terminating")

_FAILOVER_METRIC_REASON: dict[str, FailoverReason] = {
    "lost": "lost",
    "unregistered": "lost",
    "drain": "drain",
    "evicted": "evicted",
    "vanished": "evicted",
}
"""``_retry`` reasons as the ``kfed_failovers_total`` reason label counts them."""


def _finished_unseen(copy_: Obj, obj: Obj | None) -> bool:
    """A copy that finished while its manager workload lives on unfinished: it finished
    while the manager could not see it (and may have been moved or requeued since)."""
    return obj is not None and ws.is_finished(copy_) and not ws.is_finished(obj)


def _ours(remote_obj: Obj, origin: str) -> bool:
    """Made by this manager (its origin label), so kfed may change or delete it."""
    labels = remote_obj["metadata"].get("labels") or {}
    return labels.get(C.MULTIKUEUE_ORIGIN_LABEL) == origin


def _made_for(remote_job: Obj, manager_wl: Obj) -> bool:
    """A remote Job made for this manager Workload (not for an earlier one of that name)."""
    labels = remote_job["metadata"].get("labels") or {}
    return bool(labels.get(C.PREBUILT_WORKLOAD_LABEL) == manager_wl["metadata"]["name"])


def _foreign_reason(kind: str, foreign: Obj) -> str:
    meta = foreign["metadata"]
    origin = (meta.get("labels") or {}).get(C.MULTIKUEUE_ORIGIN_LABEL)
    whose = f"another manager (origin {origin!r})" if origin else "someone else"
    return (
        f"a {kind} {meta['namespace']}/{meta['name']} that kfed did not create already exists "
        f"there (made by {whose}); kfed leaves it alone"
    )


@dataclass
class Placement:
    """A copy sent to one worker and not admitted there yet (capacity-aware mode)."""

    cluster: str
    worker_cluster_queue: str
    usage: dict[tuple[str, str, str], int]
    deadline: float
    reason: str


@dataclass
class Stats:
    remote_workloads_created: int = 0
    remote_jobs_created: int = 0
    withdrawn: int = 0
    retries: int = 0
    dispatch_latencies: list[float] = field(default_factory=list)


class Dispatcher:
    def __init__(
        self, manager: ClusterController, registry: ClusterRegistry, settings: FederationSettings
    ) -> None:
        self.manager = manager
        self.state = manager.state
        self.registry = registry
        self.settings = settings
        self.queue = WorkQueue(name="dispatch")
        self.placements: dict[str, Placement] = {}
        self.tried: dict[str, set[str]] = {}
        self.waiting: set[str] = set()
        self.unplaceable_since: dict[str, float] = {}
        """Key -> when every worker first said it can never hold the workload (as they are
        configured); its quota is released ``dispatch_deadline`` after that."""
        self.rounds: dict[str, tuple[int, float]] = {}
        self.reserved_at: dict[str, float] = {}
        self.winners: dict[str, str] = {}
        """The worker each placed workload runs on, as soon as it is chosen (AllAtOnce)."""
        self.finished_remote_jobs: dict[str, Obj] = {}
        """The last state of finished remote Jobs deleted before their workload finished here
        (a worker's TTL controller), by manager workload key."""
        self.blocked: dict[str, dict[str, tuple[str, float]]] = {}
        """Workers a workload must not go to for now, with why and until when (monotonic):
        an object of the same name there that kfed did not create. Never touched; looked at
        again after ``foreign_object_recheck``."""
        self.stats = Stats()
        self._rescan = False
        self.state.workloads.subscribe(self._on_manager_workload)
        self.state.jobs.subscribe(self._on_manager_job)
        manager.workloads.stop_checks.append(self.remote_copies_stopped)
        manager.admission.on_admit.append(self._quota_reserved)

    # -- events ------------------------------------------------------------------------

    def _quota_reserved(self, key: str, _admit: object) -> None:
        """Dispatch latency counts from here: the moment the manager reserved the quota."""
        self.reserved_at[key] = time.monotonic()

    def _on_manager_workload(self, event: Event) -> None:
        self.queue.add(event.key)

    def _on_manager_job(self, event: Event) -> None:
        meta = event.obj.get("metadata") or {}
        name = ws.workload_name_for_job(meta.get("name", ""), meta.get("uid", ""))
        self.queue.add(f"{meta.get('namespace')}/{name}")

    def attach(self, remote: RemoteCluster) -> None:
        """Follow a worker's copies: their events bring the manager workload back here."""

        def on_remote(event: Event) -> None:
            meta = event.obj.get("metadata") or {}
            labels = meta.get("labels") or {}
            name = labels.get(C.PREBUILT_WORKLOAD_LABEL) or meta.get("name")
            self.queue.add(f"{meta.get('namespace')}/{name}")

        def on_remote_job(event: Event) -> None:
            meta = event.obj.get("metadata") or {}
            workload = (meta.get("labels") or {}).get(C.PREBUILT_WORKLOAD_LABEL)
            key = f"{meta.get('namespace')}/{workload}"
            if (
                event.type == "DELETED"
                and job_finished(event.obj) is not None
                and self.state.workloads.get(key) is not None
            ):
                # Kept (until _forget) while its workload lives: a worker's TTL controller
                # may delete a finished Job before we copied its final status
                # (ttlSecondsAfterFinished: 0). Without it the manager's Job would never
                # end, or worse, its vanished copy would count as a reason to run it again.
                self.finished_remote_jobs[key] = event.obj
            on_remote(event)

        remote.workloads().subscribe(on_remote)
        remote.jobs().subscribe(on_remote_job)

    def capacity_changed(self) -> None:
        """Something changed on a worker: waiting workloads may fit now (see rescan)."""
        self._rescan = True

    def connectivity_changed(self, remote: RemoteCluster) -> None:
        """A worker was lost or came back: look again at everything placed there."""
        for key, placement in self.placements.items():
            if placement.cluster == remote.name:
                self.queue.add(key)
        for obj in self.state.workloads.items():
            if ws.status_of(obj).get("clusterName") == remote.name:
                self.queue.add(ws.key_of(obj))
        self._rescan = True

    def maintenance_changed(self, cluster: str) -> None:
        """cordon/drain/uncordon: drained workloads move; waiting ones may fit again."""
        for obj in self.state.workloads.items():
            if ws.status_of(obj).get("clusterName") == cluster:
                self.queue.add(ws.key_of(obj))
        self._rescan = True

    def rescan(self) -> None:
        """Queue the waiting workloads again, highest priority and oldest first, at most once
        per rescan period however many worker events came in."""
        if not self._rescan:
            return
        self._rescan = False

        def order(key: str) -> tuple[int, str]:
            obj = self.state.workloads.get(key) or {}
            priority = int((obj.get("spec") or {}).get("priority") or 0)
            return -priority, str((obj.get("metadata") or {}).get("creationTimestamp", ""))

        for key in sorted(self.waiting, key=order):
            self.queue.add(key)

    # -- lookups -----------------------------------------------------------------------

    def multikueue_check(self, obj: Obj) -> tuple[str, list[str]] | None:
        """(check name, worker names of its MultiKueueConfig) when the workload is federated."""
        admission = ws.status_of(obj).get("admission") or {}
        cq_name = admission.get("clusterQueue")
        if cq_name is None:
            lq = self.state.local_queues.get(
                f"{obj['metadata']['namespace']}/{(obj.get('spec') or {}).get('queueName')}"
            )
            cq_name = ((lq or {}).get("spec") or {}).get("clusterQueue")
        if not cq_name:
            return None
        return self.federation_of(str(cq_name))

    def federation_of(self, cluster_queue: str) -> tuple[str, list[str]] | None:
        """(check name, worker names of its MultiKueueConfig) when the ClusterQueue's
        workloads are federated: it has an admission check of the MultiKueue controller."""
        for name in self.state.admission_check_names(cluster_queue):
            ac = self.state.admission_checks.get(name)
            spec = (ac or {}).get("spec") or {}
            if spec.get("controllerName") == C.MULTIKUEUE_CONTROLLER_NAME:
                params = spec.get("parameters") or {}
                clusters = (
                    self.registry.clusters_of_config(str(params.get("name", "")))
                    if params.get("kind") == "MultiKueueConfig"
                    else []
                )
                return name, clusters
        return None

    def copies(self, key: str) -> dict[str, Obj]:
        """Remote copies of a workload, by worker (connected workers only)."""
        found = {}
        for remote in self.registry.active():
            obj = remote.workloads().get(key)
            if obj is not None:
                found[remote.name] = obj
        return found

    def _finished_copy(self, key: str) -> tuple[str, Obj] | None:
        """A copy that finished (its worker's Job ended), with its worker, if any."""
        for cluster, remote_wl in sorted(self.copies(key).items()):
            if ws.is_finished(remote_wl):
                return cluster, remote_wl
        return None

    def remote_copies_stopped(self, obj: Obj) -> bool:
        """For the manager's eviction: no copy of it can still run anywhere."""
        key = ws.key_of(obj)
        if self.multikueue_check(obj) is None:
            return True
        if not self.registry.synced.is_set():
            return False
        for entry in self.registry.clusters.values():
            remote = entry.remote or entry.retired
            if remote is None:
                if entry.rejected is None:
                    return False  # not connected yet: we cannot know what runs there
                continue
            present = (
                remote.workloads().get(key) is not None or self._remote_job(remote, obj) is not None
            )
            if not present:
                continue
            if remote.connected or self._may_run_there(remote, obj):
                return False
        return True

    def _may_run_there(self, remote: RemoteCluster, obj: Obj) -> bool:
        return not self._lost_long_enough(remote, obj)

    def _failover_policy(self, obj: Obj) -> FailoverPolicy:
        admission = ws.status_of(obj).get("admission") or {}
        cq = self.state.cluster_queues.get(str(admission.get("clusterQueue", ""))) or {}
        value = ((cq.get("metadata") or {}).get("annotations") or {}).get(
            FAILOVER_POLICY_ANNOTATION
        )
        return failover_policy(value, self.settings.failover_policy)

    def may_move_at(self, remote: RemoteCluster, obj: Obj) -> float:
        """When ``obj``'s copy on the lost worker ``remote`` has surely stopped (failover.py)."""
        state = remote.state
        return failover.may_move_at(
            self.settings,
            self._failover_policy(obj),
            could_fence=state.could_fence,
            last_renew_start=state.last_renew_start,
            lost_since=state.lost_since,
            now=time.monotonic(),
        )

    def _lost_long_enough(self, remote: RemoteCluster, obj: Obj) -> bool:
        return not remote.connected and time.monotonic() >= self.may_move_at(remote, obj)

    def _lost_remaining(self, remote: RemoteCluster, obj: Obj) -> float:
        return max(0.1, self.may_move_at(remote, obj) - time.monotonic())

    def _not_managed_by_multikueue(self, obj: Obj) -> str | None:
        """Why the workload's Job must not be federated (None: it may). As upstream: a Job
        is federated only with ``spec.managedBy: kueue.x-k8s.io/multikueue``; without it the
        manager cluster's Job controller would run it too (the webhook sets it at creation,
        so a Job lacks it when created before its queue existed, when its queue label was
        added later, or when the webhook was not registered)."""
        job = self._manager_job(obj)
        if job is None:
            return None
        managed_by = (job.get("spec") or {}).get("managedBy") or ""
        if managed_by == C.MULTIKUEUE_MANAGED_BY:
            return None
        # Upstream's words exactly (Go's %q quoting), so tools that read them keep working.
        expected, actual = json.dumps(C.MULTIKUEUE_MANAGED_BY), json.dumps(managed_by)
        return f"Expecting spec.managedBy to be {expected} not {actual}"

    def _manager_job(self, obj: Obj) -> Obj | None:
        owner = ws.owner_job(obj)
        return self.state.jobs.get(owner) if owner else None

    def _remote_job_name(self, obj: Obj) -> str | None:
        job = self._manager_job(obj)
        name = (job or {}).get("metadata", {}).get("name") or (
            obj["metadata"].get("annotations") or {}
        ).get(C.JOB_NAME_ANNOTATION)
        return str(name) if name else None

    def _remote_job(self, remote: RemoteCluster, obj: Obj) -> Obj | None:
        """This workload's Job on the worker: ours by origin (the informer's selector) AND
        made for this very workload (its prebuilt-workload label). A Job of the same name
        left by an earlier workload of a same-named Job (still terminating) is not it."""
        found = self._same_named_remote_job(remote, obj)
        return found if found is not None and _made_for(found, obj) else None

    def _final_remote_job(self, remote: RemoteCluster, obj: Obj) -> Obj | None:
        """This workload's remote Job, or its last, finished state if a worker's TTL
        controller deleted it already."""
        found = self._remote_job(remote, obj)
        if found is not None:
            return found
        kept = self.finished_remote_jobs.get(ws.key_of(obj))
        return kept if kept is not None and _made_for(kept, obj) else None

    def _same_named_remote_job(self, remote: RemoteCluster, obj: Obj) -> Obj | None:
        name = self._remote_job_name(obj)
        return remote.jobs().get(f"{obj['metadata']['namespace']}/{name}") if name else None

    # -- the reconcile -----------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        with tracing.workload_context(self.state.workloads.get(key)):
            return await self._reconcile(key)

    async def _reconcile(self, key: str) -> float | None:
        obj = self.state.workloads.get(key)
        if obj is None:
            await self._delete_everywhere(key, None)
            self._forget(key)
            return None
        federated = self.multikueue_check(obj)
        if federated is None:
            return None
        check, clusters = federated
        deleting = bool(obj["metadata"].get("deletionTimestamp"))
        done = self._finished_copy(key)
        if done is not None and not (ws.has_reservation(obj) or ws.is_finished(obj) or deleting):
            # It finished on a worker the manager could not see, and was taken off it
            # meanwhile (moved, requeued): that run counts; it must never run again.
            log.info("workload %s finished on %s while unreachable: recorded", key, done[0])
            await self._finish_from(done[0], obj, done[1])
            return None
        if ws.is_finished(obj) or not ws.has_reservation(obj) or deleting:
            await self._delete_everywhere(key, obj)
            self._forget(key)
            return None
        unmanaged = self._not_managed_by_multikueue(obj)
        if unmanaged is not None:
            # Never place a Job the manager's own Job controller may run: it would run twice.
            if checkstatus.check_state(obj, check)[0] != "Rejected":
                log.warning("workload %s rejected: %s", key, unmanaged)
                await self._set_check(
                    obj, check, "Rejected", f"The owner is not managed by Kueue: {unmanaged}"
                )
            return None
        self.reserved_at.setdefault(key, time.monotonic())
        copies = self.copies(key)
        if done is not None:
            cluster, remote_wl = done
            remote = self.registry.remote(cluster)
            if checkstatus.check_state(obj, check)[0] != "Ready" and remote is not None:
                # It won and ran while nobody recorded it (a manager restart in between):
                # record the placement first, so the manager's Job can follow it.
                return await self._won(key, obj, check, remote, copies)
            # Placed there, or elsewhere after it finished there unseen: the first run
            # that finished is the job's result; any later copy is removed with the rest.
            await self._finish_from(cluster, obj, remote_wl)
            return None
        if ws.is_evicted(obj):
            # The manager evicted it (preempted, or our Retry): stop every copy.
            await self._delete_everywhere(key, obj)
            await self._reset_job_status(obj)
            self._forget(key)
            return None
        state, _ = checkstatus.check_state(obj, check)
        if state == "Ready":
            return await self._follow(key, obj, check, copies)
        if state == "Pending":
            return await self._place(key, obj, check, clusters, copies)
        return None

    async def _follow(self, key: str, obj: Obj, check: str, copies: dict[str, Obj]) -> float | None:
        cluster = ws.status_of(obj).get("clusterName")
        remote = self.registry.remote(str(cluster)) if cluster else None
        if remote is None and cluster and (retired := self.registry.retired(str(cluster))):
            # Its kubeconfig is now refused or gone: a lost worker like any other.
            if self._lost_long_enough(retired, obj):
                why = retired.state.message.removeprefix("Connection to worker lost: ")
                return await self._retry(
                    obj, check, f"worker {cluster} lost ({why}); moving the workload", reason="lost"
                )
            return self._lost_remaining(retired, obj)
        if remote is None:
            if cluster and self.registry.mk_clusters.get(str(cluster)) is not None:
                return 1.0  # registered, its connection is being set up (e.g. after a restart)
            return await self._retry(
                obj, check, f"worker {cluster} is no longer registered", reason="unregistered"
            )
        if not remote.connected:
            if self._lost_long_enough(remote, obj):
                how = "fenced itself" if remote.state.could_fence else "timed out"
                return await self._retry(
                    obj, check, f"worker {cluster} lost ({how}); moving the workload", reason="lost"
                )
            return self._lost_remaining(remote, obj)
        if self._maintenance(str(cluster)) == "drain":
            return await self._retry(
                obj, check, f"worker {cluster} is draining; moving the workload", reason="drain"
            )
        remote_wl = copies.get(str(cluster))
        if remote_wl is None:
            return await self._retry(
                obj, check, f"the copy on worker {cluster} no longer exists", reason="vanished"
            )
        if (
            ws.is_evicted(remote_wl)
            or not ws.has_reservation(remote_wl)
            or not ws.is_active(remote_wl)
        ):
            why = (conditions.find(ws.status_of(remote_wl).get("conditions"), C.EVICTED) or {}).get(
                "message"
            ) or "lost its quota there"
            return await self._retry(
                obj, check, f"evicted on worker {cluster}: {why}", reason="evicted"
            )
        await self._sync_job_status(remote, obj)
        return None

    async def _retry(self, obj: Obj, check: str, message: str, *, reason: str) -> float | None:
        """Give the workload back to the manager's queue, to be placed again (a failover
        when its worker was lost, a move when it drains, a requeue when evicted there).
        ``reason``: lost | drain | evicted | vanished | unregistered."""
        self.stats.retries += 1
        log.info("workload %s: %s", ws.key_of(obj), message)
        if await self._set_check(obj, check, "Retry", message) is not None:
            cluster = str(ws.status_of(obj).get("clusterName") or "")
            self.state.metrics.failover(cluster, _FAILOVER_METRIC_REASON.get(reason, "lost"))
            if reason == "evicted":  # by the worker itself (upstream counts only these)
                self.state.metrics.evicted_remotely(ws.cluster_queue_of(obj), cluster)
            spans.record(
                "manager",
                "failover",
                obj,
                attributes={
                    "kfed.failover.reason": reason,
                    "kfed.failover.from_cluster": ws.status_of(obj).get("clusterName"),
                    "kfed.failover.message": message,
                },
            )
        return None

    async def _set_check(
        self, obj: Obj, check: str, state: str, message: str, **kw: Any
    ) -> Obj | None:
        try:
            written = await patch_guarded(
                self.state.api,
                R.WORKLOADS,
                obj,
                lambda o: checkstatus.set_check(o, check, state, message, **kw),
                subresource="status",
            )
        except errors.NotFound:
            return None
        if written is not None:
            self.state.workloads.remember_written(ws.key_of(written), obj, written)
        return written

    # -- placing -------------------------------------------------------------------------

    def _request(self, obj: Obj) -> capacity.Request:
        usage: dict[tuple[str, str], int] = {}
        admission = ws.status_of(obj).get("admission") or {}
        for psa in admission.get("podSetAssignments") or []:
            flavors = psa.get("flavors") or {}
            for resource, value in (psa.get("resourceUsage") or {}).items():
                flavor = flavors.get(resource)
                if flavor:
                    fr = (flavor, resource)
                    usage[fr] = usage.get(fr, 0) + quantity.to_core_units(resource, value)
        return capacity.Request(
            obj["metadata"]["namespace"], str((obj.get("spec") or {}).get("queueName", "")), usage
        )

    def _allowed(self, obj: Obj) -> set[str] | None:
        job = self._manager_job(obj) or {}
        for source in (obj, job):
            value = ((source.get("metadata") or {}).get("annotations") or {}).get(
                ALLOWED_CLUSTERS_ANNOTATION
            )
            if value:
                return {c.strip() for c in value.split(",") if c.strip()}
        return None

    def worker_view(self, remote: RemoteCluster, order: int) -> capacity.WorkerView:
        in_flight: dict[tuple[str, str, str], int] = {}
        waiting = 0
        for placement in self.placements.values():
            if placement.cluster == remote.name:
                waiting += 1
                for k, v in placement.usage.items():
                    in_flight[k] = in_flight.get(k, 0) + v
        return capacity.WorkerView(
            name=remote.name,
            local_queues=remote.informers["localqueues"].cache,
            cluster_queues=remote.informers["clusterqueues"].cache,
            flavors=remote.informers["resourceflavors"].cache,
            in_flight=in_flight,
            waiting=waiting,
            order=order,
        )

    def candidates(self, obj: Obj, clusters: list[str]) -> list[capacity.Candidate]:
        """Every worker of the config, evaluated for this workload (used by `kfed whatif`)."""
        request = self._request(obj)
        allowed = self._allowed(obj)
        result = []
        for order, name in enumerate(clusters):
            entry = self.registry.clusters.get(name)
            remote = entry.remote if entry else None
            if allowed is not None and name not in allowed:
                result.append(
                    capacity.Candidate(
                        name, False, f"not in the job's {ALLOWED_CLUSTERS_ANNOTATION}", never=True
                    )
                )
            elif remote is None or not remote.connected:
                result.append(capacity.Candidate(name, False, "not connected"))
            elif (blocked := self._blocked_reason(ws.key_of(obj), name)) is not None:
                result.append(capacity.Candidate(name, False, blocked))
            elif self._maintenance(name) in ("cordon", "drain"):
                result.append(
                    capacity.Candidate(name, False, f"in maintenance ({self._maintenance(name)})")
                )
            else:
                result.append(
                    capacity.evaluate(
                        self.worker_view(remote, order), request, self.state.flavors.cache
                    )
                )
        return result

    def _maintenance(self, cluster: str) -> str:
        obj = self.registry.mk_clusters.get(cluster) or {}
        return str(
            ((obj.get("metadata") or {}).get("annotations") or {}).get(C.MAINTENANCE_ANNOTATION, "")
        )

    async def _place(
        self, key: str, obj: Obj, check: str, clusters: list[str], copies: dict[str, Obj]
    ) -> float | None:
        if self.settings.dispatch_mode is DispatchMode.CAPACITY_AWARE:
            return await self._place_capacity_aware(key, obj, check, clusters, copies)
        return await self._place_many(key, obj, check, clusters, copies)

    async def _place_capacity_aware(
        self, key: str, obj: Obj, check: str, clusters: list[str], copies: dict[str, Obj]
    ) -> float | None:
        placement = self.placements.get(key)
        if placement is None and copies:
            # After a restart: a copy already exists; follow it.
            cluster = sorted(copies)[0]
            placement = Placement(
                cluster, "", {}, time.monotonic() + self.settings.admission_timeout, "recovered"
            )
            self.placements[key] = placement
        if placement is not None:
            remote = self.registry.remote(placement.cluster)
            copy_ = copies.get(placement.cluster)
            if remote is not None and remote.connected and copy_ is not None:
                if ws.is_admitted(copy_) and not ws.is_evicted(copy_):
                    return await self._won(key, obj, check, remote, copies)
                if (
                    time.monotonic() < placement.deadline
                    and ws.is_active(copy_)
                    and not ws.is_evicted(copy_)
                ):
                    return placement.deadline - time.monotonic()
            elif remote is not None and remote.connected and time.monotonic() < placement.deadline:
                return 0.5  # created, not seen by our informer yet
            # Not admitted in time (or the worker went away): withdraw, try the next one.
            self.stats.withdrawn += 1
            self.tried.setdefault(key, set()).add(placement.cluster)
            del self.placements[key]
            if remote is not None and remote.connected:
                await self._delete_copy(remote, key, obj)
            elif remote is not None and not self._lost_long_enough(remote, obj):
                # It may still admit and run it there: wait until it surely cannot.
                self.placements[key] = placement
                return self._lost_remaining(remote, obj)
            self.state.metrics.failover(placement.cluster, "retry")

        candidates = self.candidates(obj, clusters)
        tried = self.tried.get(key, set())
        fresh = [c for c in candidates if c.cluster not in tried]
        if not any(c.fits for c in fresh) and tried:
            self.tried[key] = set()  # every candidate had its turn: start over
            fresh = candidates
        best = capacity.choose(fresh)
        if best is None:
            self.waiting.add(key)
            reasons = "; ".join(c.describe() for c in candidates) or "no worker clusters configured"
            if capacity.never_placeable(candidates):
                return await self._unplaceable(key, obj, check, reasons)
            self.unplaceable_since.pop(key, None)
            await self._set_check(obj, check, "Pending", f"no worker can admit it now: {reasons}")
            return None
        self.waiting.discard(key)
        self.unplaceable_since.pop(key, None)
        remote = self.registry.remote(best.cluster)
        assert remote is not None
        usage = {}
        for (flavor, resource), amount in self._request(obj).usage.items():
            worker_flavor = best.flavors.get(flavor, flavor)
            usage[(best.worker_cluster_queue, worker_flavor, resource)] = amount
        self.placements[key] = Placement(
            best.cluster,
            best.worker_cluster_queue,
            usage,
            time.monotonic() + self.settings.admission_timeout,
            best.reason,
        )
        decision = {
            "cluster": best.cluster,
            "reason": best.reason,
            "rule": "best fit, then fewest waiting, then config order",
            "candidates": [c.describe() for c in candidates],
            "at": time.time(),
        }
        spans.record(
            "manager",
            "dispatch",
            obj,
            attributes={
                "kfed.dispatch.mode": str(self.settings.dispatch_mode),
                "kfed.cluster": best.cluster,
                "kfed.dispatch.reason": best.reason,
                "kfed.dispatch.rule": decision["rule"],
                "kfed.dispatch.candidates": decision["candidates"],
                "kfed.dispatch.tried_before": sorted(tried),
            },
        )
        if not await self._create_copy(remote, obj):
            del self.placements[key]
            return 1.0
        await self._annotate(obj, decision)
        await self._set_check(
            obj,
            check,
            "Pending",
            f"dispatched to {best.cluster}: {best.reason}",
            nominated=[best.cluster],
        )
        return self.settings.admission_timeout

    async def _unplaceable(self, key: str, obj: Obj, check: str, reasons: str) -> float | None:
        """No worker can ever hold it as the workers are configured. It keeps its manager
        quota for ``dispatch_deadline`` (a worker may be given the queue or flavor); then the
        check goes Retry: the manager evicts it, which releases the quota, and requeues it
        with backoff, the reason kept in its Evicted condition."""
        deadline = self.settings.dispatch_deadline
        since = self.unplaceable_since.setdefault(key, time.monotonic())
        left = deadline - (time.monotonic() - since)
        if left > 0:
            await self._set_check(
                obj,
                check,
                "Pending",
                f"no worker can ever admit it as configured: {reasons}; its quota is released "
                f"{deadline:g}s after this was first seen (dispatch deadline) unless one can",
            )
            return left
        self.unplaceable_since.pop(key, None)
        message = (
            f"no worker could admit it within the dispatch deadline of {deadline:g}s: {reasons}; "
            "quota released, requeued"
        )
        log.info("workload %s: %s", key, message)
        self.stats.retries += 1
        await self._set_check(obj, check, "Retry", message)
        return None

    async def _place_many(
        self, key: str, obj: Obj, check: str, clusters: list[str], copies: dict[str, Obj]
    ) -> float | None:
        admitted = [
            (self._admitted_at(c), name)
            for name, c in copies.items()
            if ws.is_admitted(c) and not ws.is_evicted(c)
        ]
        if admitted:
            # Once a winner is chosen it stays chosen: a later reconcile may see another copy
            # admitted as early (timestamps have 1 s resolution) before it sees our own
            # Ready; choosing again would stop the job on the first winner and start it on
            # a second one.
            winner = self.winners.get(key) or min(admitted)[1]
            remote = self.registry.remote(winner)
            if remote is None:
                return 1.0
            return await self._won(key, obj, check, remote, copies)
        allowed = self._allowed(obj)
        usable = [
            n
            for n in clusters
            if (allowed is None or n in allowed)
            and self._maintenance(n) == ""
            and self._blocked_reason(key, n) is None
            and (r := self.registry.remote(n)) is not None
            and r.connected
        ]
        if self.settings.dispatch_mode is DispatchMode.INCREMENTAL:
            step, started = self.rounds.get(key, (1, time.monotonic()))
            if time.monotonic() - started >= self.settings.incremental_round_timeout:
                step, started = step + 1, time.monotonic()
            self.rounds[key] = (step, started)
            usable = usable[: step * self.settings.incremental_step]
        new = [n for n in usable if n not in copies]
        if new:
            spans.record(
                "manager",
                "dispatch",
                obj,
                attributes={
                    "kfed.dispatch.mode": str(self.settings.dispatch_mode),
                    "kfed.clusters": new,
                },
            )
        for name in new:
            remote = self.registry.remote(name)
            if remote is not None:
                await self._create_copy(remote, obj)
        await self._set_check(
            obj,
            check,
            "Pending",
            f"dispatched to {', '.join(usable) or 'no worker'}",
            nominated=sorted(usable),
        )
        return 1.0 if self.settings.dispatch_mode is DispatchMode.INCREMENTAL else None

    @staticmethod
    def _admitted_at(remote_wl: Obj) -> str:
        c = conditions.find(ws.status_of(remote_wl).get("conditions"), C.ADMITTED) or {}
        return str(c.get("lastTransitionTime", ""))

    async def _won(
        self, key: str, obj: Obj, check: str, remote: RemoteCluster, copies: dict[str, Obj]
    ) -> float | None:
        self.winners[key] = remote.name
        # Every other copy goes first, so at most one worker can ever run the job.
        for name in copies:
            if name != remote.name:
                other = self.registry.remote(name)
                if other is not None:
                    await self._delete_copy(other, key, obj)
        job = self._manager_job(obj)
        earlier = self._same_named_remote_job(remote, obj)
        if earlier is not None and not _made_for(earlier, obj):
            return await self._wait_for_earlier_job(obj, check, remote, earlier)
        if job is not None and earlier is None:
            body = remoteobjects.remote_job(
                job,
                workload_name=obj["metadata"]["name"],
                origin=self.settings.origin,
                annotations={tracing.TRACEPARENT_ANNOTATION: tracing.traceparent_of(obj)},
            )
            try:
                await remote.api.create(R.JOBS, body, body["metadata"]["namespace"])
                self.stats.remote_jobs_created += 1
                self.state.metrics.remote_object_created(
                    remote.name, "Job", cluster_queue=ws.cluster_queue_of(obj)
                )
                spans.record(
                    "manager",
                    "remote.create",
                    obj,
                    attributes={"kfed.cluster": remote.name, "k8s.kind": "Job"},
                )
            except errors.AlreadyExists:
                existing = await self._read_remote(remote, R.JOBS, body)
                if existing is None:
                    return 0.5  # deleted meanwhile: create it on the next pass
                if not _ours(existing, self.settings.origin):
                    return await self._refuse_worker(key, obj, check, remote, "Job", existing)
                if not _made_for(existing, obj):
                    return await self._wait_for_earlier_job(obj, check, remote, existing)
        written = await self._set_check(
            obj,
            check,
            "Ready",
            f'The workload was admitted on "{remote.name}"',
            cluster_name=remote.name,
        )
        if written is not None:
            self.state.metrics.admitted_remotely(ws.cluster_queue_of(written), remote.name)
            self.placements.pop(key, None)
            self.tried.pop(key, None)
            started = self.reserved_at.pop(key, None)
            if started is not None:
                latency = time.monotonic() - started
                self.stats.dispatch_latencies.append(latency)
                self.state.metrics.dispatch_done(remote.name, latency)
                spans.record(
                    "manager",
                    "placement",
                    written,
                    start=time.time() - latency,
                    attributes={
                        "kfed.cluster": remote.name,
                        "kfed.dispatch.latency_seconds": latency,
                    },
                )
        return None

    async def _create_copy(self, remote: RemoteCluster, obj: Obj) -> bool:
        body = remoteobjects.remote_workload(
            obj,
            origin=self.settings.origin,
            annotations={
                tracing.TRACEPARENT_ANNOTATION: tracing.traceparent_of(obj),
                # When the worker's shim fences this copy: with the policy, a manager outage
                # shorter than the outage timeout leaves at-most-once jobs running.
                FENCE_AFTER_ANNOTATION: str(self.settings.fence_after(self._failover_policy(obj))),
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
            self.state.metrics.remote_object_created(
                remote.name, "Workload", cluster_queue=ws.cluster_queue_of(obj)
            )
            spans.record(
                "manager",
                "remote.create",
                obj,
                attributes={"kfed.cluster": remote.name, "k8s.kind": "Workload"},
            )
            return True
        except errors.AlreadyExists:
            existing = await self._read_remote(remote, R.WORKLOADS, body)
            if existing is not None and not _ours(existing, self.settings.origin):
                self._block(ws.key_of(obj), remote.name, _foreign_reason("Workload", existing))
                return False
            return True
        except errors.KubeError as err:
            log.info("creating the copy of %s on %s failed: %s", ws.key_of(obj), remote.name, err)
            return False

    async def _read_remote(self, remote: RemoteCluster, res: R.Resource, body: Obj) -> Obj | None:
        meta = body["metadata"]
        try:
            return await remote.api.get(res, meta["name"], meta["namespace"])
        except errors.NotFound:
            return None

    def _block(self, key: str, cluster: str, reason: str) -> None:
        log.warning("workload %s: not placing it on %s: %s", key, cluster, reason)
        until = time.monotonic() + self.settings.foreign_object_recheck
        self.blocked.setdefault(key, {})[cluster] = (reason, until)

    def _blocked_reason(self, key: str, cluster: str) -> str | None:
        reason, until = self.blocked.get(key, {}).get(cluster, ("", 0.0))
        return reason if time.monotonic() < until else None

    async def _refuse_worker(
        self, key: str, obj: Obj, check: str, remote: RemoteCluster, kind: str, foreign: Obj
    ) -> float | None:
        """An object kfed did not create holds the name there: leave it alone, take our copy
        back (it holds the worker's quota for nothing) and place the workload elsewhere."""
        self._block(key, remote.name, _foreign_reason(kind, foreign))
        self.winners.pop(key, None)
        self.placements.pop(key, None)
        self.tried.setdefault(key, set()).add(remote.name)
        await self._delete_copy(remote, key, obj)
        await self._set_check(
            obj, check, "Pending", f"not placed on {remote.name}: {_foreign_reason(kind, foreign)}"
        )
        return 0.1

    async def _wait_for_earlier_job(
        self, obj: Obj, check: str, remote: RemoteCluster, earlier: Obj
    ) -> float:
        """A Job of this name that an earlier workload left on the worker (being deleted, or
        to be collected) must be gone before ours is created: never adopt it."""
        meta = earlier["metadata"]
        how = "being deleted" if meta.get("deletionTimestamp") else "not yet collected"
        await self._set_check(
            obj,
            check,
            "Pending",
            f"admitted on {remote.name}; waiting for the Job {meta['namespace']}/{meta['name']} "
            f"of an earlier workload to be removed there ({how})",
        )
        return 1.0

    async def _delete_copy(self, remote: RemoteCluster, key: str, obj: Obj | None) -> None:
        namespace, name = key.split("/", 1)
        job = self._remote_job(remote, obj) if obj is not None else None
        if job is None:
            for candidate in remote.jobs().items():
                labels = candidate["metadata"].get("labels") or {}
                if (
                    candidate["metadata"]["namespace"] == namespace
                    and labels.get(C.PREBUILT_WORKLOAD_LABEL) == name
                ):
                    job = candidate
        with contextlib.suppress(errors.KubeError):
            if job is not None:
                # Foreground: the Job stays (so this copy counts as still running) until its
                # pods are gone, however long their termination grace.
                await remote.api.delete(
                    R.JOBS, job["metadata"]["name"], namespace, propagation="Foreground"
                )
            await remote.api.delete(R.WORKLOADS, name, namespace)

    async def _delete_everywhere(self, key: str, obj: Obj | None) -> None:
        for remote in self.registry.active():
            if remote.workloads().get(key) is not None or (
                obj is not None and self._remote_job(remote, obj)
            ):
                await self._delete_copy(remote, key, obj)
            else:
                namespace, name = key.split("/", 1)
                for job in remote.jobs().items():
                    if (
                        job["metadata"]["namespace"] == namespace
                        and (job["metadata"].get("labels") or {}).get(C.PREBUILT_WORKLOAD_LABEL)
                        == name
                    ):
                        await self._delete_copy(remote, key, obj)
                        break
        self.manager.workloads.queue.add(key)  # its eviction may be waiting for this

    def _forget(self, key: str) -> None:
        self.finished_remote_jobs.pop(key, None)
        self.winners.pop(key, None)
        self.blocked.pop(key, None)
        self.placements.pop(key, None)
        self.tried.pop(key, None)
        self.waiting.discard(key)
        self.unplaceable_since.pop(key, None)
        self.rounds.pop(key, None)
        self.reserved_at.pop(key, None)

    async def _annotate(self, obj: Obj, decision: dict[str, Any]) -> None:
        meta = obj["metadata"]
        with contextlib.suppress(errors.KubeError):
            await self.state.api.patch(
                R.WORKLOADS,
                meta["name"],
                {"metadata": {"annotations": {PLACEMENT_ANNOTATION: json.dumps(decision)}}},
                meta["namespace"],
            )

    # -- status back to the manager --------------------------------------------------------

    async def _sync_job_status(self, remote: RemoteCluster, obj: Obj) -> None:
        job = self._manager_job(obj)
        remote_job = self._final_remote_job(remote, obj)
        if job is None or remote_job is None:
            return
        if (job.get("spec") or {}).get("suspend") and job_finished(remote_job) is None:
            return  # requeued: only a final state (it finished there unseen) is copied
        status = remoteobjects.job_status_for_manager(remote_job)
        current = job.get("status") or {}
        if not status or status == current:
            return
        # A merge patch only overwrites: fields the worker no longer reports (active: 0 is
        # omitted) must be removed explicitly, or a finished Job would keep active pods.
        patch = {**{k: None for k in _POD_COUNTERS if k in current and k not in status}, **status}
        if current.get("startTime"):
            # The apiserver refuses to move startTime of a running Job: after a move to
            # another worker the manager's Job keeps the time it first started.
            patch.pop("startTime", None)
        if all(current.get(k) == v for k, v in patch.items()):
            return
        meta = job["metadata"]
        try:
            await self.state.api.patch(
                R.JOBS, meta["name"], {"status": patch}, meta["namespace"], subresource="status"
            )
        except errors.NotFound:
            return
        except errors.Invalid as err:
            log.warning(
                "status of Job %s/%s not synced from %s: %s",
                meta["namespace"],
                meta["name"],
                remote.name,
                err.message,
            )

    async def _reset_job_status(self, obj: Obj) -> None:
        """Its pods are gone from the worker: the manager's Job no longer shows them."""
        job = self._manager_job(obj)
        status = (job or {}).get("status") or {}
        if job is None or not any(status.get(k) for k in ("active", "ready", "terminating")):
            return
        meta = job["metadata"]
        with contextlib.suppress(errors.KubeError):
            await self.state.api.patch(
                R.JOBS,
                meta["name"],
                {"status": {"active": None, "ready": None, "terminating": None}},
                meta["namespace"],
                subresource="status",
            )

    async def _finish_from(self, cluster: str, obj: Obj, remote_wl: Obj) -> None:
        remote = self.registry.remote(cluster)
        if remote is None:
            return
        job = self._manager_job(obj)
        if job is not None and self._final_remote_job(remote, obj) is not None:
            await self._sync_job_status(remote, obj)
            return  # the manager's Job controller finishes the Workload from its Job status
        finished = conditions.find(ws.status_of(remote_wl).get("conditions"), C.FINISHED) or {}
        succeeded = finished.get("reason") == C.REASON_SUCCEEDED
        with contextlib.suppress(errors.NotFound):
            await patch_guarded(
                self.state.api,
                R.WORKLOADS,
                obj,
                lambda o: ws.finish(o, succeeded, str(finished.get("message", ""))),
                subresource="status",
            )

    # -- a worker came back ------------------------------------------------------------------

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
            keep = (
                obj is not None
                and ws.has_reservation(obj)
                and not ws.is_finished(obj)
                and (
                    ws.status_of(obj).get("clusterName") == remote.name
                    or (key in self.placements and self.placements[key].cluster == remote.name)
                )
                and ws.is_active(copy_)
            )
            if _finished_unseen(copy_, obj):
                self.queue.add(key)  # the reconcile records that run: it never runs again
            elif not keep:
                log.info("removing stale copy of %s from %s", key, remote.name)
                await self._delete_copy(remote, key, obj)
        await self._collect_orphan_jobs(remote)

    async def collect_garbage(self) -> int:
        """Delete remote copies of our origin whose manager workload is gone or finished."""
        removed = 0
        for remote in self.registry.active():
            for copy_ in list(remote.workloads().items()):
                key = ws.key_of(copy_)
                obj = self.state.workloads.get(key)
                if _finished_unseen(copy_, obj):
                    continue  # the reconcile records that run first
                if obj is None or ws.is_finished(obj) or self._placed_elsewhere(obj, remote):
                    await self._delete_copy(remote, key, obj)
                    removed += 1
            removed += await self._collect_orphan_jobs(remote)
        return removed

    def _placed_elsewhere(self, obj: Obj, remote: RemoteCluster) -> bool:
        """The workload runs on another worker now (its check Ready there): a copy here is a
        leftover, e.g. fenced while this worker was lost or unregistered, then re-added."""
        federated = self.multikueue_check(obj)
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
