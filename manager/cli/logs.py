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

The pure parts (where, which pods and containers) are in logsources.py, the worker's side
(connecting, streaming one container) in logworker.py; this module reads and follows.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import click

from manager.cli import workloadinfo
from manager.cli.common import CliError, run, warn
from manager.cli.logsources import Source, Whereabouts, job_ended, log_sources, whereabouts
from manager.cli.logworker import RemoteJob, connect_worker, stream_log, unreachable
from manager.cli.target import (
    Target,
    connect_manager,
    connection_options,
    namespaced_name,
    objects_namespace_option,
    target_of,
)
from manager.controllers.jobkinds import registry
from manager.federation.settings import RETENTION_ANNOTATION
from manager.kube import errors

Obj = dict[str, Any]

POLL_SECONDS = 1.0
"""How often ``--follow`` looks at the job's pods on the worker."""
DRAIN_SECONDS = 1.0
"""How long a followed stream may go on after its container terminated."""
JOB_WAIT_SECONDS = 60.0
"""How long ``--follow`` waits for the job to appear on the worker it was placed on."""
CONNECT_SECONDS = 20.0
"""The first request to the worker, retries included: a person is waiting."""


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

    NAME is the job on the manager (a Job, JobSet, TrainJob, RayCluster, PyTorchJob, TFJob,
    XGBoostJob, PaddleJob, JAXJob, MPIJob, LeaderWorkerSet or AppWrapper; or its Workload),
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
