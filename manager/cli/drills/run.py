"""One drill, start to end: prepare (probes placed on the target, every worker watched),
break the target, watch the probes move, restore it, wait until the manager has it Active
again, remove the probes, report. And ``restore_cluster``, for a drill killed before it
could restore."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from manager.api.view import annotations_of
from manager.cli import queuechain
from manager.cli.clusterstatus import active_condition
from manager.cli.common import EXIT_FAILED, CliError, console, usage_error
from manager.cli.drills import breaking as drillbreak
from manager.cli.drills import leftovers as drillleftovers
from manager.cli.drills import output as drilloutput
from manager.cli.drills import plot as drillplot
from manager.cli.drills import probes as drillprobes
from manager.cli.drills import report as drillreport
from manager.cli.drills import servers as drillservers
from manager.cli.drills.options import DrillOptions, plot_path, report_path
from manager.cli.drills.preflight import check_target, connect_worker, secret_name
from manager.cli.drills.watch import Watcher
from manager.cli.target import Target, connect_manager
from manager.federation.settings import FAILOVER_POLICY_ANNOTATION
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi


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
    blackhole_address = drillservers.server_url(opts.blackhole) if opts.blackhole else None
    secret = await check_target(api, opts.cluster, target.namespace)
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
        chain = await queuechain.read_queue_chain(api, namespace, queue)
        annotations = annotations_of(chain.cluster_queue)
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
            workers[cluster] = await connect_worker(api, cluster, target.namespace)
            stack.push_async_callback(workers[cluster].close)
        except CliError as problem:
            if cluster == plan.target or cluster in plan.destinations:
                raise
            notes.append(f"{cluster} not watched: {problem.message}")
    blackhole: drillbreak.Blackhole | None = None
    server = drillservers.REFUSED_SERVER
    if opts.kind == "partition":
        if blackhole_address is None:
            blackhole = await drillbreak.Blackhole().start()
            stack.push_async_callback(blackhole.close)
            server = blackhole.url
        else:
            server = blackhole_address
    breaker = _breaker(opts, api, target.namespace, secret, run_id, server)
    return Prepared(plan, workers, breaker, blackhole, notes)


async def drill(target: Target, opts: DrillOptions) -> int:
    out, err = console(), console(stderr=True)
    run_id = secrets.token_hex(3)
    report_path(opts.output, opts.kind, opts.cluster, dt.datetime.now(dt.UTC))  # fail early
    picture = plot_path(opts.plot)
    if opts.blackhole:
        drillservers.server_url(opts.blackhole)  # bad input fails before anything is touched

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
        path.write_text(drilloutput.as_json(report))
    except OSError as problem:
        out.print(drilloutput.render(report))
        raise CliError(
            f"cannot write the report to {path}: {problem.strerror or problem}"
        ) from None
    out.print(drilloutput.render(report, output_path=str(path)))
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


async def restore_cluster(target: Target, cluster: str) -> None:
    out = console()
    async with await connect_manager(target) as api:
        try:
            mk_cluster = await api.get(R.MULTIKUEUE_CLUSTERS, cluster)
        except errors.NotFound:
            raise usage_error(
                f"no MultiKueueCluster {cluster} on the manager; see `kfed cluster list`"
            ) from None
        done = await drillleftovers.repair(api, cluster, target.namespace, secret_name(mk_cluster))
        for job in await drillprobes.leftover_probes(api):
            await drillprobes.delete_probe(api, job)
            meta = job["metadata"]
            done.append(f"deleted probe Job {meta['namespace']}/{meta['name']}")
    for line in done or [f"nothing of a drill left on {cluster}"]:
        out.print(line)
