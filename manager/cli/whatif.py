"""``kfed whatif``: where a Job would go now, changing nothing."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Group
from rich.text import Text

from manager import configfile
from manager.api import dra
from manager.cli import jobfiles, prediction
from manager.cli.common import console, read_text, run, usage_error
from manager.cli.manageradmission import Outcome
from manager.cli.options import output_option
from manager.cli.tables import print_data, table
from manager.cli.target import Target, connect_manager, connection_options, target_of
from manager.controllers import flags


def device_class_mappings(config: Path | None, given: str | None) -> dra.DeviceClassMappings:
    """The mapping the manager charges devices by, taken as the manager takes it:
    ``--device-class-mappings`` (JSON or @FILE), else the ``--config`` file's
    ``resources.deviceClassMappings``; none without either. A bad value is a usage error."""
    value = given
    where = "--device-class-mappings"
    if value is None and config is not None:
        where = f"--config {config}"
        try:
            loaded = configfile.defaults_from(config.read_text())
        except (OSError, configfile.ConfigError) as err:
            raise usage_error(f"{where}: {err}") from None
        value = str(loaded.defaults.get("device_class_mappings", ""))
    try:
        return flags.device_class_mappings(value or "")
    except ValueError as err:
        # the flag's own errors name it already; the file's are said to come from it
        said = str(err) if given is not None else f"{where}: {err}"
        raise usage_error(said) from None


def _manager_admission(p: prediction.Prediction) -> tuple[str, list[str]]:
    """The manager core's verdict, in a few words, and its details."""
    match Outcome(p.manager_outcome):
        case Outcome.FITS:
            return "fits its free quota now", []
        case Outcome.BORROWS:
            return f"fits now, {p.manager_reason}", []
        case Outcome.PREEMPTS:
            return (
                f"fits once it has preempted {len(p.manager_victims)} workload(s)",
                [f"preempts {victim}" for victim in p.manager_victims],
            )
        case _:
            return "no free quota now: it would wait in the queue", [f"waits: {p.manager_reason}"]


def render_prediction(p: prediction.Prediction) -> Group:
    requests = ", ".join(f"{v} {r}" for r, v in p.requests.items()) or "nothing"
    flavors = ", ".join(f"{r}={f}" for r, f in p.manager_flavors.items())
    verdict, details = _manager_admission(p)
    parts: list[object] = [
        Text(f"Job {p.job}", style="bold"),
        Text(f"  queue {p.queue} -> ClusterQueue {p.cluster_queue}"),
        Text(f"  requests {requests}"),
    ]
    for pod_set, charged in sorted(p.device_charge.items()):
        each = ", ".join(f"{v} {r}" for r, v in sorted(charged.items()))
        parts.append(Text(f"  devices charged per pod of {pod_set}: {each}"))
    parts += [
        Text(f"  manager flavor {flavors} ({verdict})"),
    ]
    parts += [Text(f"    {line}", style="dim") for line in details]
    parts += [Text(f"    skipped: {note}", style="dim") for note in p.manager_notes]
    if p.federated:
        parts.append(
            Text(f"  workers of MultiKueueConfig {p.config} (admission check {p.admission_check}):")
        )
        parts.append(
            table(
                ("", "cluster", "fits", "verdict"),
                (
                    (
                        "->" if c.cluster == p.chosen else "  ",
                        c.cluster,
                        "yes" if c.fits else "no",
                        c.reason,
                    )
                    for c in p.candidates
                ),
                wrap="verdict",
            )
        )
        parts.append(Text(f"  rule: {p.rule}", style="dim"))
    parts.append(Text(p.verdict, style="bold"))
    return Group(*parts)  # type: ignore[arg-type]


async def _whatif(
    target: Target,
    path: str,
    queue: str | None,
    output: str,
    mappings: dra.DeviceClassMappings,
) -> None:
    jobs = jobfiles.parse_jobs(read_text(path), "stdin" if path == "-" else path)
    prepared = [jobfiles.prepare(job, queue=queue)[0] for job in jobs]
    async with await connect_manager(target) as api:
        predictions = [
            await prediction.predict(api, job, namespace=target.namespace, mappings=mappings)
            for job in prepared
        ]
    out = console()
    if print_data(out, output.lower(), predictions):
        return
    for index, p in enumerate(predictions):
        if index:
            out.print()
        out.print(render_prediction(p))


@click.command("whatif")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--queue",
    "-q",
    default=None,
    help="LocalQueue to assume (overrides the manifest's kueue.x-k8s.io/queue-name label).",
)
@click.option(
    "--config",
    "config",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="The manager's configuration file: its resources.deviceClassMappings say what DRA "
    "devices are charged (docs/dra.md).",
)
@click.option(
    "--device-class-mappings",
    "mappings_flag",
    default=None,
    metavar="JSON",
    help="The manager's --device-class-mappings (JSON, or @FILE); wins over --config.",
)
@output_option(rows=False)
@connection_options()
def command(
    file: str,
    queue: str | None,
    config: Path | None,
    mappings_flag: str | None,
    output: str,
    kubeconfig: str | None,
    context: str | None,
    kfed_namespace: str | None,
) -> None:
    """Where the Job(s) in FILE would go now, without creating or changing anything.

    Turns the Job into the Workload the manager would create, finds its LocalQueue and
    ClusterQueue on the manager and asks the manager's admission core, on a snapshot of the
    manager's queues, flavors and admitted workloads, whether it would be admitted now (within
    quota, borrowing, or by preempting) or wait, and with which flavors; then reads every
    worker of the queue's MultiKueueConfig with the kubeconfig from its Secret in
    --kfed-namespace and prints the dispatcher's verdict for each (as federation.decisions.capacity
    evaluates it: same LocalQueue, a matching flavor, enough free quota; not connected,
    cordoned or drained workers are skipped) and the worker it would choose (best fit, then
    fewest waiting, then config order). Dispatches still in flight are not visible from
    outside the manager, so a busy federation may decide differently.

    A Job that claims DRA devices (or asks for an extended resource a DeviceClass serves) is
    charged as the manager charges it, by the mapping the manager was given: pass its
    --config file or its --device-class-mappings; the workers' DeviceClasses and
    ResourceSlices are read with their queues.

    \b
    Examples:
      kfed whatif heavy-job.yaml
      kfed whatif --config manager-config.yaml examples/dra/job.yaml
    """
    mappings = device_class_mappings(config, mappings_flag)
    run(_whatif(target_of(kubeconfig, context, kfed_namespace), file, queue, output, mappings))
