"""One worker cluster as the manager sees it: a connection, informers on the objects the
manager reads there, and the fencing Lease the manager renews there.

Connection health is judged by the Lease renewals, not by the informers (which reconnect on
their own): the first failed renewal marks the worker *lost*, stops renewals (so the last
write that may have landed is known), and fixes the moment after which the worker's shim has
surely fenced itself: ``fence_deadline``. Reconnection is retried with capped, jittered
backoff; on success the ``on_reconnect`` hook runs (it removes stale copies) before renewals
resume.

What the manager follows there (its informers, whether its shim can fence) is
remoteobjects.py's ``RemoteObjects``, which ``RemoteCluster`` extends.
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
from manager.federation.settings import MANAGER_LEASE_PREFIX
from manager.federation.workers.remoteobjects import KINDS_RECHECK_SECONDS, RemoteObjects
from manager.kube import errors, lease
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.backoff import Backoff
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
    credentials_refused: bool = False
    """The worker answered 401: it does not (or no longer) accept our credentials (a
    ClusterProfile's plugin is then asked for new ones)."""
    """The connection this one replaced (its Secret changed) saw the shim alive: if this one
    fails before it ever connects, the worker can still fence."""


@dataclass
class RemoteCluster(RemoteObjects):
    """One worker as the manager sees it: what it follows there, the connection, and the
    fencing Lease the manager renews there."""

    on_reconnect: ReconnectHook | None = None
    on_connectivity: Callable[[RemoteCluster], None] | None = None
    state: ConnectionState = field(default_factory=ConnectionState)
    manager_identity: str | None = None
    """The manager cluster's identity: a worker with the same one is the manager itself."""
    clock: Callable[[], float] = time.monotonic
    """Monotonic: the lease renewals and the outage timings (the dispatcher's clock)."""

    @property
    def lease_name(self) -> str:
        return MANAGER_LEASE_PREFIX + self.settings.origin

    @property
    def connected(self) -> bool:
        return self.state.connected

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
            await self._follow_node_pools()
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
        self.state.credentials_refused = isinstance(err, errors.Unauthorized)
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
                    await self._follow_node_pools()
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
