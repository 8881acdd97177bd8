"""``kfed submit``: submit batch/v1 Jobs to the manager and show where each one lands."""

from __future__ import annotations

from typing import Any

import click
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from manager.api.view import at
from manager.cli import jobfiles, submission
from manager.cli.common import EXIT_FAILED, CliError, console, read_text, run, usage_error, warn
from manager.cli.durations import Duration
from manager.cli.target import (
    Target,
    connect_manager,
    connection_options,
    objects_namespace,
    objects_namespace_option,
    target_of,
)

Obj = dict[str, Any]


def in_namespace(job: Obj, given: str | None, default: str) -> Obj:
    """The job in the namespace it is created in, as ``kubectl create -f`` places it: its own
    ``metadata.namespace``, else -n's (``given``), else ``default`` (the context's); a -n
    that contradicts the manifest is a usage error."""
    meta = at(job, "metadata")
    own = meta.get("namespace")
    if own and given and own != given:
        raise usage_error(
            f"{jobfiles.display_name(job)} is in namespace {own}, but -n/--namespace says "
            f"{given}: remove one of them"
        )
    if own:
        return job
    return {**job, "metadata": {**meta, "namespace": given or default}}


async def _submit(
    target: Target,
    path: str,
    namespace: str | None,
    queue: str | None,
    wait: bool,
    timeout: float,
) -> None:
    parsed = jobfiles.parse_jobs(read_text(path), "stdin" if path == "-" else path)
    given = namespace or target.objects_namespace
    default = str(objects_namespace(target, namespace))
    prepared = []
    for job in parsed:
        ready, warnings = jobfiles.prepare(in_namespace(job, given, default), queue=queue)
        for warning in warnings:
            warn(warning)
        prepared.append(ready)
    out, err = console(), console(stderr=True)
    async with await connect_manager(target) as api:
        await submission.check_queues(api, prepared)
        created = await submission.create_jobs(api, prepared)
        for job in created:
            out.print(
                f"created {jobfiles.display_name(job)} "
                f"(queue {jobfiles.queue_of(job)}, suspended until admitted)"
            )
        if not wait:
            return
        with Progress(
            SpinnerColumn(finished_text="[green]✓[/]"),
            TextColumn("{task.description}", markup=False),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        ) as progress:
            tasks: dict[str, TaskID] = {}

            def show(states: list[submission.Placement]) -> None:
                for state in states:
                    if state.job not in tasks:
                        tasks[state.job] = progress.add_task(state.job, total=1)
                    progress.update(
                        tasks[state.job],
                        description=f"{state.job}: {state.text}",
                        completed=1 if state.done else 0,
                    )

            states, all_done = await submission.wait_placed(
                api, created, timeout=timeout, on_update=show
            )
    for state in states:
        if state.done:
            out.print(
                f"{state.job} -> {state.cluster}" if state.cluster else f"{state.job}: {state.text}"
            )
    if not all_done:
        waiting = [s for s in states if not s.done]
        for state in waiting:
            click.echo(f"{state.job}: not placed after {timeout:g}s: {state.text}", err=True)
        raise CliError(
            f"{len(waiting)} of {len(states)} Job(s) not placed within {timeout:g}s; they stay "
            "queued: follow them with `kfed workloads` and `kfed explain NAMESPACE/NAME`",
            EXIT_FAILED,
        )


@click.command("submit")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@objects_namespace_option
@click.option(
    "--queue",
    "-q",
    default=None,
    help="LocalQueue to submit to: sets the kueue.x-k8s.io/queue-name label (overrides the "
    "manifest's).",
)
@click.option(
    "--wait-placement/--no-wait",
    "wait",
    default=True,
    show_default=True,
    help="Wait until every Job is placed on a worker and print where.",
)
@click.option(
    "--timeout",
    type=Duration(min=0),
    default="2m",
    show_default=True,
    help="How long to wait for placement (a Go duration: 30s, 2m).",
)
@connection_options(namespace=False)
def command(
    file: str,
    namespace: str | None,
    queue: str | None,
    wait: bool,
    timeout: float,
    kubeconfig: str | None,
    context: str | None,
) -> None:
    """Submit the job(s) in FILE ('-' for stdin) to the manager cluster.

    Every YAML document must be a valid job of a kind kfed queues: a batch/v1 Job, a JobSet,
    a Kubeflow TrainJob, a RayCluster, a PyTorchJob (TFJob, XGBoostJob, PaddleJob,
    JAXJob), an MPIJob, a LeaderWorkerSet or an AppWrapper (exit 2
    otherwise; nothing is created). kfed adds the queue label (--queue) and spec.suspend: true
    (a Kubeflow job's spec.runPolicy.suspend; a LeaderWorkerSet is held at zero
    replicas, its count in the annotation kfed.io/held-replicas), checks that the LocalQueue
    exists in the job's namespace (its metadata.namespace, else -n/--namespace, else the
    kubeconfig context's namespace, else default; -n contradicting a manifest's is exit 2, as
    in kubectl), creates the jobs, then shows progress until each job's Workload passes the
    MultiKueue admission check and prints the worker it runs on. On timeout it prints why each
    job still waits (its queue or admission check message) and exits 1; the jobs stay queued.

    \b
    Example:
      kfed submit heavy-job.yaml --queue gpu-lq
      ml-jobs/heavy-job -> worker-2
    """
    run(_submit(target_of(kubeconfig, context), file, namespace, queue, wait, timeout))
