"""Self-fencing: a worker stops a manager's workloads when that manager's Lease expires.

The manager renews Lease ``kfed-manager-<origin>`` in the shim's namespace every few seconds.
When the shim has not seen it change for long enough (judged by the shim's own clock), the
manager may have lost this worker and may soon run the workloads elsewhere: the shim
deactivates (``spec.active: false``) those workloads, so their Jobs are suspended and their
pods stop. A deactivated copy is never reactivated here; the manager removes it when it
reconnects. The shim also renews its own heartbeat Lease, which tells the manager that this
worker can fence itself.

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

from manager.api import constants as C
from manager.controllers import eventreasons as told
from manager.controllers import workloadstatus as ws
from manager.controllers.state import ClusterState
from manager.federation.settings import (
    FENCE_AFTER_ANNOTATION,
    MANAGER_LEASE_PREFIX,
    SHIM_HEARTBEAT_LEASE,
)
from manager.kube import errors, lease
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.informer import Informer
from manager.kube.tasks import stop_tasks

log = logging.getLogger(__name__)

FENCED_ANNOTATION = "kfed.io/fenced"


@dataclass(frozen=True, slots=True)
class FencingSettings:
    namespace: str = "kueue-system"
    identity: str = "kfed-worker-shim"
    heartbeat_period: float = 2.0
    heartbeat_duration: int = 10
    check_period: float = 0.25
    pod_grace_seconds: int = 1
    """Termination grace of a fenced job's pods. Suspending the Job lets its pods take their
    own grace (30 s unless set), longer than the manager waits before running the job
    elsewhere; so the shim deletes them itself with this much grace, which the manager's
    ``fence_grace`` covers."""


class Fencing:
    def __init__(
        self, api: KubeApi, state: ClusterState, settings: FencingSettings | None = None
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
            await stop_tasks(tasks)

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
                )
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
        has passed in that silence; returns how many."""
        count = 0
        for obj in self.state.workloads.items():
            meta = obj["metadata"]
            origin = (meta.get("labels") or {}).get(C.MULTIKUEUE_ORIGIN_LABEL)
            if origin not in silences or not ws.is_active(obj) or ws.is_finished(obj):
                continue
            if silences[origin] < fence_after(obj, self._lease_duration(origin)):
                continue  # at-most-once: left running through a manager outage this short
            patch = {
                "metadata": {
                    "annotations": {FENCED_ANNOTATION: f"manager lease of origin {origin} expired"}
                },
                "spec": {"active": False},
            }
            try:
                written = await self.api.patch(R.WORKLOADS, meta["name"], patch, meta["namespace"])
                count += 1
                told.fenced(self.state.events, written, origin, silences[origin])
            except errors.KubeError as err:
                log.warning("fencing %s/%s failed: %s", meta["namespace"], meta["name"], err)
                continue
            await self._stop_pods(meta["namespace"], meta["name"])
        return count

    async def _stop_pods(self, namespace: str, workload: str) -> None:
        """Delete the running pods of the fenced workload's job (of any kind) with a short
        grace period."""
        for kind, jobs in self.state.job_kinds.items():
            for job in jobs.items():
                jmeta = job["metadata"]
                if (
                    jmeta.get("namespace") != namespace
                    or (jmeta.get("labels") or {}).get(C.PREBUILT_WORKLOAD_LABEL) != workload
                ):
                    continue
                selector = f"{kind.pod_label}={jmeta['name']}"
                try:
                    await stop_pods(self.api, namespace, selector, self.settings.pod_grace_seconds)
                except errors.KubeError as err:
                    log.warning("stopping the pods of fenced %s/%s: %s", namespace, workload, err)


STOP_ATTEMPTS = 3


async def stop_pods(api: KubeApi, namespace: str, selector: str, grace_seconds: int) -> int:
    """Delete a job's pods (``selector``) that still run (or wait to); returns how many.

    A pod that finished is never touched: its result may not be counted yet (the Job
    controller counts a pod by its tracking finalizer, which a deleted pod can lose first, as
    kwok's does), and a fence that erased a run which had already succeeded would make the
    manager run the job again. Each delete holds the version it judged, so a pod that
    finishes between the read and the delete is judged again rather than deleted."""
    pods = await api.list(R.PODS, namespace, label_selector=selector)
    stopped = 0
    for pod in pods.get("items") or []:
        for _ in range(STOP_ATTEMPTS):
            meta = pod["metadata"]
            if pod_finished(pod) or meta.get("deletionTimestamp"):
                break
            try:
                await api.delete(
                    R.PODS,
                    meta["name"],
                    namespace,
                    uid=meta.get("uid"),
                    resource_version=meta.get("resourceVersion"),
                    grace_period_seconds=grace_seconds,
                )
                stopped += 1
                break
            except errors.NotFound:
                break
            except errors.Conflict:
                pass  # it changed since it was read: judge it again
            try:
                pod = await api.get(R.PODS, meta["name"], namespace)
            except errors.NotFound:
                break
    return stopped


def pod_finished(pod: dict[str, object]) -> bool:
    status = pod.get("status")
    return isinstance(status, dict) and status.get("phase") in ("Succeeded", "Failed")


def fence_after(workload: dict[str, object], lease_duration: float) -> float:
    """Seconds of lease silence after which this copy is fenced: the manager's word on the
    copy, never less than the lease's own duration (a copy without it: the lease duration)."""
    meta = workload.get("metadata")
    annotations = (meta.get("annotations") if isinstance(meta, dict) else None) or {}
    try:
        return max(lease_duration, float(annotations.get(FENCE_AFTER_ANNOTATION, 0)))
    except (TypeError, ValueError):
        return lease_duration
