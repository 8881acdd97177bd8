"""``kfed logs NAMESPACE/NAME``: the container logs of a job's pods, read from the worker it
runs (or ran) on with the manager's own credentials for that worker, so that nobody has to
find the worker, and a kubeconfig for it, first.

Where: the manager Workload's ``status.clusterName`` (for a finished one, where its run ended:
``kfed.io/ran-on`` when the dispatcher recorded it), else the worker its MultiKueue check is
Ready on. How: the kubeconfig in the worker's MultiKueueCluster Secret, checked as the
manager checks it. Which pods: those of the job of the same kind, namespace and name on the
worker (kfed's remote copy), by the label its kind's controller puts on them (a batch Job's
pods by the Job's uid while it exists).

``--follow`` streams every container that runs, picks up pods that start later, and ends
once the job has ended there and each stream has drained: a real kubelet ends a followed log
when its container exits, kwok (the test bed's kubelet) never does, so a stream whose
container has terminated is closed after ``DRAIN_SECONDS``.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import click
from kubernetes_asyncio.client import CoreV1Api

from manager.api import constants as C
from manager.cli import workloadinfo
from manager.cli.common import EXIT_UNREACHABLE, CliError, from_kube_error, run, usage_error, warn
from manager.cli.kubeconfigs import connect_dict
from manager.cli.registration import secret_of
from manager.cli.target import (
    Target,
    connect_manager,
    connection_options,
    namespaced_name,
    objects_namespace_option,
    target_of,
)
from manager.controllers import conditions
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds import registry
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.federation.engine.retaining import ran_on
from manager.federation.engine.workloadview import why
from manager.federation.settings import RETENTION_ANNOTATION
from manager.federation.workers import kubeconfig
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]
Emit = Callable[[str, str], None]
"""(prefix, line) -> None: print one log line."""

POLL_SECONDS = 1.0
"""How often ``--follow`` looks at the job's pods on the worker."""
DRAIN_SECONDS = 1.0
"""How long a followed stream may go on after its container terminated."""
JOB_WAIT_SECONDS = 60.0
"""How long ``--follow`` waits for the job to appear on the worker it was placed on."""
CONNECT_SECONDS = 20.0
"""The first request to the worker, retries included: a person is waiting."""
_BATCH_UID_LABEL = "batch.kubernetes.io/controller-uid"
_CHECK_CLUSTER = re.compile(r'on "([^"]+)"')
_TERMINAL_PHASES = ("Succeeded", "Failed")


# -- where the job runs or ran (pure) ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Whereabouts:
    cluster: str
    finished: str
    """How it finished ("Succeeded: Reached expected number of succeeded pods"); "" while
    it has not."""


def whereabouts(workload: Obj, what: str) -> Whereabouts:
    """The worker the workload runs or ran on; a CliError (exit 1) saying why there is
    none yet. ``what`` names the job in messages ("Job ml-jobs/light-job")."""
    status = ws.status_of(workload)
    # A finished run may have ended on another worker than clusterName says (kfed.io/ran-on).
    cluster = (ran_on(workload) if ws.is_finished(workload) else "") or str(
        status.get("clusterName") or ""
    )
    if not cluster:
        for check in status.get("admissionChecks") or []:
            found = _CHECK_CLUSTER.search(str(check.get("message") or ""))
            if check.get("state") == "Ready" and found:
                cluster = found.group(1)
    if not cluster:
        meta = workload.get("metadata") or {}
        not_yet = (
            "never ran on a worker"
            if ws.is_finished(workload)
            else ("has not been placed on a worker yet")
        )
        raise CliError(
            f"{what} {not_yet}, so it has no logs: {why(workload)}; "
            f"see `kfed explain {meta.get('namespace')}/{meta.get('name')}`"
        )
    finished = ""
    if ws.is_finished(workload):
        condition = conditions.find(status.get("conditions"), C.FINISHED) or {}
        finished = ": ".join(
            str(part) for part in (condition.get("reason"), condition.get("message")) if part
        )
        finished = finished or "finished"
    return Whereabouts(cluster, finished)


# -- the job's pods and their containers (pure) -----------------------------------------------


def pod_selector(kind: JobKind, name: str, job: Obj | None) -> str:
    """The label selector of the job's pods on the worker: a batch Job's by its uid while it
    exists (never a former Job's of the same name), else by the kind's pod label."""
    if kind is BATCH_JOB and job is not None and job["metadata"].get("uid"):
        return f"{_BATCH_UID_LABEL}={job['metadata']['uid']}"
    return f"{kind.pod_label}={name}"


def container_state(pod: Obj, container: str) -> tuple[str, str]:
    """("waiting" | "running" | "terminated", why it waits)."""
    status = pod.get("status") or {}
    phase = str(status.get("phase") or "Pending")
    for entry in (status.get("containerStatuses") or []) + (
        status.get("initContainerStatuses") or []
    ):
        if entry.get("name") != container:
            continue
        state = entry.get("state") or {}
        if "running" in state:
            return "running", ""
        if "terminated" in state:
            return "terminated", ""
        return "waiting", str((state.get("waiting") or {}).get("reason") or phase)
    if phase in _TERMINAL_PHASES:
        return "terminated", ""
    return "waiting", phase


@dataclass(frozen=True, slots=True)
class Source:
    """One container of one pod, and how its lines are prefixed."""

    pod: str
    uid: str
    container: str
    prefix: str
    state: str
    waiting_reason: str

    @property
    def key(self) -> tuple[str, str]:
        return self.uid, self.container


def _containers(pod: Obj, *, init: bool) -> list[str]:
    spec = pod.get("spec") or {}
    names = [str(c["name"]) for c in spec.get("containers") or []]
    if init:
        names += [str(c["name"]) for c in spec.get("initContainers") or []]
    return names


def log_sources(pods: list[Obj], container: str | None) -> list[Source]:
    """The containers to read, pods oldest first: every container of each pod, or only
    ``container`` (which may be an init container). Lines are prefixed ``POD``, or
    ``POD/CONTAINER`` when several containers of one pod are read. A ``container`` no pod has
    is a usage error naming the ones they have."""
    ordered = sorted(
        pods,
        key=lambda p: (str(p["metadata"].get("creationTimestamp") or ""), p["metadata"]["name"]),
    )
    sources = []
    for pod in ordered:
        names = _containers(pod, init=container is not None)
        chosen = [n for n in names if n == container] if container is not None else names
        for name in chosen:
            pod_name = str(pod["metadata"]["name"])
            state, reason = container_state(pod, name)
            sources.append(
                Source(
                    pod=pod_name,
                    uid=str(pod["metadata"].get("uid") or pod_name),
                    container=name,
                    prefix=pod_name if len(chosen) == 1 else f"{pod_name}/{name}",
                    state=state,
                    waiting_reason=reason,
                )
            )
    if pods and container is not None and not sources:
        have = sorted({n for pod in pods for n in _containers(pod, init=True)})
        raise usage_error(
            f"no container {container!r} in the job's pods; they have: {', '.join(have)}"
        )
    return sources


class LineSplitter:
    """Bytes as they arrive -> whole lines (a log line may span chunks)."""

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, chunk: bytes) -> list[str]:
        *lines, self._rest = (self._rest + chunk).split(b"\n")
        return [_text(line) for line in lines]

    def flush(self) -> list[str]:
        """The last line, when the log does not end with a newline."""
        rest, self._rest = self._rest, b""
        return [_text(rest)] if rest else []


def _text(line: bytes) -> str:
    return line.rstrip(b"\r").decode(errors="replace")


def job_ended(kind: JobKind, job: Obj | None) -> bool:
    """The job ended on the worker, or is gone from it (collected once it finished)."""
    return job is None or kind.outcome(job) is not None


# -- the worker -------------------------------------------------------------------------------


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


def print_line(prefix: str, line: str) -> None:
    click.echo(f"[{prefix}] {line}")


# -- reading ----------------------------------------------------------------------------------


def _gone_message(remote: RemoteJob, where: Whereabouts, job: Obj | None) -> str:
    if where.finished:
        return (
            f"{remote.described} finished on {remote.cluster} ({where.finished}) and its pods "
            "there are gone, their logs with them (kfed collects a finished job's objects on "
            "its worker; the manager's --finished-retention or the ClusterQueue's "
            f"{RETENTION_ANNOTATION} keeps them longer)"
        )
    if job is None:
        return (
            f"{remote.described} is placed on {remote.cluster} but its job is not there (yet): "
            "try again in a moment, or use --follow to wait for it"
        )
    return f"{remote.described} has no pods on {remote.cluster} yet; use --follow to wait for them"


async def print_logs(remote: RemoteJob, where: Whereabouts, container: str | None) -> None:
    """Every container's log as it is now, pod after pod."""
    job, pods = await remote.read()
    if not pods:
        raise CliError(_gone_message(remote, where, job))
    sources = log_sources(pods, container)
    printed, problems = 0, []
    for source in sources:
        if source.state == "waiting":
            problems.append(f"{source.prefix} has not started yet ({source.waiting_reason})")
            continue
        try:
            await stream_log(remote, source, follow=False, emit=print_line)
            printed += 1
        except errors.Forbidden as err:
            raise remote.error(err) from None
        except errors.KubeError as err:  # the pod went away meanwhile, no log there...
            problems.append(f"{source.prefix}: {err.message}")
    if not printed:
        raise CliError(
            f"no log of {remote.described} on {remote.cluster} can be read yet: "
            + "; ".join(problems)
            + ("; use --follow to wait for them" if not where.finished else "")
        )
    for problem in problems:
        warn(problem)


async def _wait_for_job(remote: RemoteJob) -> None:
    deadline = time.monotonic() + JOB_WAIT_SECONDS
    while True:
        job, pods = await remote.read()
        if job is not None or pods:
            return
        if time.monotonic() >= deadline:
            raise CliError(
                f"{remote.described} did not appear on {remote.cluster} within "
                f"{JOB_WAIT_SECONDS:g}s; see `kfed explain {remote.namespace}/{remote.name}`"
            )
        await asyncio.sleep(POLL_SECONDS)


async def _followed(remote: RemoteJob, source: Source, *, follow: bool) -> None:
    """One stream of ``--follow``: an API error (its pod went away...) is a warning; an
    unreachable worker, or one that forbids it, ends the command."""
    try:
        await stream_log(remote, source, follow=follow, emit=print_line)
    except errors.Forbidden as err:
        raise remote.error(err) from None
    except errors.KubeError as err:
        warn(f"{source.prefix}: {err.message}")


async def follow_logs(remote: RemoteJob, where: Whereabouts, container: str | None) -> None:
    """Stream every container that runs (and those that start later) until the job has ended
    on the worker and every stream has drained."""
    job, pods = await remote.read()
    if not pods and where.finished:
        raise CliError(_gone_message(remote, where, job))
    if job is None and not pods:
        await _wait_for_job(remote)
    streams: dict[tuple[str, str], asyncio.Task[None]] = {}
    close_at: dict[tuple[str, str], float] = {}
    try:
        while True:
            job, pods = await remote.read()
            sources = log_sources(pods, container)
            now = time.monotonic()
            for source in sources:
                if source.key not in streams and source.state != "waiting":
                    streams[source.key] = asyncio.create_task(
                        _followed(remote, source, follow=source.state == "running")
                    )
                elif source.key in streams and source.state == "terminated":
                    close_at.setdefault(source.key, now + DRAIN_SECONDS)
            present = {s.key for s in sources}
            for key in streams.keys() - present:  # the pod is gone
                close_at.setdefault(key, now + DRAIN_SECONDS)
            for key, at in close_at.items():
                if now >= at:
                    streams[key].cancel()
            for task in streams.values():
                failure = task.exception() if task.done() and not task.cancelled() else None
                if failure is not None:
                    raise failure
            streaming = any(not t.done() for t in streams.values())
            waiting = any(s.state != "terminated" for s in sources)
            if not streaming and not waiting and job_ended(remote.kind, job):
                return
            await asyncio.sleep(POLL_SECONDS)
    finally:
        for task in streams.values():
            task.cancel()
        await asyncio.gather(*streams.values(), return_exceptions=True)


async def _logs(
    target: Target, key: str, namespace: str | None, follow: bool, container: str | None
) -> None:
    namespace, name = namespaced_name(target, key, namespace)
    async with await connect_manager(target) as manager:
        workload, _ = await workloadinfo.resolve(manager, namespace, name)
        owner = registry.owner_of(workload)
        if owner is None:
            raise CliError(
                f"Workload {namespace}/{name} belongs to no job kfed knows: there are no pods "
                "to read logs of"
            )
        kind, job_key = owner
        job_namespace, job_name = job_key.split("/", 1)
        where = whereabouts(workload, f"{kind.resource.kind} {job_key}")
        api, server = await connect_worker(manager, where.cluster, target.namespace)
    remote = RemoteJob(kind, job_namespace, job_name, where.cluster, server, api)
    async with api:
        try:
            async with asyncio.timeout(CONNECT_SECONDS):
                await api.request("GET", "/version")
        except TimeoutError:
            raise unreachable(where.cluster, server, f"no answer in {CONNECT_SECONDS:g}s") from None
        except errors.KubeError as err:
            raise remote.error(err) from None
        verb = "ran" if where.finished else "runs"
        click.echo(f"{remote.described} {verb} on {where.cluster}", err=True)
        await (follow_logs if follow else print_logs)(remote, where, container)


@click.command("logs")
@click.argument("key", metavar="[NAMESPACE/]NAME")
@objects_namespace_option
@click.option(
    "--follow", "-f", is_flag=True, help="Stream the logs until the job has ended on its worker."
)
@click.option(
    "--container",
    "-c",
    default=None,
    metavar="CONTAINER",
    help="Only this container (an init container too); default: every container of each pod.",
)
@connection_options(legacy_namespace=False)  # -n/--namespace is the job's here
def command(
    key: str,
    namespace: str | None,
    follow: bool,
    container: str | None,
    kubeconfig: str | None,
    context: str | None,
    kfed_namespace: str | None,
) -> None:
    """Print the logs of a job's pods from the worker it runs or ran on.

    NAME is the job on the manager (a Job, JobSet, TrainJob or RayCluster; or its Workload),
    in -n/--namespace (default: the kubeconfig context's namespace, else default), or
    NAMESPACE/NAME. kfed finds the worker (status.clusterName), connects to it with the manager's
    credentials for it (the kubeconfig in its MultiKueueCluster's Secret, in kfed's
    --kfed-namespace: reading it needs that permission on the manager) and prints each
    container's log, every line prefixed with [POD] (or [POD/CONTAINER] when a pod has
    several). Exit 1 when the job has not been placed or started yet, or when its pods are
    gone from the worker (a finished job's are collected); exit 3 when the worker cannot be
    reached from here.

    \b
    Example:
      kfed logs ml-jobs/light-job
      kfed logs heavy-job -n ml-jobs --follow --container cuda
    """
    run(_logs(target_of(kubeconfig, context, kfed_namespace), key, namespace, follow, container))
