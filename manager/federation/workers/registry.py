"""Worker registration: MultiKueueCluster objects whose kubeconfig lives in a Secret (key
``kubeconfig``) in the manager's namespace, or that name a ClusterProfile there
(profilesource.py), grouped by MultiKueueConfigs that AdmissionChecks with controllerName
``kueue.x-k8s.io/multikueue`` reference.

For each MultiKueueCluster the registry validates the kubeconfig (unsafe ones are refused
with a reason), runs a RemoteCluster for it, and writes its ``Active`` condition. A change
of the Secret or the cluster restarts the connection. Nothing here raises on bad input: a
broken cluster gets Active=False with its reason and the others keep working.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from manager.api import constants as C
from manager.api import federated
from manager.api.view import items
from manager.controllers import conditions
from manager.controllers import eventreasons as told
from manager.controllers.jobkinds.base import JobKind
from manager.federation.decisions import references
from manager.federation.engine.statuswrites import StatusWrites
from manager.federation.settings import FederationSettings
from manager.federation.workers import credentials, kubeconfig
from manager.federation.workers.listener import WorkerListener
from manager.federation.workers.profilesource import ProfileSource, Resolved, profile_name
from manager.federation.workers.remote import RemoteCluster, cluster_identity
from manager.federation.workers.remoteobjects import FEDERATED_KINDS
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj
from manager.kube.events import EventRecorder
from manager.kube.informer import Event, Informer
from manager.kube.tasks import stop_tasks, wait_event

log = logging.getLogger(__name__)

FIRST_CONNECTION_POLL = 0.1  # s between looks: has every worker had its first chance?

REASON_SECRET_NOT_FOUND = "SecretNotFound"
REASON_CLUSTER_PROFILE = C.REASON_BAD_CLUSTER_PROFILE
REASON_PATH_LOCATION = federated.REASON_PATH_LOCATION
REASON_UNREGISTERED = "Unregistered"


@dataclass
class ClusterEntry:
    name: str
    fingerprint: str = ""
    remote: RemoteCluster | None = None
    task: asyncio.Task[None] | None = None
    rejected: tuple[str, str] | None = None
    """(reason, message) when the cluster cannot even be tried."""
    retired: RemoteCluster | None = None
    """The last connection, kept (as lost) while the cluster cannot be tried: what it knew
    decides when the workloads it ran have surely stopped and may move."""
    expiry: credentials.Expiry | None = None
    """When its kubeconfig's token or client certificate runs out, when that can be read."""

    @property
    def active(self) -> bool:
        return self.remote is not None and self.remote.connected

    @property
    def settled(self) -> bool:
        """Its state is a fact worth an Event: connected, refused, or a connection that
        failed (not one still being made)."""
        if self.rejected is not None:
            return True
        remote = self.remote
        if remote is None:
            return False
        state = remote.state
        return (
            state.connected
            or state.lost_since is not None
            or state.reason != C.REASON_CLIENT_CONNECTION_FAILED  # refused by the worker check
        )

    def condition(self) -> tuple[bool, str, str]:
        if self.rejected is not None:
            return False, *self.rejected
        if self.remote is None:
            return False, C.REASON_CLIENT_CONNECTION_FAILED, "Not connected yet"
        state = self.remote.state
        return state.connected, state.reason, state.message


class ClusterRegistry:
    def __init__(
        self,
        api: KubeApi,
        settings: FederationSettings,
        *,
        status: StatusWrites | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock  # monotonic: each connection's timings (the dispatcher's clock)
        self.api = api
        self.settings = settings
        self.listeners: list[WorkerListener] = []
        self.kinds: list[JobKind] = list(FEDERATED_KINDS)
        """The kinds of job federated: kfed's own, and each external framework once found
        (``engine/externalkinds.py``); every worker's connection follows this one list."""
        self.clusters: dict[str, ClusterEntry] = {}
        self.mk_clusters = Informer(api, R.MULTIKUEUE_CLUSTERS)
        self.mk_configs = Informer(api, R.MULTIKUEUE_CONFIGS)
        self.secrets = Informer(api, R.SECRETS, namespace=settings.namespace)
        self._dirty = asyncio.Event()
        self.manager_identity: str | None = None
        """The manager cluster's own identity (see remote.cluster_identity), read at start."""
        self.synced = asyncio.Event()
        """Set once every registered worker has been tried: before that, "not connected"
        means "not known yet", not "lost"."""
        for informer in (self.mk_clusters, self.secrets):
            informer.subscribe(self._on_event)
        self.mk_configs.subscribe(lambda _: self._notify())
        self.mk_clusters.subscribe(self._on_cluster_event)
        self.profiles = ProfileSource(api, settings, self._dirty.set, clock)
        """Workers registered by a ClusterProfile: their kubeconfig, and their drain."""
        self.status = status or StatusWrites(api, EventRecorder(None, component="kfed"))
        """Its one door for writes: the MultiKueueClusters' status, and the Events."""

    def listen(self, listener: WorkerListener) -> None:
        """Tell ``listener`` what happens to the workers from now on."""
        self.listeners.append(listener)

    @property
    def informers(self) -> list[Informer]:
        return [self.mk_clusters, self.mk_configs, self.secrets]

    def _on_event(self, event: Event) -> None:
        self._dirty.set()

    def _on_cluster_event(self, event: Event) -> None:
        level = federated.maintenance_of(event.obj)
        changed = level != federated.maintenance_of(event.old)
        if changed and event.old is not None and event.obj is not None:
            told.maintenance_changed(self.status, event.obj, level)
        rebound = federated.bound_namespaces(event.obj) != federated.bound_namespaces(event.old)
        policy = references.policy_of(event.obj)
        if policy != references.policy_of(event.old):
            rebound = True
            if isinstance(policy, references.Malformed) and event.obj is not None:
                self.status.warning(
                    event.obj,
                    references.MALFORMED_REASON,
                    f"{references.ANNOTATION}: {policy.problem}; this worker takes no "
                    "workload until it is fixed",
                )
        if changed or rebound:
            # Waiting workloads may fit (or no longer may go) there now.
            for listener in self.listeners:
                listener.maintenance_changed(event.key)

    def _notify(self) -> None:
        self._dirty.set()
        self._capacity_changed()

    def _capacity_changed(self) -> None:
        """A worker's queues or our copies there changed: nothing to sync here, but waiting
        workloads may fit now."""
        for listener in self.listeners:
            listener.capacity_changed()

    def _connectivity_changed(self, remote: RemoteCluster) -> None:
        for listener in self.listeners:
            listener.connectivity_changed(remote)

    def remote(self, name: str) -> RemoteCluster | None:
        entry = self.clusters.get(name)
        return entry.remote if entry is not None else None

    def retired(self, name: str) -> RemoteCluster | None:
        """The lost last connection of a cluster whose kubeconfig is now refused or gone."""
        entry = self.clusters.get(name)
        return entry.retired if entry is not None and entry.remote is None else None

    def active(self) -> list[RemoteCluster]:
        return [
            e.remote for e in self.clusters.values() if e.remote is not None and e.remote.connected
        ]

    def clusters_of_config(self, config_name: str) -> list[str]:
        """The worker names a MultiKueueConfig lists, in its order (empty when missing)."""
        config = self.mk_configs.get(config_name)
        return [str(c) for c in items(config, "spec", "clusters")]

    def _credentials_condition(
        self, conds: list[dict[str, Any]], entry: ClusterEntry
    ) -> tuple[bool, bool]:
        """Set (or, with no expiry to read, remove) ``kfed.io/CredentialsExpiring`` in
        ``conds``; returns (is it True, did it change). Its message names the moment, not the
        time left, so it changes only when the credentials do."""
        expiry = entry.expiry
        if expiry is None:
            return False, conditions.remove(conds, C.CREDENTIALS_EXPIRING)
        now = dt.datetime.now(dt.UTC)
        warn = dt.timedelta(seconds=self.settings.credentials_warning)
        soon = credentials.expiring(expiry, now, warn)
        if expiry.left(now) <= dt.timedelta(0):
            reason = C.REASON_CREDENTIALS_EXPIRED
        else:
            reason = C.REASON_CREDENTIALS_EXPIRING if soon else C.REASON_CREDENTIALS_VALID
        message = credentials.describe(entry.name, expiry)
        return soon, conditions.set_condition(conds, C.CREDENTIALS_EXPIRING, soon, reason, message)

    # -- reconciling the set of clusters -------------------------------------------------

    async def run(self) -> None:
        tasks = [asyncio.create_task(i.run(), name=repr(i)) for i in self.informers]
        try:
            # Inside the try: a term cancelled during this read must stop the informers too.
            self.manager_identity = await cluster_identity(self.api)
            await asyncio.gather(*(i.synced.wait() for i in self.informers))
            await self.profiles.start()
            while True:
                self._dirty.clear()
                await self._sync()
                if not self.synced.is_set():
                    await self._first_connections()
                    self.synced.set()
                await self.write_status()
                await wait_event(self._dirty, timeout=1.0)
        finally:
            for entry in self.clusters.values():
                await self._stop(entry)
            await self.profiles.stop()
            await stop_tasks(tasks)

    async def _sync(self) -> None:
        wanted = {obj["metadata"]["name"]: obj for obj in self.mk_clusters.items()}
        for name in list(self.clusters):
            if name in wanted:
                continue
            self.profiles.forget(name)
            entry = self.clusters[name]
            if entry.remote is not None:
                # Unregistered while it may still run our workloads: a lost worker until it
                # has surely fenced them; only then may they run elsewhere.
                last = entry.remote
                await self._stop(entry)
                entry.fingerprint = ""
                entry.rejected = (REASON_UNREGISTERED, "its MultiKueueCluster was deleted")
                self._retire(entry, last)
            elif entry.retired is None or entry.retired.lost_for() > self._forget_after:
                await self._stop(self.clusters.pop(name))
                self._notify()
        for name, obj in wanted.items():
            entry = self.clusters.setdefault(name, ClusterEntry(name))
            if entry.task is not None and entry.task.done():
                # A worker's connection must never end by itself; if it did (a bug, or an
                # error nobody foresaw), say so and connect again: never take the manager down.
                failure = None if entry.task.cancelled() else entry.task.exception()
                log.error("connection to worker %s ended: %r; reconnecting", name, failure)
                entry.fingerprint = ""
            resolved = await self._kubeconfig_text(name, obj, entry)
            if resolved.hold:
                continue  # its ClusterProfile is gone: drained on the connection it has
            text, problem = resolved.text, resolved.problem
            fingerprint = hashlib.sha256((text or "").encode() + repr(problem).encode()).hexdigest()
            if fingerprint == entry.fingerprint:
                continue
            previous = entry.remote or entry.retired
            await self._stop(entry)
            entry.fingerprint = fingerprint
            entry.rejected = problem
            entry.expiry = None
            if problem is not None or text is None:
                log.warning("worker %s refused: %s", name, problem)
                self._retire(entry, previous)
                continue
            try:
                checked = kubeconfig.check(text)
            except kubeconfig.KubeconfigRejected as err:
                entry.rejected = (err.reason, str(err))
                log.warning("worker %s refused: %s", name, err)
                self._retire(entry, previous)
                continue
            if profile_name(obj) is None:  # a plugin's credentials are renewed by kfed
                entry.expiry = credentials.expiry_of(checked.config, checked.context)
            try:
                api = await KubeApi.from_kubeconfig_dict(
                    checked.config, context=checked.context, name=name
                )
            except Exception as err:  # the client library rejects what we did not foresee
                entry.rejected = (C.REASON_BAD_KUBECONFIG, f"kubeconfig cannot be loaded: {err}")
                self._retire(entry, previous)
                continue
            entry.retired = None
            api.request_timeout = self.settings.request_timeout
            entry.remote = RemoteCluster(
                name,
                api,
                self.settings,
                kinds=self.kinds,
                on_reconnect=self._reconnected,
                on_change=self._notify,
                on_capacity=self._capacity_changed,
                on_connectivity=self._connectivity_changed,
                manager_identity=self.manager_identity,
                clock=self.clock,
            )
            if previous is not None:
                entry.remote.carry_over(previous)
            for listener in self.listeners:
                listener.attach(entry.remote)
            entry.task = asyncio.create_task(entry.remote.run(), name=f"remote/{name}")
            self._notify()

    @property
    def _forget_after(self) -> float:
        """Seconds a deleted cluster's lost connection is kept: past both failover waits."""
        return self.settings.worker_lost_timeout + self.settings.fenced_failover_after

    def _retire(self, entry: ClusterEntry, previous: RemoteCluster | None) -> None:
        """A refused or missing kubeconfig is a lost worker, not a forgotten one: its last
        connection is kept, marked lost now, so that its workloads move once it has surely
        fenced them (or after the unfenced timeout), and never before."""
        entry.retired = previous
        if previous is not None:
            previous.mark_lost(
                "its kubeconfig is no longer usable: " + (entry.rejected or ("", ""))[1]
            )
        self._notify()

    async def _first_connections(self) -> None:
        """Give every worker one chance to connect before the dispatcher starts."""
        deadline = asyncio.get_running_loop().time() + self.settings.request_timeout * 3 + 5
        while asyncio.get_running_loop().time() < deadline:
            pending = [
                e
                for e in self.clusters.values()
                if e.remote is not None and not e.remote.connected and e.remote.state.attempts == 0
            ]
            if not pending:
                return
            await asyncio.sleep(FIRST_CONNECTION_POLL)

    async def _reconnected(self, remote: RemoteCluster) -> None:
        for listener in self.listeners:
            await listener.recover(remote)

    async def _kubeconfig_text(self, name: str, obj: Obj, entry: ClusterEntry) -> Resolved:
        if profile_name(obj) is not None:
            return await self.profiles.resolve(name, obj, entry.remote)
        source = federated.kubeconfig_source(obj)
        if source.secret is None:
            assert source.problem is not None
            return Resolved(problem=source.problem)
        location = source.secret
        secret = self.secrets.get(f"{self.settings.namespace}/{location}")
        if secret is None:
            return Resolved(
                problem=(
                    REASON_SECRET_NOT_FOUND,
                    f"Secret {self.settings.namespace}/{location} not found",
                )
            )
        try:
            return Resolved(text=kubeconfig.from_secret(secret))
        except kubeconfig.KubeconfigRejected as err:
            return Resolved(problem=(err.reason, str(err)))

    async def _stop(self, entry: ClusterEntry) -> None:
        try:
            if entry.task is not None:
                await stop_tasks([entry.task])
        finally:
            if entry.remote is not None:
                await entry.remote.api.close()
            entry.task, entry.remote = None, None

    async def write_status(self) -> None:
        for name, entry in self.clusters.items():
            obj = self.mk_clusters.get(name)
            if obj is None:
                continue
            status, reason, message = entry.condition()
            message += self.profiles.note(name) if status else ""
            conds = list(items(obj, "status", "conditions"))
            before = conditions.find(conds, C.ACTIVE)
            was_active = None if before is None else before.get("status") == "True"
            reason_before = before.get("reason") if before is not None else None
            was_expiring = conditions.is_true({"conditions": conds}, C.CREDENTIALS_EXPIRING)
            active_changed = conditions.set_condition(
                conds,
                C.ACTIVE,
                status,
                reason,
                message,
                generation=obj["metadata"].get("generation"),
            )
            expiring, credentials_changed = self._credentials_condition(conds, entry)
            if not (active_changed or credentials_changed):
                continue
            written = await self.status.conditions(
                R.MULTIKUEUE_CLUSTERS, self.mk_clusters, obj, conds
            )
            if written is None:
                continue
            if (was_active, reason_before) != (status, reason) and entry.settled:
                told.cluster_condition_changed(
                    self.status,
                    written,
                    was_active=was_active,
                    active=status,
                    reason=reason,
                    message=message,
                )
            if expiring and not was_expiring and entry.expiry is not None:
                now = dt.datetime.now(dt.UTC)
                told.credentials_expiring(
                    self.status, written, credentials.describe(name, entry.expiry, now)
                )
