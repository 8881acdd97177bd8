"""Self-fencing: a worker stops a manager's workloads when that manager's Lease expires.

The manager renews Lease ``kfed-manager-<origin>`` in the shim's namespace every few seconds.
When the shim has not seen it change for long enough (judged by the shim's own clock), the
manager may have lost this worker and may soon run the workloads elsewhere: the shim
stops them the way upstream Kueue stops work: it deactivates the copy (``spec.active:
false``) and suspends its job, both marked fenced (``kfed.io/fenced``), so the Job controller
removes the pods of a suspended Job, which never count toward its ``backoffLimit``. It
deletes pods itself only to shorten their termination grace, or when the job could not be
suspended in time; the manager never takes a fenced run's end as the job's result (a Job
whose running pods were deleted can end ``Failed``). A copy whose job already ended is not
fenced: that run ended on its own. A deactivated copy is never reactivated here; the manager
removes it when it reconnects. The shim also renews its own heartbeat Lease, which tells the
manager that this worker can fence itself.

In ``fence-only`` mode (a worker where upstream Kueue admits) the shim only deactivates the
copy: Kueue then evicts it and suspends its job, and the Job controller removes the pods, as
for any Workload a person deactivates. The shim waits ``kueue_wait`` for that suspension,
then shortens the pods' grace as above; a job Kueue did not suspend by then (Kueue down) it
suspends itself, so fencing never depends on Kueue being up.

Every replica of a highly available shim fences, leader or not: fencing only ever stops
copies (it never reactivates one nor resumes a job), each replica judges the silence by
what it saw itself, and two replicas fencing the same copy write the same fields. So a
fence never waits for a leader to be elected. The admitting job controller never starts a
job marked fenced, whatever its cache still says of the copy.

"Long enough" is per copy: the manager writes it on each copy (annotation
``kfed.io/fence-after-seconds``): the lease duration for copies of the fast failover policy,
the outage timeout for at-most-once ones, so that a manager outage shorter than that leaves
them running. Silence only counts while the shim itself can reach its own API server: after
its own control plane was down, the manager gets a whole fence-after window again to renew
(it could not renew either), so a worker's control-plane outage never fences by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from manager.api import constants as C
from manager.api.view import labels_of
from manager.controllers import eventreasons as told
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.base import JobKind, merge_fields
from manager.controllers.jobkinds.informers import JobInformers
from manager.federation.decisions.leftovers import FENCED_ANNOTATION
from manager.federation.settings import (
    FENCE_AFTER_ANNOTATION,
    MANAGER_LEASE_PREFIX,
    SHIM_HEARTBEAT_LEASE,
    SHIM_MODE_ANNOTATION,
)
from manager.kube import errors, lease
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj
from manager.kube.events import EventRecorder
from manager.kube.informer import Informer
from manager.kube.tasks import stop_tasks
from manager.telemetry.metrics import Metrics
from worker_shim.podstopping import pod_finished, stop_pods

log = logging.getLogger(__name__)

__all__ = [
    "FENCED_ANNOTATION",
    "Fencing",
    "FencingSettings",
    "FencingView",
    "ShimMode",
    "fence_after",
]


class ShimMode(StrEnum):
    ADMIT = "admit"
    """kfed's shim admits here (the same core as the manager) and fences."""
    FENCE_ONLY = "fence-only"
    """Upstream Kueue admits here; the shim only fences, by deactivating copies."""


class FencingView(Protocol):
    """What fencing reads and reports through: the admitting controller's ``ClusterState``
    (the in-process test bed), or ``copies.ManagerCopies`` (the shim process)."""

    @property
    def workloads(self) -> Informer: ...
    @property
    def job_kinds(self) -> JobInformers: ...
    @property
    def metrics(self) -> Metrics: ...
    @property
    def events(self) -> EventRecorder: ...


@dataclass(frozen=True, slots=True)
class FencingSettings:
    namespace: str = "kueue-system"
    identity: str = "kfed-worker-shim"
    mode: ShimMode = ShimMode.ADMIT
    heartbeat_period: float = 2.0
    heartbeat_duration: int = 10
    check_period: float = 0.25
    pod_grace_seconds: int = 1
    """Termination grace of a fenced job's pods. The Job controller deletes a suspended
    Job's pods with their own grace (30 s unless set), longer than the manager waits before
    running the job elsewhere; so the shim deletes them again with this much grace, which
    the manager's ``fence_grace`` covers."""
    release_wait: float = 0.5
    """Seconds a fence waits for the Job controller to stop a suspended job's pods (it takes
    them off the job's count first: they never count as failures) before deleting those
    still running itself. Well within the manager's ``fence_grace`` with the pods' grace."""
    release_poll: float = 0.05
    kueue_wait: float = 1.0
    """Fence-only: seconds a fence waits for upstream Kueue to suspend a deactivated copy's
    job before suspending it itself. Kueue does it within a fraction of a second."""


class Fencing:
    def __init__(
        self, api: KubeApi, state: FencingView, settings: FencingSettings | None = None
    ) -> None:
        self.api = api
        self.state = state
        self.settings = settings or FencingSettings()
        self.leases = Informer(api, R.LEASES, namespace=self.settings.namespace)
        self.observers: dict[str, lease.LeaseObserver] = {}
        self.fenced: set[str] = set()
        """Origins whose lease has expired (their workloads are kept deactivated)."""
        self.last_contact: float | None = None
        """Monotonic time of the last heartbeat this shim wrote to its own API server."""
        self.sighted_since: float | None = None
        """Start of the current unbroken run of contact with its own API server: silence of
        a manager lease only counts from here (before, the shim could not have seen it)."""
        self.stopping: set[asyncio.Task[None]] = set()
        """Fenced copies whose pods are being stopped (the check loop never waits for them)."""

    async def run(self) -> None:
        with contextlib.suppress(errors.AlreadyExists, errors.KubeError):
            await self.api.create(R.NAMESPACES, {"metadata": {"name": self.settings.namespace}})
        tasks = [
            asyncio.create_task(self.leases.run(), name="fencing-leases"),
            asyncio.create_task(self._heartbeat(), name="fencing-heartbeat"),
            asyncio.create_task(self._watch_leases(), name="fencing-check"),
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            await stop_tasks([*tasks, *self.stopping])

    async def _heartbeat(self) -> None:
        ns, name = self.settings.namespace, SHIM_HEARTBEAT_LEASE
        while True:
            try:
                record, current = await lease.read(self.api, ns, name)
                now = lease.micro_time()
                await lease.write(
                    self.api,
                    ns,
                    name,
                    lease.LeaseRecord(
                        holder=self.settings.identity,
                        duration_seconds=self.settings.heartbeat_duration,
                        renew_time=now,
                        acquire_time=record.acquire_time if record else now,
                        transitions=record.transitions if record else 0,
                    ),
                    current,
                    annotations={SHIM_MODE_ANNOTATION: self.settings.mode.value},
                )
                self._in_contact()
            except (errors.Conflict, errors.AlreadyExists):
                # Another replica renewed it in between: the heartbeat lives, and this one's
                # API server answered.
                self._in_contact()
            except (errors.KubeError, TimeoutError) as err:
                log.info("heartbeat lease not renewed: %s", err)
            await asyncio.sleep(self.settings.heartbeat_period)

    @property
    def _contact_gap(self) -> float:
        """Longer than this without a heartbeat written: the shim lost its own API server."""
        return 2 * self.settings.heartbeat_period + 1.0

    def _in_contact(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if self.last_contact is None or now - self.last_contact > self._contact_gap:
            if self.last_contact is not None:
                log.warning(
                    "in contact with this worker's API server again: lease silence counts from now"
                )
            self.sighted_since = now
        self.last_contact = now

    def blind(self, now: float | None = None) -> bool:
        """True while the shim cannot reach its own API server (nor has it yet)."""
        now = time.monotonic() if now is None else now
        return self.last_contact is None or now - self.last_contact > self._contact_gap

    def silences(self, now: float | None = None) -> dict[str, float]:
        """Seconds each manager origin's lease has gone without a renewal that this shim
        could have seen (infinite when released); nothing while the shim is blind."""
        now = time.monotonic() if now is None else now
        if self.blind(now):
            return {}
        silent = {}
        for obj in self.leases.items():
            name = obj["metadata"]["name"]
            if not name.startswith(MANAGER_LEASE_PREFIX):
                continue
            origin = name.removeprefix(MANAGER_LEASE_PREFIX)
            observer = self.observers.setdefault(origin, lease.LeaseObserver())
            observer.observe(lease.LeaseRecord.from_lease(obj))
            record = observer.record
            if record is None or not record.holder:
                silent[origin] = float("inf")  # released: the manager let go on purpose
                continue
            since = max(observer.observed_at, self.sighted_since or 0.0)
            silent[origin] = max(0.0, now - since)
        return silent

    def _lease_duration(self, origin: str) -> float:
        record = self.observers[origin].record if origin in self.observers else None
        return float(record.duration_seconds) if record is not None else 0.0

    async def _watch_leases(self) -> None:
        await self.leases.synced.wait()
        await self.state.workloads.synced.wait()
        for jobs in list(self.state.job_kinds.values()):
            await jobs.synced.wait()  # a copy's job must be found when it is fenced
        while True:
            silences = self.silences()
            expired = {o for o, s in silences.items() if s >= self._lease_duration(o)}
            for origin in expired - self.fenced:
                log.warning(
                    "manager lease for origin %s expired: fencing its copies as their "
                    "fence-after time passes",
                    origin,
                )
                self.state.metrics.fencing_started(origin)
            for origin in self.fenced - expired:
                log.info("manager lease for origin %s renewed again", origin)
                self.state.metrics.fencing_ended(origin)
            self.fenced = expired
            if expired:
                await self.fence({o: silences[o] for o in expired})
            await asyncio.sleep(self.settings.check_period)

    async def fence(self, silences: dict[str, float]) -> int:
        """Deactivate every still-active workload of these origins whose own fence-after time
        has passed in that silence, and start stopping its job; returns how many."""
        count = 0
        for obj in self.state.workloads.items():
            meta = obj["metadata"]
            origin = labels_of(obj).get(C.MULTIKUEUE_ORIGIN_LABEL)
            if origin not in silences or not ws.is_active(obj) or ws.is_finished(obj):
                continue
            if silences[origin] < fence_after(obj, self._lease_duration(origin)):
                continue  # at-most-once: left running through a manager outage this short
            jobs = self._jobs_of(meta["namespace"], meta["name"])
            if any(kind.outcome(job) is not None for kind, job in jobs):
                continue  # it ended on its own: its end is recorded on the copy, not fenced
            reason = f"manager lease of origin {origin} expired"
            patch = {
                "metadata": {"annotations": {FENCED_ANNOTATION: reason}},
                "spec": {"active": False},
            }
            try:
                written = await self.api.patch(R.WORKLOADS, meta["name"], patch, meta["namespace"])
            except errors.KubeError as err:
                log.warning("fencing %s/%s failed: %s", meta["namespace"], meta["name"], err)
                continue
            # Seen inactive at once by this shim's job controller: it must never resume the
            # job we are about to suspend from an older copy in its cache.
            self.state.workloads.remember_written(ws.key_of(written), obj, written)
            count += 1
            told.fenced(self.state.events, written, origin, silences[origin])
            task = asyncio.create_task(
                self._stop_jobs(meta["namespace"], jobs, reason), name=f"fence/{meta['name']}"
            )
            self.stopping.add(task)
            task.add_done_callback(self.stopping.discard)
        return count

    def _jobs_of(self, namespace: str, workload: str) -> list[tuple[JobKind, Obj]]:
        """Our jobs (of any kind) made for the copy ``namespace/workload``."""
        found = []
        for kind, jobs in self.state.job_kinds.items():
            for job in jobs.items():
                jmeta = job["metadata"]
                if (
                    jmeta.get("namespace") == namespace
                    and labels_of(job).get(C.PREBUILT_WORKLOAD_LABEL) == workload
                ):
                    found.append((kind, job))
        return found

    async def _stop_jobs(
        self, namespace: str, jobs: list[tuple[JobKind, Obj]], reason: str
    ) -> None:
        """Suspend the fenced copy's jobs (marked fenced, for the manager) so the Job
        controller removes their pods uncounted (fence-only: those Kueue did not suspend in
        time); then shorten those pods' grace, and delete any pod still running once
        ``release_wait`` is over (the job could not be suspended: such a pod may count as a
        failure, never as the job's result)."""
        selectors = [kind.pod_selector(job["metadata"]["name"]) for kind, job in jobs]
        if self.settings.mode is ShimMode.FENCE_ONLY:
            try:
                jobs = await self._not_suspended_by_kueue(namespace, jobs)
            except errors.KubeError as err:
                log.warning("reading fenced jobs in %s: %s; suspending them", namespace, err)
        suspended = True
        for kind, job in jobs:
            name = job["metadata"]["name"]
            patch = merge_fields(
                kind.suspend_fields(True, job),
                {"metadata": {"annotations": {FENCED_ANNOTATION: reason}}},
            )
            try:
                await self.api.patch(kind.resource, name, patch, namespace)
            except errors.NotFound:
                continue
            except errors.KubeError as err:
                suspended = False
                log.warning(
                    "suspending fenced %s %s/%s: %s", kind.resource.kind, namespace, name, err
                )
        settings = self.settings
        try:
            if suspended:
                deadline = time.monotonic() + settings.release_wait
                while not await self._released(namespace, selectors):
                    if time.monotonic() >= deadline:
                        log.warning(
                            "pods of fenced jobs in %s not stopped by their Job controller "
                            "in %.1fs: deleting them",
                            namespace,
                            settings.release_wait,
                        )
                        break
                    await asyncio.sleep(settings.release_poll)
            for selector in selectors:
                await stop_pods(self.api, namespace, selector, settings.pod_grace_seconds)
        except errors.KubeError as err:
            log.warning("stopping the pods of fenced jobs in %s: %s", namespace, err)

    async def _not_suspended_by_kueue(
        self, namespace: str, jobs: list[tuple[JobKind, Obj]]
    ) -> list[tuple[JobKind, Obj]]:
        """Those of ``jobs`` that upstream Kueue has not suspended within ``kueue_wait`` of
        the copy's deactivation (gone ones dropped), read from the API server."""
        deadline = time.monotonic() + self.settings.kueue_wait
        left = jobs
        while True:
            still: list[tuple[JobKind, Obj]] = []
            for kind, job in left:
                try:
                    current = await self.api.get(kind.resource, job["metadata"]["name"], namespace)
                except errors.NotFound:
                    continue
                if not kind.is_suspended(current):
                    still.append((kind, current))
            if not still or time.monotonic() >= deadline:
                if still:
                    log.warning(
                        "Kueue did not suspend fenced jobs in %s within %.1fs: suspending them",
                        namespace,
                        self.settings.kueue_wait,
                    )
                return still
            left = still
            await asyncio.sleep(self.settings.release_poll)

    async def _released(self, namespace: str, selectors: list[str]) -> bool:
        """No pod of these jobs still runs without being deleted already."""
        for selector in selectors:
            pods = await self.api.list(R.PODS, namespace, label_selector=selector)
            for pod in pods.get("items") or []:
                if not pod_finished(pod) and not pod["metadata"].get("deletionTimestamp"):
                    return False
        return True


def fence_after(workload: dict[str, object], lease_duration: float) -> float:
    """Seconds of lease silence after which this copy is fenced: the manager's word on the
    copy, never less than the lease's own duration (a copy without it: the lease duration)."""
    meta = workload.get("metadata")
    annotations = (meta.get("annotations") if isinstance(meta, dict) else None) or {}
    try:
        return max(lease_duration, float(annotations.get(FENCE_AFTER_ANNOTATION, 0)))
    except (TypeError, ValueError):
        return lease_duration
