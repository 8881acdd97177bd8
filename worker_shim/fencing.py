"""Self-fencing: a worker stops a manager's workloads when that manager's Lease expires.

The manager renews Lease ``kfed-manager-<origin>`` in the shim's namespace every few seconds.
When the shim has not seen it change for its ``leaseDurationSeconds`` (judged by the shim's
own clock), the manager may have lost this worker and will soon run the workloads elsewhere:
the shim deactivates (``spec.active: false``) every workload of that origin, so its Job is
suspended and its pods stop. A deactivated copy is never reactivated here; the manager
removes it when it reconnects. The shim also renews its own heartbeat Lease, which tells the
manager that this worker can fence itself (so the manager may fail over fast).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.controllers.state import ClusterState
from manager.federation.settings import MANAGER_LEASE_PREFIX, SHIM_HEARTBEAT_LEASE
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
            except errors.KubeError as err:
                log.info("heartbeat lease not renewed: %s", err)
            await asyncio.sleep(self.settings.heartbeat_period)

    def expired_origins(self) -> set[str]:
        expired = set()
        for obj in self.leases.items():
            name = obj["metadata"]["name"]
            if not name.startswith(MANAGER_LEASE_PREFIX):
                continue
            origin = name.removeprefix(MANAGER_LEASE_PREFIX)
            observer = self.observers.setdefault(origin, lease.LeaseObserver())
            observer.observe(lease.LeaseRecord.from_lease(obj))
            if observer.expired():
                expired.add(origin)
        return expired

    async def _watch_leases(self) -> None:
        await self.leases.synced.wait()
        await self.state.workloads.synced.wait()
        while True:
            expired = self.expired_origins()
            for origin in expired - self.fenced:
                log.warning("manager lease for origin %s expired: fencing its workloads", origin)
                self.state.metrics.fencing_started(origin)
            for origin in self.fenced - expired:
                log.info("manager lease for origin %s renewed again", origin)
                self.state.metrics.fencing_ended(origin)
            self.fenced = expired
            if expired:
                await self.fence(expired)
            await asyncio.sleep(self.settings.check_period)

    async def fence(self, origins: set[str]) -> int:
        """Deactivate every workload of these origins that is still active; returns how many."""
        count = 0
        for obj in self.state.workloads.items():
            meta = obj["metadata"]
            origin = (meta.get("labels") or {}).get(C.MULTIKUEUE_ORIGIN_LABEL)
            if origin not in origins or not ws.is_active(obj) or ws.is_finished(obj):
                continue
            patch = {
                "metadata": {
                    "annotations": {FENCED_ANNOTATION: f"manager lease of origin {origin} expired"}
                },
                "spec": {"active": False},
            }
            try:
                await self.api.patch(R.WORKLOADS, meta["name"], patch, meta["namespace"])
                count += 1
            except errors.KubeError as err:
                log.warning("fencing %s/%s failed: %s", meta["namespace"], meta["name"], err)
                continue
            await self._stop_pods(meta["namespace"], meta["name"])
        return count

    async def _stop_pods(self, namespace: str, workload: str) -> None:
        """Delete the pods of the fenced workload's Job with a short grace period."""
        for job in self.state.jobs.items():
            jmeta = job["metadata"]
            if (
                jmeta.get("namespace") != namespace
                or (jmeta.get("labels") or {}).get(C.PREBUILT_WORKLOAD_LABEL) != workload
            ):
                continue
            try:
                pods = await self.api.list(
                    R.PODS,
                    namespace,
                    label_selector=f"batch.kubernetes.io/job-name={jmeta['name']}",
                )
                for pod in pods.get("items") or []:
                    await self.api.delete(
                        R.PODS,
                        pod["metadata"]["name"],
                        namespace,
                        uid=pod["metadata"].get("uid"),
                        grace_period_seconds=self.settings.pod_grace_seconds,
                    )
            except errors.KubeError as err:
                log.warning("stopping the pods of fenced %s/%s: %s", namespace, workload, err)
