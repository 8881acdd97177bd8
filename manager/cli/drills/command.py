"""``kfed drill outage|partition|maintenance|restore``: failover drills that measure themselves.

A drill places probe Jobs on one worker cluster, breaks that cluster (or drains it), and
measures, per probe, how long the federation takes to notice, to stop the probe there, to
re-dispatch it and to run it on another cluster; it watches every worker directly to count
double runs (a probe running on two clusters at once: must be 0). Then it restores the
cluster, waits until the manager has it Active again, removes the probes, prints a report and
writes it as JSON.

The steps live in their own modules: ``drillprobes`` (choosing the flavor, placing and
removing probes), ``drillbreak`` (breaking and restoring), ``drillwatch`` (the samples),
``drillreport`` (the maths, the verdict and the output) and ``drillplot`` (``--plot``: the
timeline as a picture).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from manager.api import constants as C
from manager.api import federated
from manager.cli import prediction
from manager.cli.common import (
    EXIT_FAILED,
    EXIT_UNREACHABLE,
    CliError,
    Duration,
    Target,
    connect_dict,
    connect_manager,
    connection_options,
    console,
    format_duration,
    renamed_option,
    run,
    take_renamed,
    target_of,
    usage_error,
)
from manager.cli.drills import breaking as drillbreak
from manager.cli.drills import plot as drillplot
from manager.cli.drills import probes as drillprobes
from manager.cli.drills import report as drillreport
from manager.cli.drills.watch import Watcher
from manager.cli.clusterstatus import active_condition, describe_active
from manager.federation.settings import FAILOVER_POLICY_ANNOTATION
from manager.federation.workers import kubeconfig
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

F = TypeVar("F", bound=Callable[..., Any])
Obj = dict[str, Any]

DEFAULT_QUEUE = "ml-jobs/gpu-lq"
DEFAULT_PROBES = 3
DEFAULT_TIMEOUT = 120.0
DEFAULT_INTERVAL = 0.25


@dataclass(frozen=True, slots=True)
class DrillOptions:
    kind: str
    cluster: str
    queue: str
    probes: int
    flavor: str | None
    image: str
    timeout: float
    interval: float
    output: str | None
    blackhole: str | None = None
    break_command: str | None = None
    restore_command: str | None = None
    hold: float | None = None
    """Restore after this many seconds even if the probes have not moved (None: --timeout)."""
    plot: str | None = None
    """Where to draw the drill's timeline (.png or .svg; None: no picture)."""

    @property
    def probe_seconds(self) -> int:
        """Longer than every phase of the drill together."""
        return int(self.timeout * 4 + (self.hold or 0) + 300)


def report_path(output: str | None, kind: str, cluster: str, when: dt.datetime) -> Path:
    """Where the JSON report goes: ``--output`` as a file, or the default name
    ``drill-<kind>-<cluster>-<UTC time>.json`` in ``--output`` (a directory) or the cwd."""
    name = f"drill-{kind}-{cluster}-{when.astimezone(dt.UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    if output is None:
        return Path.cwd() / name
    path = Path(output).expanduser()
    if path.is_dir():
        return path / name
    if not path.parent.is_dir():
        raise usage_error(f"--output {output}: directory {path.parent} does not exist")
    return path


def plot_path(plot: str | None) -> Path | None:
    """Where ``--plot`` draws the timeline, checked before anything is touched: a .png or
    .svg in an existing directory, with matplotlib installed (None: no picture)."""
    if plot is None:
        return None
    path = Path(plot).expanduser()
    if drillplot.plot_format(path) is None:
        raise usage_error(f"--plot {plot}: the picture's name must end in .png or .svg")
    if not path.parent.is_dir():
        raise usage_error(f"--plot {plot}: directory {path.parent} does not exist")
    missing = drillplot.unavailable()
    if missing is not None:
        raise usage_error(missing)
    return path


# -- preflight -----------------------------------------------------------------------------------


def _secret_name(mk_cluster: Obj) -> str:
    secret = federated.kubeconfig_source(mk_cluster).secret
    if secret is None:
        name = mk_cluster["metadata"]["name"]
        raise usage_error(f"MultiKueueCluster {name} does not keep its kubeconfig in a Secret")
    return secret


async def _check_target(api: KubeApi, cluster: str, namespace: str) -> str:
    """The target's Secret name, once the target is fit for a drill: registered, Active, not
    in maintenance, not left broken by another drill."""
    try:
        mk_cluster = await api.get(R.MULTIKUEUE_CLUSTERS, cluster)
    except errors.NotFound:
        raise usage_error(
            f"no MultiKueueCluster {cluster} on the manager; see `kfed cluster list`"
        ) from None
    secret = _secret_name(mk_cluster)
    left = await drillbreak.leftover(api, cluster, namespace, secret)
    if left is not None:
        raise CliError(
            f"{left}: is another drill running? If not, put it back with "
            f"`kfed drill restore --cluster {cluster}`"
        )
    mode = (mk_cluster["metadata"].get("annotations") or {}).get(C.MAINTENANCE_ANNOTATION)
    if mode:
        raise CliError(
            f"{cluster} is in maintenance ({mode}): a drill needs it serving; "
            f"`kfed cluster uncordon {cluster}` first"
        )
    condition = active_condition(mk_cluster)
    if condition is None or condition.get("status") != "True":
        raise CliError(
            f"{cluster} is not Active ({describe_active(condition)}): a drill needs a healthy "
            "cluster to break; see `kfed cluster list`"
        )
    return secret


async def _connect_worker(api: KubeApi, cluster: str, namespace: str) -> KubeApi:
    """A direct connection to a worker with the kubeconfig from its Secret, checked with one
    request."""
    mk_cluster = await api.get(R.MULTIKUEUE_CLUSTERS, cluster)
    secret = await api.get(R.SECRETS, _secret_name(mk_cluster), namespace)
    try:
        checked = kubeconfig.check(drillbreak.secret_kubeconfig(secret))
    except kubeconfig.KubeconfigRejected as err:
        raise CliError(f"worker {cluster}: its kubeconfig is refused: {err}") from None
    worker = await connect_dict(checked.config, checked.context, name=cluster)
    try:
        async with asyncio.timeout(10):
            await worker.request("GET", "/version")
    except (errors.KubeError, TimeoutError) as err:
        await worker.close()
        raise CliError(
            f"cannot read worker {cluster} directly at {checked.server} ({err or 'timed out'}): "
            "the drill watches every worker with the kubeconfig from its Secret to count double "
            "runs; run it from where the workers are reachable",
            EXIT_UNREACHABLE,
        ) from None
    return worker


# -- the drill -----------------------------------------------------------------------------------


def _breaker(
    opts: DrillOptions, api: KubeApi, namespace: str, secret: str, run_id: str, server: str
) -> drillbreak.Breaker:
    if opts.kind == "maintenance":
        return drillbreak.Drain(api, opts.cluster, run_id)
    if opts.break_command:
        return drillbreak.CommandBreak(opts.break_command, opts.restore_command, opts.timeout)
    return drillbreak.SecretSwap(api, namespace, secret, server, run_id, opts.kind)


@dataclass
class Prepared:
    """Everything checked and connected before anything is changed."""

    plan: drillprobes.ProbePlan
    workers: dict[str, KubeApi]
    breaker: drillbreak.Breaker
    blackhole: drillbreak.Blackhole | None
    notes: list[str]


async def _prepare(
    api: KubeApi, target: Target, opts: DrillOptions, run_id: str, stack: contextlib.AsyncExitStack
) -> Prepared:
    """The checks, the probe plan, direct connections to the workers and the breaker; every
    connection and listener is closed by ``stack``."""
    blackhole_address = drillbreak.server_url(opts.blackhole) if opts.blackhole else None
    secret = await _check_target(api, opts.cluster, target.namespace)
    namespace, queue = opts.queue.split("/", 1)
    base = drillprobes.ProbePlan(
        run_id=run_id,
        kind=opts.kind,
        target=opts.cluster,
        namespace=namespace,
        queue=queue,
        count=opts.probes,
        image=opts.image,
        seconds=opts.probe_seconds,
    )
    plan = await drillprobes.plan_probes(api, base, flavor=opts.flavor, namespace=target.namespace)
    workers: dict[str, KubeApi] = {}
    notes: list[str] = []
    if opts.kind in ("partition", "outage"):
        chain = await prediction.read_queue_chain(api, namespace, queue)
        annotations = ((chain.cluster_queue or {}).get("metadata") or {}).get("annotations") or {}
        policy = annotations.get(FAILOVER_POLICY_ANNOTATION)
        if policy != "fast":
            notes.append(
                f"ClusterQueue {chain.cluster_queue_name} has failover policy "
                f"{policy or 'the manager default (at-most-once unless --failover-policy fast)'}:"
                " under at-most-once the probes move only once the cluster is back and their "
                "copies there stopped, or after the manager's --worker-lost-timeout; a probe "
                "that runs on there once the cluster is restored passes as resumed"
            )
    for cluster in plan.clusters:
        try:
            workers[cluster] = await _connect_worker(api, cluster, target.namespace)
            stack.push_async_callback(workers[cluster].close)
        except CliError as problem:
            if cluster == plan.target or cluster in plan.destinations:
                raise
            notes.append(f"{cluster} not watched: {problem.message}")
    blackhole: drillbreak.Blackhole | None = None
    server = drillbreak.REFUSED_SERVER
    if opts.kind == "partition":
        if blackhole_address is None:
            blackhole = await drillbreak.Blackhole().start()
            stack.push_async_callback(blackhole.close)
            server = blackhole.url
        else:
            server = blackhole_address
    breaker = _breaker(opts, api, target.namespace, secret, run_id, server)
    return Prepared(plan, workers, breaker, blackhole, notes)


async def _drill(target: Target, opts: DrillOptions) -> int:
    out, err = console(), console(stderr=True)
    run_id = secrets.token_hex(3)
    report_path(opts.output, opts.kind, opts.cluster, dt.datetime.now(dt.UTC))  # fail early
    picture = plot_path(opts.plot)
    if opts.blackhole:
        drillbreak.server_url(opts.blackhole)  # bad input fails before anything is touched

    def event(at: float, text: str) -> None:
        err.print(f"  {drillreport.fmt(at):>7}  {text}")

    async with contextlib.AsyncExitStack() as stack:
        api = await connect_manager(target)
        stack.push_async_callback(api.close)
        prep = await _prepare(api, target, opts, run_id, stack)
        plan, workers, breaker, blackhole = prep.plan, prep.workers, prep.breaker, prep.blackhole
        notes = prep.notes
        err.print(
            f"drill {opts.kind} of {plan.target} (run {run_id}): {plan.count} probe(s) in "
            f"{plan.queue_key}, flavor {plan.flavor}; failover targets: "
            f"{', '.join(plan.destinations)}"
        )

        workloads: dict[str, str] = {}
        try:
            with err.status(f"placing {plan.count} probes on {plan.target}…") as status:
                workloads = await drillprobes.place(
                    api, plan, workers[plan.target], timeout=opts.timeout, on_update=status.update
                )
            err.print(f"{plan.count} probe(s) running on {plan.target}: {', '.join(plan.names)}")
            watcher = Watcher(api, workers, plan, workloads, opts.interval, on_event=event)
            watcher.start()
            try:

                async def every_worker_sampled() -> bool:
                    return watcher.has_samples_of_every_worker()

                await drillbreak.wait_until(every_worker_sampled, timeout=opts.timeout)
                watcher.mark_break()
                started_at = dt.datetime.now(dt.UTC)
                restoration = await _break_and_restore(
                    api, opts, plan, breaker, watcher, workers[plan.target], workloads, event
                )
                end = watcher.now()
            finally:
                await watcher.stop()
        finally:  # also when placing failed half-way, or on Ctrl-C
            with err.status("removing the probes…"):
                notes += await drillprobes.remove(
                    api, plan, workloads, workers, timeout=opts.timeout
                )
        if blackhole is not None and blackhole.connections == 0:
            notes.append(
                f"the manager never connected to the blackhole {blackhole.url}: it does not run "
                "on this host, so it saw refused connections (an outage), not a partition; pass "
                "--blackhole HOST:PORT with an address that drops packets"
            )
        breaking = breaker.describe()
        if blackhole is not None:
            breaking += f"; {blackhole.connections} connection(s) from the manager swallowed"
        report = drillreport.build(
            kind=opts.kind,
            cluster=plan.target,
            run_id=run_id,
            started_at=started_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            queue=plan.queue_key,
            flavor=plan.flavor,
            breaking=breaking,
            timeout=opts.timeout,
            interval=opts.interval,
            probes=plan.names,
            samples=watcher.worker_samples(),
            manager=watcher.manager_samples(),
            clusters=sorted(workers),
            end=end,
            restoration=restoration,
            notes=notes,
        )
    path = report_path(opts.output, opts.kind, opts.cluster, started_at)
    try:
        path.write_text(drillreport.as_json(report))
    except OSError as problem:
        out.print(drillreport.render(report))
        raise CliError(
            f"cannot write the report to {path}: {problem.strerror or problem}"
        ) from None
    out.print(drillreport.render(report, output_path=str(path)))
    if picture is not None:
        try:
            drillplot.render(report, picture)
        except OSError as problem:
            err.print(f"error: cannot write the plot to {picture}: {problem.strerror or problem}")
            return report.exit_code or EXIT_FAILED
        out.print(f"plot written to {picture}")
    return report.exit_code


async def _break_and_restore(
    api: KubeApi,
    opts: DrillOptions,
    plan: drillprobes.ProbePlan,
    breaker: drillbreak.Breaker,
    watcher: Watcher,
    target_api: KubeApi,
    workloads: dict[str, str],
    event: Callable[[float, str], None],
) -> drillreport.Restoration:
    """Break, wait until every probe runs elsewhere (or the timeout), and restore — always,
    also on errors and Ctrl-C; then wait until the cluster is Active and clean again."""
    err = console(stderr=True)
    restored_at: float | None = None
    actions: list[str] = []
    hold = opts.hold if opts.hold is not None else opts.timeout
    try:
        await breaker.apply()
        event(watcher.now(), f"broke {plan.target}: {breaker.describe()}")
        with err.status(f"waiting for the probes to run elsewhere (up to {hold:g}s)…") as status:
            deadline = time.monotonic() + hold
            while len(watcher.moved) < plan.count and time.monotonic() < deadline:
                status.update(
                    f"{drillreport.fmt(watcher.now())}: {len(watcher.moved)}/{plan.count} probes "
                    "running elsewhere"
                )
                await asyncio.sleep(opts.interval)
    finally:
        try:
            actions = await breaker.restore()
            restored_at = watcher.now()
            watcher.mark_restored(restored_at)
            event(restored_at, f"restored {plan.target}: {'; '.join(actions) or 'nothing to do'}")
        except (CliError, errors.KubeError) as problem:
            message = problem.message if isinstance(problem, CliError) else str(problem)
            actions = [f"restoring failed: {message}"]
            event(watcher.now(), f"RESTORE FAILED: {message}")
    if restored_at is None:
        return drillreport.Restoration(actions, None, None, None)

    async def active() -> bool:
        condition = active_condition(await api.get(R.MULTIKUEUE_CLUSTERS, plan.target))
        return condition is not None and condition.get("status") == "True"

    async def settled() -> bool:
        return watcher.settled() == plan.count

    async def clean() -> bool:
        """No copy left there of a probe that moved (one that resumed there stays)."""
        moved = {workloads[probe] for probe in watcher.moved if probe in workloads}
        copies = (await target_api.list(R.WORKLOADS, plan.namespace))["items"]
        running = set(await drillprobes.running_probes(target_api, plan)) & set(watcher.moved)
        return not any(w["metadata"]["name"] in moved for w in copies) and not running

    with err.status(f"waiting for {plan.target} to be Active again…"):
        active_after = await drillbreak.wait_until(active, timeout=opts.timeout)
    if active_after is not None:
        event(watcher.now(), f"{plan.target} Active again")
    if watcher.settled() < plan.count:
        with err.status("waiting for every probe to run again, elsewhere or resumed there…"):
            await drillbreak.wait_until(settled, timeout=opts.timeout)
    with err.status(f"waiting for the manager to remove the probes' copies from {plan.target}…"):
        cleaned = await drillbreak.wait_until(clean, timeout=opts.timeout)
    cleaned_after = watcher.now() - restored_at if cleaned is not None else None
    return drillreport.Restoration(actions, restored_at, active_after, cleaned_after)


async def _restore(target: Target, cluster: str) -> None:
    out = console()
    async with await connect_manager(target) as api:
        try:
            mk_cluster = await api.get(R.MULTIKUEUE_CLUSTERS, cluster)
        except errors.NotFound:
            raise usage_error(
                f"no MultiKueueCluster {cluster} on the manager; see `kfed cluster list`"
            ) from None
        done = await drillbreak.repair(api, cluster, target.namespace, _secret_name(mk_cluster))
        for job in await drillprobes.leftover_probes(api):
            await drillprobes.delete_probe(api, job)
            meta = job["metadata"]
            done.append(f"deleted probe Job {meta['namespace']}/{meta['name']}")
    for line in done or [f"nothing of a drill left on {cluster}"]:
        out.print(line)


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
    f"{drillbreak.REFUSED_SERVER}, where connections are refused.",
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
    run(_restore(target_of(kubeconfig, context, kfed_namespace), cluster))


def _main(kind: str, kw: dict[str, Any], **extra: Any) -> None:
    target = target_of(kw.pop("kubeconfig"), kw.pop("context"), kw.pop("kfed_namespace"))
    opts = DrillOptions(kind=kind, **kw, **extra)
    code = run(_drill(target, opts))
    if code:
        raise SystemExit(code)
