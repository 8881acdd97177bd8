"""``kfed drill outage|partition|maintenance|restore``: failover drills that measure themselves.

A drill places probe Jobs on one worker cluster, breaks that cluster (or drains it), and
measures, per probe, how long the federation takes to notice, to stop the probe there, to
re-dispatch it and to run it on another cluster; it watches every worker directly to count
double runs (a probe running on two clusters at once: must be 0). Then it restores the
cluster, waits until the manager has it Active again, removes the probes, prints a report and
writes it as JSON.

This module holds the commands and their flags; the steps live in their own modules:
``options`` (what a drill is asked), ``preflight`` (checks before breaking anything),
``run`` (one drill, start to end), ``probes`` (choosing the flavor, placing and removing
probes), ``breaking`` (breaking and restoring), ``watch`` (the samples), ``report`` (the
maths, the verdict and the output) and ``plot`` (``--plot``: the timeline as a picture).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from manager.cli.common import run
from manager.cli.drills import probes as drillprobes
from manager.cli.drills import run as drillrun
from manager.cli.drills import servers as drillservers
from manager.cli.drills.options import (
    DEFAULT_INTERVAL,
    DEFAULT_PROBES,
    DEFAULT_QUEUE,
    DEFAULT_TIMEOUT,
    DrillOptions,
)
from manager.cli.durations import Duration, format_duration
from manager.cli.options import renamed_option, take_renamed
from manager.cli.target import connection_options, target_of

F = TypeVar("F", bound=Callable[..., Any])

# -- the commands ---------------------------------------------------------------------------------


def _queue_key(ctx: click.Context, param: click.Parameter, value: str) -> str:
    namespace, sep, name = value.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise click.BadParameter(f"{value!r} is not NAMESPACE/LOCALQUEUE (e.g. ml-jobs/gpu-lq)")
    return value


_OLD_REPORT = "kfed.drill.output"


def drill_options(f: F) -> F:
    """The options every drill takes (after its own)."""
    for option in reversed(
        [
            click.option(
                "--cluster",
                required=True,
                metavar="NAME",
                help="The worker cluster to break (a MultiKueueCluster on the manager).",
            ),
            click.option(
                "--queue",
                default=DEFAULT_QUEUE,
                show_default=True,
                callback=_queue_key,
                metavar="NAMESPACE/LOCALQUEUE",
                help="The federated LocalQueue the probes are submitted to.",
            ),
            click.option(
                "--probes",
                type=click.IntRange(1, 50),
                default=DEFAULT_PROBES,
                show_default=True,
                help="How many probe Jobs (100m cpu, 64Mi memory each) to place on the cluster.",
            ),
            click.option(
                "--flavor",
                default=None,
                help="The flavor the probes ask for (default: the first one of the queue that "
                "the cluster and another Active worker both offer with room for the probes).",
            ),
            click.option(
                "--probe-image",
                "image",
                default=drillprobes.DEFAULT_IMAGE,
                show_default=True,
                help="Image of the probes' container (it runs `sh -c 'sleep ...'`).",
            ),
            click.option(
                "--timeout",
                type=Duration(min=1),
                default=format_duration(DEFAULT_TIMEOUT),
                show_default=True,
                help="How long (a Go duration: 90s, 5m) each phase may take: placing the "
                "probes, the probes running elsewhere after the break, the cluster Active "
                "again after restoring.",
            ),
            click.option(
                "--hold",
                type=Duration(min=0),
                default=None,
                help="Restore the cluster after this long (a Go duration: 30s, 2m) even if "
                "the probes have not moved (default: --timeout). Under at-most-once they "
                "stay until it is back.",
            ),
            click.option(
                "--interval",
                type=Duration(min=0.05, max=5),
                default=format_duration(DEFAULT_INTERVAL),
                show_default=True,
                help="Time (a Go duration: 500ms, 1s) between two reads of each cluster: the "
                "precision of the times.",
            ),
            click.option(
                "--plot",
                default=None,
                metavar="FILE.png|FILE.svg",
                help="Also draw the drill's timeline (each worker's probes over time, the cut, "
                "detection, fencing, re-dispatch, running elsewhere) into this picture; the "
                "suffix picks the format. Needs matplotlib: pip install 'kfed[plot]'.",
            ),
            click.option(
                "--output",
                "-o",
                "old_output",
                default=None,
                hidden=True,
                expose_value=False,
                callback=renamed_option("--output/-o", "--report", _OLD_REPORT),
                help="Deprecated: --report.",
            ),
            click.option(
                "--report",
                "output",
                default=None,
                callback=take_renamed(_OLD_REPORT),
                metavar="FILE|DIR",
                help="Where to write the JSON report: a file, or a directory for the default "
                "name drill-<kind>-<cluster>-<UTC time>.json (default: the current directory).",
            ),
            connection_options(),
        ]
    ):
        f = option(f)
    return f


@click.group("drill")
def group() -> None:
    """Failover drills against a live federation, that measure themselves.

    \b
    Every drill:
      1. checks the cluster is Active and not in maintenance, and picks a flavor of
         --queue that the cluster AND another Active worker offer with room for the probes;
      2. places --probes small Jobs on the cluster (allow-list annotation kfed.io/allowed-
         clusters while they are placed, removed once they run) and waits until they run;
      3. breaks the cluster (partition, outage) or drains it (maintenance);
      4. reads every worker directly (kubeconfigs from their Secrets) and the manager every
         --interval: when the manager notices, when each probe stops on the cluster,
         is re-dispatched and runs elsewhere, and whether a probe ever ran on two clusters at
         once (a double run);
      5. restores the cluster (also on errors and Ctrl-C), waits until it is Active again and
         the manager removed the probes' copies, deletes the probes;
      6. prints the report (p50/max per phase, one row per probe) and writes it as JSON;
         with --plot, draws its timeline as a PNG or SVG picture.

    \b
    Exit codes: 0 every probe ran again (elsewhere, or on the cluster once it was restored:
    "resumed", as the at-most-once policy does when nothing could prove the old copy
    stopped), no double run, the cluster is back; 1 a probe ran nowhere in time, or the
    cluster did not come back, or the federation is not fit for a drill (nothing was
    changed); 2 bad input (nothing was
    changed); 3 a cluster cannot be reached; 4 a probe ran on two clusters at once;
    130 interrupted (the cluster was restored and the probes removed).
    """


@group.command("partition")
@click.option(
    "--blackhole",
    default=None,
    metavar="HOST:PORT",
    help="Where the manager is sent: an address where connections hang. Default: a listener "
    "this command opens on 127.0.0.1 that accepts and never answers (the manager must run on "
    "this host); for a manager elsewhere, a non-routable address such as 10.255.255.1:6443.",
)
@drill_options
def partition(blackhole: str | None, **kw: Any) -> None:
    """Cut the manager off from worker --cluster while the worker keeps running.

    Points the server of the cluster's kubeconfig Secret at a blackhole (connections hang), so
    the manager loses the worker exactly as across a network partition, while the worker's
    shim sees its lease renewals stop and fences (suspends) the manager's workloads. The
    manager re-dispatches them once the fencing window has passed. The original Secret is put
    back afterwards.

    \b
    Example:
      kfed drill partition --cluster worker-1
    """
    _main("partition", kw, blackhole=blackhole)


@group.command("outage")
@click.option(
    "--break-command",
    default=None,
    metavar="COMMAND",
    help="A shell command that really stops the worker (e.g. 'docker pause worker-1-control-"
    "plane' on kind); then the Secret is left alone. Default: point the Secret at "
    f"{drillservers.REFUSED_SERVER}, where connections are refused.",
)
@click.option(
    "--restore-command",
    default=None,
    metavar="COMMAND",
    help="A shell command that starts the worker again (e.g. 'docker unpause ...'); run when "
    "the drill ends, also on errors and Ctrl-C.",
)
@drill_options
def outage(break_command: str | None, restore_command: str | None, **kw: Any) -> None:
    """Make worker --cluster unreachable at once, as when its apiserver is down.

    By default points the server of the cluster's kubeconfig Secret at an address that refuses
    connections (the worker itself keeps running and fences the manager's workloads when the
    lease renewals stop); with --break-command a command of yours really stops the worker and
    --restore-command starts it again. Either way the cluster is restored afterwards.

    \b
    Under the at-most-once policy (kfed's default) the probes of a cluster that is really
    down do not move: nothing can prove their copies stopped. Pass --hold to restore it
    after that long; each probe must then run on there (resumed) or elsewhere,
    never on two clusters at once.

    \b
    Examples:
      kfed drill outage --cluster worker-1
      kfed drill outage --cluster worker-1 --hold 30s \\
        --break-command 'docker pause worker-1-control-plane' \\
        --restore-command 'docker unpause worker-1-control-plane'
      kfed drill outage --cluster worker-1 --hold 30s \\
        --break-command 'python -m e2e stop --name demo --cluster worker-1 --kill' \\
        --restore-command 'python -m e2e start --name demo --cluster worker-1'
    """
    if restore_command and not break_command:
        raise click.UsageError("--restore-command needs --break-command")
    _main("outage", kw, break_command=break_command, restore_command=restore_command)


@group.command("maintenance")
@drill_options
def maintenance(**kw: Any) -> None:
    """Drain worker --cluster (`kfed cluster drain`) and measure how its workloads move.

    Sets kfed.io/maintenance=drain on the MultiKueueCluster: the manager evicts the probes
    there and re-dispatches them to other workers. Afterwards the cluster is uncordoned (only
    if it is still our drain).

    \b
    Example:
      kfed drill maintenance --cluster worker-1
    """
    _main("maintenance", kw)


@group.command("restore")
@click.option(
    "--cluster",
    required=True,
    metavar="NAME",
    help="The worker cluster an interrupted drill left broken.",
)
@connection_options()
def restore(
    cluster: str, kubeconfig: str | None, context: str | None, kfed_namespace: str | None
) -> None:
    """Put back what an interrupted drill (killed before it could restore) left on --cluster.

    Points the cluster's kubeconfig Secret at its original server again (recorded in the
    annotation kfed.io/drill), uncordons a drill's drain, and deletes every probe Job
    (label kfed.io/drill-run) left on the manager. Safe to run when nothing is left.
    """
    run(drillrun.restore_cluster(target_of(kubeconfig, context, kfed_namespace), cluster))


def _main(kind: str, kw: dict[str, Any], **extra: Any) -> None:
    target = target_of(kw.pop("kubeconfig"), kw.pop("context"), kw.pop("kfed_namespace"))
    opts = DrillOptions(kind=kind, **kw, **extra)
    code = run(drillrun.drill(target, opts))
    if code:
        raise SystemExit(code)
