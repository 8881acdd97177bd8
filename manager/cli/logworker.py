"""``kfed logs`` on the worker: the job there and the manager's connection to it (with the
kubeconfig of the worker's MultiKueueCluster Secret), and one container's log streamed line
by line; an unreachable worker or one that forbids the read is one line saying so."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from kubernetes_asyncio.client import CoreV1Api

from manager.cli.common import EXIT_UNREACHABLE, CliError, from_kube_error
from manager.cli.kubeconfigs import connect_dict
from manager.cli.logsources import LineSplitter, Source, pod_selector
from manager.cli.workerobjects import secret_of
from manager.controllers.jobkinds.base import JobKind
from manager.federation.workers import kubeconfig
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]
Emit = Callable[[str, str], None]
"""(prefix, line) -> None: print one log line."""


@dataclass(frozen=True, slots=True)
class RemoteJob:
    """The job on the worker: its kind, namespace and name, and the worker's connection."""

    kind: JobKind
    namespace: str
    name: str
    cluster: str
    server: str
    api: KubeApi

    @property
    def described(self) -> str:
        return f"{self.kind.resource.kind} {self.namespace}/{self.name}"

    def error(self, err: errors.KubeError) -> CliError:
        if isinstance(err, errors.Unreachable):
            # The message starts with the connection's name ("worker-1 https://..."): said.
            detail = err.message.removeprefix(f"{self.api.name}: ")
            return unreachable(self.cluster, self.server, detail)
        if isinstance(err, errors.Forbidden):
            return CliError(
                f"worker {self.cluster} forbids the manager's identity there to read "
                f"{self.described}'s pods or their logs (403: {err.message}); it needs "
                f"get {self.kind.resource.plural}, list pods and get pods/log in "
                f"{self.namespace} (the worker's kfed-manager-remote ClusterRole)"
            )
        return from_kube_error(err, f"worker {self.cluster}")

    async def read(self) -> tuple[Obj | None, list[Obj]]:
        """The job (None: not there) and its pods, as the worker has them now."""
        try:
            try:
                job: Obj | None = await self.api.get(self.kind.resource, self.name, self.namespace)
            except errors.NotFound:
                job = None
            selector = pod_selector(self.kind, self.name, job)
            pods = (await self.api.list(R.PODS, self.namespace, label_selector=selector))["items"]
        except errors.KubeError as err:
            raise self.error(err) from None
        return job, pods


def unreachable(cluster: str, server: str, detail: str) -> CliError:
    return CliError(
        f"cannot reach worker {cluster} at {server} ({detail}): kfed reads the logs from the "
        "worker itself, with the manager's credentials for it; run kfed where the workers are "
        "reachable",
        EXIT_UNREACHABLE,
    )


async def connect_worker(manager: KubeApi, cluster: str, namespace: str) -> tuple[KubeApi, str]:
    """A connection to the worker with the kubeconfig of its MultiKueueCluster's Secret (as
    the manager loads it), and its server."""
    try:
        mk_cluster = await manager.get(R.MULTIKUEUE_CLUSTERS, cluster)
    except errors.NotFound:
        raise CliError(
            f"worker {cluster} is no longer registered (no MultiKueueCluster {cluster}): its "
            "logs cannot be read through the manager"
        ) from None
    secret_name = secret_of(mk_cluster)
    if secret_name is None:
        raise CliError(f"worker {cluster} does not keep its kubeconfig in a Secret")
    try:
        secret = await manager.get(R.SECRETS, secret_name, namespace)
    except errors.NotFound:
        raise CliError(
            f"no Secret {namespace}/{secret_name} (worker {cluster}'s kubeconfig) on the "
            "manager; is kfed's namespace another one? (--kfed-namespace, $KFED_NAMESPACE)"
        ) from None
    try:
        checked = kubeconfig.check(kubeconfig.from_secret(secret))
    except kubeconfig.KubeconfigRejected as err:
        raise CliError(f"worker {cluster}: its kubeconfig is refused: {err}") from None
    return await connect_dict(checked.config, checked.context, name=cluster), checked.server


async def stream_log(remote: RemoteJob, source: Source, *, follow: bool, emit: Emit) -> None:
    """Print one container's log line by line as it arrives; with ``follow``, until the
    kubelet ends it (or the caller cancels it)."""
    read_timeout = None if follow else 60.0
    try:
        # Not preloaded, the client hands back the HTTP response itself (its stubs say str).
        response: aiohttp.ClientResponse = await CoreV1Api(  # type: ignore[assignment]
            remote.api.client
        ).read_namespaced_pod_log(
            source.pod,
            remote.namespace,
            container=source.container,
            follow=follow,
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(
                total=None, connect=10, sock_connect=10, sock_read=read_timeout
            ),
        )
    except (TimeoutError, aiohttp.ClientError, OSError) as err:
        raise unreachable(remote.cluster, remote.server, f"{type(err).__name__}: {err}") from err
    splitter = LineSplitter()
    try:
        if response.status >= 400:
            raise errors.from_status(response.status, await response.read())
        async for chunk in response.content.iter_any():
            for line in splitter.feed(chunk):
                emit(source.prefix, line)
    except (TimeoutError, aiohttp.ClientError, OSError) as err:
        raise unreachable(remote.cluster, remote.server, f"{type(err).__name__}: {err}") from err
    finally:
        for line in splitter.flush():
            emit(source.prefix, line)
        response.close()
