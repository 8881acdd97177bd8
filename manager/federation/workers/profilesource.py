"""The registry's side of workers registered by a ClusterProfile: it follows the manager
namespace's ClusterProfiles (once their API is served), turns a MultiKueueCluster's
``clusterProfileRef`` into an inline kubeconfig (clusterprofiles.py decides, execplugin.py
fetches the credential, kept until shortly before it expires), and lets a worker go when its
ClusterProfile is deleted, but only once it is drained.

A temporary worker: its ClusterProfile deleted while kfed is connected, the worker is put in
kfed's own ``drain`` (the ``kfed.io/maintenance`` annotation, with ``kfed.io/clusterprofile-
drain`` to say it was kfed's doing): its workloads move elsewhere as with ``kfed cluster
drain``, and only when none of ours is left running there (or ``--cluster-profile-drain-
timeout`` passed) is the connection closed, the worker then lost as any other (a workload
still there moves only once the worker has surely fenced it). The ClusterProfile back, the
annotations kfed set are removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from manager.api import constants as C
from manager.api.view import annotations_of, at
from manager.controllers import conditions
from manager.federation.settings import FederationSettings
from manager.federation.workers import clusterprofiles as cps
from manager.federation.workers import execplugin
from manager.federation.workers.remote import RemoteCluster
from manager.kube import discovery, errors
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj
from manager.kube.backoff import Backoff
from manager.kube.informer import Informer
from manager.kube.tasks import stop_tasks

log = logging.getLogger(__name__)

DRAIN_MARK = "kfed.io/clusterprofile-drain"
"""On a MultiKueueCluster kfed drained because its ClusterProfile went away: the maintenance
value it had before ("" for none), restored when the ClusterProfile is back."""
API_RECHECK_SECONDS = 30.0
"""How often kfed looks again whether the ClusterProfile API is served, while it is not."""


def profile_name(mk_cluster: Obj | None) -> str | None:
    """The ClusterProfile a MultiKueueCluster names, or None (a kubeconfig Secret)."""
    ref = at(mk_cluster, "spec", "clusterSource", "clusterProfileRef")
    return str(ref["name"]) if ref.get("name") else None


@dataclass(frozen=True, slots=True)
class Resolved:
    text: str | None = None
    problem: tuple[str, str] | None = None
    hold: bool = False
    """Keep the current connection as it is (its ClusterProfile is gone; draining)."""


@dataclass
class _Cached:
    access: str
    credential: cps.Credential | None = None
    problem: tuple[str, str] | None = None
    retry_at: float = 0.0
    backoff: Backoff = field(default_factory=lambda: Backoff(initial=1.0, cap=60.0))


class ProfileSource:
    def __init__(
        self,
        api: KubeApi,
        settings: FederationSettings,
        on_change: Callable[[], None],
        clock: Callable[[], float],
    ) -> None:
        self.api, self.settings, self.clock = api, settings, clock
        self.informer = Informer(api, R.CLUSTER_PROFILES, namespace=settings.namespace)
        self.informer.subscribe(lambda _: on_change())
        self.served: bool | None = None
        """Whether the ClusterProfile API is served (None: not asked yet)."""
        self._cached: dict[str, _Cached] = {}
        self._draining: dict[str, float] = {}
        """Cluster -> when its drain for a deleted ClusterProfile began (monotonic)."""
        self._let_go: dict[str, tuple[str, str]] = {}
        """Cluster -> the condition it was let go with, until its ClusterProfile is back."""
        self._task: asyncio.Task[None] | None = None
        self._asked = asyncio.Event()

    async def start(self) -> None:
        """Ask whether the API is served; if so, follow it and wait (a bounded time: the
        manager must start even where it may not list them) for its first list."""
        self._task = asyncio.create_task(self._run(), name="clusterprofiles")
        await self._asked.wait()
        if self.served:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self.informer.synced.wait(), self.settings.request_timeout * 3 + 5
                )

    def forget(self, name: str) -> None:
        """Its MultiKueueCluster is gone."""
        for known in (self._cached, self._draining, self._let_go):
            known.pop(name, None)

    async def stop(self) -> None:
        if self._task is not None:
            await stop_tasks([self._task])

    async def _run(self) -> None:
        while True:
            try:
                self.served = await discovery.serves(self.api, R.CLUSTER_PROFILES)
            except errors.KubeError as err:
                log.info("cannot tell whether the ClusterProfile API is served: %s", err)
                self.served = False
            self._asked.set()
            if self.served:
                await self.informer.run()
                return
            await asyncio.sleep(API_RECHECK_SECONDS)

    def note(self, name: str) -> str:
        """What the Active condition's message adds while the worker drains."""
        return (
            "; its ClusterProfile was deleted: draining before it is let go"
            if name in self._draining
            else ""
        )

    async def resolve(self, name: str, mk_cluster: Obj, remote: RemoteCluster | None) -> Resolved:
        ref = profile_name(mk_cluster) or ""
        where = f"ClusterProfile {self.settings.namespace}/{ref}"
        if not self.served:
            self._cached.pop(name, None)
            return Resolved(
                problem=(
                    cps.REASON_PROFILE_NOT_FOUND,
                    f"{where}: the ClusterProfile API ({R.CLUSTER_PROFILES.api_version}) is "
                    "not served by the manager cluster",
                )
            )
        if not self.informer.synced.is_set():
            why = self.informer.stats.last_error or "not listed yet"
            return Resolved(problem=(cps.REASON_PROFILE_NOT_FOUND, f"{where}: {why}"))
        profile = self.informer.get(f"{self.settings.namespace}/{ref}")
        if profile is None:
            self._cached.pop(name, None)
            return await self._gone(name, mk_cluster, remote, where)
        self._draining.pop(name, None)
        self._let_go.pop(name, None)
        await self._undrain(name, mk_cluster)
        try:
            access = cps.access_of(profile, self.settings.cluster_profile_providers)
            cps.check_endpoint(name, access)
        except cps.ProfileProblem as err:
            self._cached.pop(name, None)
            return Resolved(problem=(err.reason, f"{where}: {err}"))
        return await self._credential(name, access, where, remote)

    async def _credential(
        self, name: str, access: cps.Access, where: str, remote: RemoteCluster | None
    ) -> Resolved:
        cached = self._cached.get(name)
        if cached is None or cached.access != access.fingerprint():
            cached = self._cached[name] = _Cached(access.fingerprint())
        now = self.clock()
        credential = cached.credential
        # Refused by the worker (401): asked again, as client-go does, at a backed-off pace.
        refused = remote is not None and remote.state.credentials_refused and now >= cached.retry_at
        if credential is not None and not refused and not _due(credential):
            return Resolved(text=cps.kubeconfig_text(name, access, credential))
        if credential is None and cached.problem is not None and now < cached.retry_at:
            return Resolved(problem=cached.problem)
        try:
            credential = await execplugin.fetch(access, timeout=self.settings.request_timeout * 5)
        except cps.ProfileProblem as err:
            if cached.credential is not None and not _expired(cached.credential):
                return Resolved(text=cps.kubeconfig_text(name, access, cached.credential))
            cached.credential = None
            cached.problem = (err.reason, f"{where}: {err}")
            cached.retry_at = now + cached.backoff.next_delay()
            log.warning("worker %s: %s", name, err)
            return Resolved(problem=cached.problem)
        cached.credential, cached.problem = credential, None
        if refused:
            cached.retry_at = now + cached.backoff.next_delay()
        else:
            cached.backoff.reset()
        return Resolved(text=cps.kubeconfig_text(name, access, credential))

    async def _gone(
        self, name: str, mk_cluster: Obj, remote: RemoteCluster | None, where: str
    ) -> Resolved:
        """Its ClusterProfile is gone: drain a worker still in use, then let it go."""
        if name in self._let_go:
            return Resolved(problem=self._let_go[name])
        started = self._draining.get(name)
        if remote is None or not remote.connected:
            if started is None:
                return Resolved(problem=(cps.REASON_PROFILE_NOT_FOUND, f"{where} not found"))
            why = "the worker was lost while it drained"
            return self._release(name, where, why)
        if started is None:
            started = self._draining[name] = self.clock()
            log.info("worker %s: %s was deleted; draining it", name, where)
        await self._drain(name, mk_cluster)  # until its annotations say so
        running = _running(remote)
        waited = self.clock() - started
        if running and waited < self.settings.cluster_profile_drain_timeout:
            return Resolved(hold=True)
        why = (
            f"drained in {waited:.1f}s"
            if not running
            else f"{running} workloads still there after {waited:.0f}s: they move once it has "
            "surely fenced them"
        )
        return self._release(name, where, why)

    def _release(self, name: str, where: str, why: str) -> Resolved:
        log.info("worker %s: %s was deleted; %s; letting it go", name, where, why)
        self._draining.pop(name, None)
        problem = (cps.REASON_PROFILE_DELETED, f"{where} was deleted; {why}; the worker was let go")
        self._let_go[name] = problem
        return Resolved(problem=problem)

    async def _drain(self, name: str, mk_cluster: Obj) -> None:
        annotations = annotations_of(mk_cluster)
        if DRAIN_MARK in annotations:
            return
        before = str(annotations.get(C.MAINTENANCE_ANNOTATION) or "")
        patch: dict[str, str | None] = {
            C.MAINTENANCE_ANNOTATION: C.MAINTENANCE_DRAIN,
            DRAIN_MARK: before,
        }
        await self._annotate(name, patch)

    async def _undrain(self, name: str, mk_cluster: Obj) -> None:
        annotations = annotations_of(mk_cluster)
        if DRAIN_MARK not in annotations:
            return
        before = str(annotations.get(DRAIN_MARK) or "") or None
        await self._annotate(name, {C.MAINTENANCE_ANNOTATION: before, DRAIN_MARK: None})
        log.info("worker %s: its ClusterProfile is back; maintenance restored", name)

    async def _annotate(self, name: str, annotations: dict[str, str | None]) -> None:
        try:
            await self.api.patch(
                R.MULTIKUEUE_CLUSTERS, name, {"metadata": {"annotations": annotations}}
            )
        except errors.KubeError as err:  # the next pass tries again
            log.warning("worker %s: cannot write its maintenance annotations: %s", name, err)


def _running(remote: RemoteCluster) -> int:
    """Our workloads on the worker that have not finished (one, before they are known)."""
    if not remote.synced:
        return 1
    return sum(1 for wl in remote.workloads().items() if not conditions.is_true(wl, C.FINISHED))


def _due(credential: cps.Credential) -> bool:
    refresh = credential.refresh_at()
    return refresh is not None and dt.datetime.now(dt.UTC) >= refresh


def _expired(credential: cps.Credential) -> bool:
    return credential.expires is not None and dt.datetime.now(dt.UTC) >= credential.expires
