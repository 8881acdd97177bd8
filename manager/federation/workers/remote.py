"""One worker cluster as the manager sees it: a connection, informers on the objects the
manager reads there, and the fencing Lease the manager renews there.

Connection health is judged by the Lease renewals, not by the informers (which reconnect on
their own): the first failed renewal marks the worker *lost*, stops renewals (so the last
write that may have landed is known), and fixes the moment after which the worker's shim has
surely fenced itself: ``fence_deadline``. Reconnection is retried with capped, jittered
backoff; on success the ``on_reconnect`` hook runs (it removes stale copies) before renewals
resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from manager.api import constants as C
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.jobkinds.informers import JobInformers
from manager.controllers.jobkinds.jobset import JOBSET
from manager.controllers.jobkinds.raycluster import RAYCLUSTER
from manager.controllers.jobkinds.trainjob import TRAINJOB
from manager.federation.settings import (
    MANAGER_LEASE_PREFIX,
    SHIM_HEARTBEAT_LEASE,
    SHIM_MODE_ANNOTATION,
    TOPOLOGY_REPORT,
    FederationSettings,
)
from manager.kube import discovery, errors, lease
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj
from manager.kube.backoff import Backoff
from manager.kube.informer import Informer
from manager.kube.tasks import stop_tasks

log = logging.getLogger(__name__)

ReconnectHook = Callable[["RemoteCluster"], Awaitable[None]]

REASON_SAME_CLUSTER = "SameClusterAsManager"
IDENTITY_NAMESPACE = "kube-system"
"""A cluster's identity: the UID of its kube-system namespace (created once, with the
cluster, and never deleted), the same identity cluster-inventory tools use."""


async def cluster_identity(api: KubeApi) -> str | None:
    """The cluster's identity, or None when it cannot be read (then nothing is compared)."""
    try:
        ns = await api.get(R.NAMESPACES, IDENTITY_NAMESPACE)
    except errors.KubeError:
        return None
    return str(ns["metadata"].get("uid") or "") or None


class RefusedWorker(Exception):
    """The worker answers, but must not be used (e.g. it is the manager cluster itself)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


JOBS_BY_WORKLOAD = "workload"

FEDERATED_KINDS: tuple[JobKind, ...] = (BATCH_JOB, JOBSET, RAYCLUSTER, TRAINJOB)
"""The kinds of job kfed places on workers; a worker gets one of them only while it serves
that kind (its CRD is installed there)."""
KINDS_RECHECK_SECONDS = 30.0
"""How often a connected worker is asked again which of those kinds it serves."""
DEVICE_INFORMERS: dict[str, R.Resource] = {
    "resourceslices": R.RESOURCE_SLICES,
    "resourceclaims": R.RESOURCE_CLAIMS,
    "deviceclasses": R.DEVICE_CLASSES,
}
"""A worker's DRA objects, followed while it serves ``resource.k8s.io/v1`` (placement by
devices, decisions/devices.py): every ResourceSlice and DeviceClass, and every ResourceClaim
(any namespace: a device is taken whoever claimed it)."""


def workload_keys_of_job(job: Obj) -> list[str]:
    """``namespace/name`` of the manager workload a Job of ours was made for."""
    meta = job.get("metadata") or {}
    name = (meta.get("labels") or {}).get(C.PREBUILT_WORKLOAD_LABEL)
    return [f"{meta.get('namespace')}/{name}"] if name else []


@dataclass
class ConnectionState:
    connected: bool = False
    reason: str = C.REASON_CLIENT_CONNECTION_FAILED
    message: str = "Connecting"
    attempts: int = 0
    next_attempt: float | None = None
    lost_since: float | None = None
    """Monotonic time of the first failure of the current outage (survives retries)."""
    fence_deadline: float | None = None
    """Monotonic time after which this worker has surely fenced our workloads."""
    last_renew_start: float | None = None
    renewals: int = 0
    could_fence: bool = False
    """Whether the worker's shim was alive when we lost it: only then will it fence."""
    shim_alive_at_handover: bool = False
    """The connection this one replaced (its Secret changed) saw the shim alive: if this one
    fails before it ever connects, the worker can still fence."""


@dataclass
class RemoteCluster:
    name: str
    api: KubeApi
    settings: FederationSettings
    on_reconnect: ReconnectHook | None = None
    on_change: Callable[[], None] | None = None
    """Its connection state changed (connected, lost, refused, its shim came or went)."""
    on_capacity: Callable[[], None] | None = None
    """Its queues, flavors or our copies there changed: a waiting workload may fit now."""
    on_connectivity: Callable[[RemoteCluster], None] | None = None
    state: ConnectionState = field(default_factory=ConnectionState)
    informers: dict[str, Informer] = field(default_factory=dict)
    job_informers: JobInformers = field(
        default_factory=lambda: JobInformers((JOBS_BY_WORKLOAD, workload_keys_of_job))
    )
    """Our jobs there, one informer per kind it serves (found again on every connect)."""
    shim_lease: lease.LeaseObserver = field(default_factory=lease.LeaseObserver)
    manager_identity: str | None = None
    """The manager cluster's identity: a worker with the same one is the manager itself."""
    clock: Callable[[], float] = time.monotonic
    """Monotonic: the lease renewals and the outage timings (the dispatcher's clock)."""
    device_generation: int = 0
    """Bumped on every change of its slices or classes (what the device inventory is made
    of), so that the dispatcher rebuilds that inventory only when it changed."""
    claims_generation: int = 0
    """Bumped on every change of its ResourceClaims (what is allocated)."""
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _shim_renewals_seen: int = 0
    _could_fence: bool = False

    @property
    def origin_selector(self) -> str:
        """The label selector of the objects this manager made there."""
        return f"{C.MULTIKUEUE_ORIGIN_LABEL}={self.settings.origin}"

    def __post_init__(self) -> None:
        origin = self.origin_selector
        ns = self.settings.namespace
        self.informers = {
            "clusterqueues": Informer(self.api, R.CLUSTER_QUEUES),
            "localqueues": Informer(self.api, R.LOCAL_QUEUES),
            "resourceflavors": Informer(self.api, R.RESOURCE_FLAVORS),
            "workloads": Informer(self.api, R.WORKLOADS, label_selector=origin),
            "jobs": Informer(self.api, R.JOBS, label_selector=origin),
            "leases": Informer(self.api, R.LEASES, namespace=ns),
            # TAS: the shim's topology report (worker_shim/topologyreport.py, docs/tas.md).
            "configmaps": Informer(self.api, R.CONFIGMAPS, namespace=ns),
        }
        # Our jobs there filed by the manager workload they were made for (JOBS_BY_WORKLOAD):
        # finding them must not scan every job of the worker.
        self.job_informers.add(BATCH_JOB, self.informers["jobs"])
        # Wake-ups only for what can change a decision: lease renewals (ours every few
        # seconds, the shim's heartbeat) matter only when the shim comes or goes, and Jobs
        # are followed by the dispatcher itself.
        self.informers["leases"].subscribe(lambda _: self._on_lease())
        for name in ("clusterqueues", "localqueues", "resourceflavors", "workloads", "configmaps"):
            self.informers[name].subscribe(lambda _: self._capacity_changed())

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def _capacity_changed(self) -> None:
        if self.on_capacity is not None:
            self.on_capacity()

    def _on_lease(self) -> None:
        could_fence = self.can_fence
        if could_fence != self._could_fence:
            self._could_fence = could_fence
            self._changed()

    @property
    def lease_name(self) -> str:
        return MANAGER_LEASE_PREFIX + self.settings.origin

    @property
    def connected(self) -> bool:
        return self.state.connected

    @property
    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers.values())

    def workloads(self) -> Informer:
        return self.informers["workloads"]

    def jobs(self, kind: JobKind = BATCH_JOB) -> Informer | None:
        """Our jobs of ``kind`` there (None: the worker does not serve that kind)."""
        return self.job_informers.get(kind)

    def serves(self, kind: JobKind) -> bool:
        return kind in self.job_informers

    async def _follow_served_kinds(self) -> None:
        """Follow our jobs of each federated kind the worker serves now (a CRD installed
        after the last connect included)."""
        for kind in FEDERATED_KINDS:
            if kind in self.job_informers:
                continue
            if not await discovery.serves(self.api, kind.resource):
                continue
            informer = Informer(self.api, kind.resource, label_selector=self.origin_selector)
            self.job_informers.add(kind, informer)
            name = f"jobs.{kind.resource.group}"
            self.informers[name] = informer
            self._tasks.append(asyncio.create_task(informer.run(), name=f"{self.name}/{name}"))
            log.info("worker %s serves %s: following ours there", self.name, kind.resource.kind)

    @property
    def serves_devices(self) -> bool:
        """It serves resource.k8s.io/v1 and we follow its devices there."""
        return all(name in self.informers for name in DEVICE_INFORMERS)

    def device_objects(self) -> tuple[list[Obj], list[Obj], list[Obj]]:
        """Its ResourceSlices, ResourceClaims and DeviceClasses as the informers hold them
        (empty while it serves no DRA)."""
        if not self.serves_devices:
            return [], [], []
        return (
            self.informers["resourceslices"].items(),
            self.informers["resourceclaims"].items(),
            self.informers["deviceclasses"].items(),
        )

    async def _follow_devices(self) -> None:
        """Follow its DRA objects once it serves resource.k8s.io/v1 (discovery, as for the
        kinds of job)."""
        if self.serves_devices or not await discovery.serves(self.api, R.RESOURCE_SLICES):
            return
        for name, resource in DEVICE_INFORMERS.items():
            informer = Informer(self.api, resource)
            if name == "resourceclaims":
                informer.subscribe(lambda _: self._claims_changed())
            else:
                informer.subscribe(lambda _: self._devices_changed())
            self.informers[name] = informer
            self._tasks.append(asyncio.create_task(informer.run(), name=f"{self.name}/{name}"))
        log.info("worker %s serves %s: following its devices", self.name, R.RESOURCE_SLICES.group)

    def _devices_changed(self) -> None:
        self.device_generation += 1
        self._capacity_changed()

    def _claims_changed(self) -> None:
        self.claims_generation += 1
        self._capacity_changed()

    def topology_report(self) -> Obj | None:
        """TAS: the shim's ConfigMap of its topology capacity, if it writes one."""
        return self.informers["configmaps"].get(f"{self.settings.namespace}/{TOPOLOGY_REPORT}")

    def _heartbeat(self) -> Obj | None:
        return self.informers["leases"].get(f"{self.settings.namespace}/{SHIM_HEARTBEAT_LEASE}")

    @property
    def shim_mode(self) -> str | None:
        """``admit`` (kfed's shim admits there), ``fence-only`` (upstream Kueue admits there,
        the shim fences), or None: no shim seen. Either mode fences alike: only ``can_fence``
        decides how this worker's copies fail over."""
        obj = self._heartbeat()
        if obj is None:
            return None
        annotations = obj["metadata"].get("annotations") or {}
        return str(annotations.get(SHIM_MODE_ANNOTATION) or "admit")

    def _observe_shim(self) -> None:
        obj = self._heartbeat()
        before = self.shim_lease.record
        self.shim_lease.observe(lease.LeaseRecord.from_lease(obj) if obj else None)
        if obj is not None and before is not None and self.shim_lease.record != before:
            self._shim_renewals_seen += 1

    @property
    def can_fence(self) -> bool:
        """True while kfed's worker shim runs there: we have seen its heartbeat Lease renewed
        (a Lease left by a shim that is gone proves nothing) and not expire since."""
        self._observe_shim()
        record = self.shim_lease.record
        return (
            self._shim_renewals_seen > 0
            and record is not None
            and bool(record.holder)
            and not self.shim_lease.expired()
        )

    def carry_over(self, previous: RemoteCluster) -> None:
        """Take over what the previous connection to this worker knew (its Secret changed):
        when the last renewal that may have landed there started, whether its shim can fence,
        and an outage in progress. Losing the new connection is then judged like losing the
        old one (fenced failover, not the unfenced timeout), and a worker that comes back
        through it is cleaned up (``on_reconnect``) before renewals resume."""
        old = previous.state
        self.state.last_renew_start = old.last_renew_start
        self.state.renewals = old.renewals
        if old.lost_since is not None:
            self.state.lost_since = old.lost_since
            self.state.fence_deadline = old.fence_deadline
            self.state.could_fence = old.could_fence
        else:
            self.state.shim_alive_at_handover = previous.can_fence

    def surely_fenced(self, now: float | None = None) -> bool:
        now = self.clock() if now is None else now
        return self.state.fence_deadline is not None and now >= self.state.fence_deadline

    def lost_for(self, now: float | None = None) -> float:
        if self.state.lost_since is None:
            return 0.0
        return (self.clock() if now is None else now) - self.state.lost_since

    # -- lifecycle ---------------------------------------------------------------------

    async def run(self) -> None:
        """Connect (with backoff), keep the Lease renewed, reconnect after losses."""
        self._tasks = [
            asyncio.create_task(i.run(), name=f"{self.name}/{k}") for k, i in self.informers.items()
        ]
        backoff = Backoff(self.settings.reconnect_initial, self.settings.reconnect_max)
        try:
            while True:
                try:
                    await self._refuse_the_manager_itself()
                    await self._connect()
                    backoff.reset()
                    await self._renew_until_failure()
                except RefusedWorker as err:
                    self._refuse(err)
                    backoff.reset()
                    await asyncio.sleep(self.settings.reconnect_max)  # checked again, rarely
                    continue
                except (errors.KubeError, TimeoutError) as err:
                    self._mark_lost(err if str(err) else errors.Unreachable("request timed out"))
                except Exception as err:  # one worker's surprise never ends the manager
                    log.exception("worker %s: unexpected error, reconnecting", self.name)
                    self._mark_lost(err)
                delay = backoff.next_delay()
                self.state.attempts += 1
                self.state.next_attempt = time.time() + delay
                self.state.message = (
                    f"{self.state.message.split('; connection attempts')[0]}; connection attempts: "
                    f"{self.state.attempts}, next connection attempt: "
                    f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(self.state.next_attempt))}"
                )
                self._changed()
                await asyncio.sleep(delay)
        finally:
            await stop_tasks(self._tasks)

    async def _refuse_the_manager_itself(self) -> None:
        """Registering the manager cluster as its own worker would make it copy workloads
        onto themselves (deleted and recreated in a loop, nothing ever runs): refuse it."""
        if self.manager_identity is None:
            return
        async with asyncio.timeout(self.settings.request_timeout * 2):
            identity = await cluster_identity(self.api)
        if identity == self.manager_identity:
            raise RefusedWorker(
                REASON_SAME_CLUSTER,
                "this kubeconfig reaches the manager cluster itself (the same kube-system "
                f"namespace UID {identity}); register worker clusters only",
            )

    def _refuse(self, err: RefusedWorker) -> None:
        if self.state.reason != err.reason:
            log.warning("worker %s refused: %s", self.name, err)
        self.state.connected = False
        self.state.reason = err.reason
        self.state.message = str(err)
        self._changed()

    async def _connect(self) -> None:
        async with asyncio.timeout(self.settings.request_timeout * 2):
            await self.api.request("GET", "/version")
            await self.ensure_namespace(self.settings.namespace)
            await self._follow_served_kinds()
            await self._follow_devices()
        async with asyncio.timeout(30):
            await asyncio.gather(*(i.synced.wait() for i in self.informers.values()))
        if self.state.lost_since is not None and self.on_reconnect is not None:
            await self.on_reconnect(self)
        self.state = ConnectionState(
            connected=True,
            reason=C.REASON_ACTIVE,
            message="Connected",
            renewals=self.state.renewals,
        )
        self._changed()
        log.info("worker %s connected", self.name)

    def mark_lost(self, why: str) -> None:
        """This connection ends for a reason of the manager's (its kubeconfig was replaced by
        one that is refused): count it as lost from now, like a failed renewal."""
        self._mark_lost(errors.Unreachable(why))

    def _mark_lost(self, err: Exception) -> None:
        now = self.clock()
        first = self.state.lost_since is None
        if first:
            self.state.lost_since = now
            self.state.could_fence = self.can_fence or self.state.shim_alive_at_handover
        # No renewal is sent while lost: the last one that may have landed started at
        # last_renew_start; the shim has fenced by then + timeout + duration + grace.
        start = self.state.last_renew_start
        if start is not None and (self.state.fence_deadline is None or first):
            self.state.fence_deadline = start + self.settings.fenced_failover_after
        self.state.connected = False
        self.state.reason = C.REASON_CLIENT_CONNECTION_FAILED
        self.state.message = f"Connection to worker lost: {err}"
        if first:
            log.warning("worker %s lost: %s", self.name, err)
            if self.on_connectivity is not None:
                self.on_connectivity(self)
        self._changed()

    async def _renew_until_failure(self) -> None:
        kinds_checked = self.clock()
        while True:
            self.state.last_renew_start = self.clock()
            async with asyncio.timeout(self.settings.request_timeout):
                await self._renew()
            self.state.renewals += 1
            if self.clock() - kinds_checked >= KINDS_RECHECK_SECONDS:
                kinds_checked = self.clock()
                async with asyncio.timeout(self.settings.request_timeout * 2):
                    await self._follow_served_kinds()
                    await self._follow_devices()
            await asyncio.sleep(self.settings.lease_renew_period)

    async def _renew(self) -> None:
        ns, name = self.settings.namespace, self.lease_name
        record, current = await lease.read(self.api, ns, name)
        now = lease.micro_time()
        new = lease.LeaseRecord(
            holder=self.settings.manager_identity,
            duration_seconds=int(self.settings.lease_duration),
            renew_time=now,
            acquire_time=record.acquire_time if record and record.acquire_time else now,
            transitions=record.transitions if record else 0,
        )
        try:
            await lease.write(self.api, ns, name, new, current)
        except (errors.Conflict, errors.AlreadyExists):
            return  # someone wrote in between; the next period writes again

    async def ensure_namespace(self, namespace: str) -> None:
        with contextlib.suppress(errors.AlreadyExists):
            await self.api.create(R.NAMESPACES, {"metadata": {"name": namespace}})

    def status(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "connected": self.connected,
            "reason": self.state.reason,
            "message": self.state.message,
            "can_fence": self.can_fence,
            "shim_mode": self.shim_mode,
        }
