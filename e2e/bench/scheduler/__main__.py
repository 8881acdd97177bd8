"""Upstream Kueue's scheduler-performance scenarios, run on kfed against a real kube-apiserver.

    .venv/bin/python -m e2e.bench.scheduler [--variant baseline|large] [--json out.json]

Starts a fresh lite control plane (etcd + kube-apiserver) with kfed's CRDs, runs kfed's
single-cluster controllers in a process of their own (``controller_process``), and plays
upstream's runner against them (``runner``): 15,000 Workloads for the baseline, 50,000 for
``--variant large``. Prints a table and JSON: wall time, ClusterQueue usage, average time to
admission per class, each against upstream's threshold with its margin, and the CPU time
and peak memory of kfed's process, the kube-apiserver, etcd and the runner. Everything it
started is stopped at the end, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio import config
from kubernetes_asyncio.client import ApiClient, Configuration

from e2e.bench import procstats
from e2e.bench.cluster import lite_cluster, request_counts
from e2e.bench.multikueue import profile
from e2e.bench.scheduler import controller_process, report
from e2e.bench.scheduler import generator as g
from e2e.bench.scheduler.runner import Runner
from e2e.local.cluster import LocalCluster
from e2e.local.process import ManagedProcess
from e2e.waiting import wait_for_sync
from manager.kube.api import KubeApi

RUNNER_CONNECTIONS = 512
PROFILE_FILE = "kfed-controllers.txt"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m e2e.bench.scheduler",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--variant", choices=sorted(g.SCENARIOS), default="baseline")
    p.add_argument("--json", type=Path, help="also write the JSON report to this file")
    p.add_argument(
        "--timeout", type=float, help="give up after this many seconds (default: 2x the limit)"
    )
    p.add_argument("--workers", type=int, help="kfed's concurrent reconciles per controller")
    p.add_argument("--write-concurrency", type=int, help="kfed's status writes in flight at once")
    p.add_argument(
        "--absolute-pace",
        action="store_true",
        help="create workload i of each stream at (i+1) x interval, however slow the API "
        "(stricter than upstream's pacing: wait an interval after each create)",
    )
    p.add_argument(
        "--event-qps",
        type=float,
        help="kfed's Kubernetes Events per second at most (default kfed's; 0: none, to "
        "measure what they cost)",
    )
    p.add_argument("--log", type=Path, help="copy kfed's process log here")
    p.add_argument(
        "--stats-every",
        type=float,
        default=0.0,
        help="have kfed's process log its queues and event-loop lag this often (see --log)",
    )
    p.add_argument(
        "--csv", type=Path, help="write one line per workload (times are seconds from the start)"
    )
    p.add_argument(
        "--profile",
        type=Path,
        help="sample kfed's process with py-spy (a benchmark extra) into this directory and "
        "print where its time went",
    )
    return p.parse_args(argv)


def start_controllers(cluster: LocalCluster, args: argparse.Namespace) -> ManagedProcess:
    argv = [
        sys.executable,
        "-m",
        controller_process.__name__,
        "--kubeconfig",
        str(cluster.kubeconfig),
    ]
    if args.workers:
        argv += ["--workers", str(args.workers)]
    if args.write_concurrency:
        argv += ["--write-concurrency", str(args.write_concurrency)]
    if args.stats_every:
        argv += ["--stats-every", str(args.stats_every)]
    if args.event_qps is not None:
        argv += ["--event-qps", str(args.event_qps)]
    proc = ManagedProcess(
        role="kfed",
        argv=argv,
        log_path=cluster.directory / "logs" / "kfed.log",
        tie_to_parent=True,
        env={"PYTHONUNBUFFERED": "1"},
    )
    proc.start()
    return proc


def wait_synced(proc: ManagedProcess) -> None:
    def synced() -> bool:
        if not proc.alive:
            raise RuntimeError(f"kfed's controllers exited:\n{proc.log_tail()}")
        return controller_process.SYNCED in proc.log_tail(200)

    wait_for_sync(synced, timeout=120, what="kfed's controllers to sync", interval=0.05)


async def runner_api(cluster: LocalCluster) -> KubeApi:
    """The runner's client, with room for its many writes in flight at once (finishing a
    workload must not wait behind other finishes: a real job's end is not queued)."""
    configuration = type.__call__(Configuration)
    await config.load_kube_config(
        config_file=str(cluster.kubeconfig), client_configuration=configuration
    )
    configuration.connection_pool_maxsize = RUNNER_CONNECTIONS
    return KubeApi(ApiClient(configuration=configuration), name="runner")


async def run_scenario(
    cluster: LocalCluster, s: g.Scenario, *, timeout: float, absolute_pace: bool
) -> tuple[Runner, float]:
    """Returns the runner and the monotonic time at which the run was complete."""
    async with await runner_api(cluster) as api:
        runner = Runner(api, s, absolute_pace=absolute_pace)
        await runner.run(timeout=timeout)
        return runner, time.monotonic()


def start_profile(kfed: ManagedProcess, directory: Path | None) -> profile.Sampler | None:
    if directory is None or kfed.pid is None:
        return None
    try:
        return profile.Sampler(kfed.pid, directory / PROFILE_FILE)
    except FileNotFoundError as e:
        print(f"not profiled: {e}", flush=True)
        return None


def process_figures(
    cluster: LocalCluster, kfed: ManagedProcess
) -> dict[str, report.ProcessFigures]:
    result: dict[str, report.ProcessFigures] = {}
    pids = {
        "kfed controllers": kfed.pid,
        "kube-apiserver": cluster.processes["kube-apiserver"].pid,
        "etcd": cluster.processes["etcd"].pid,
    }
    for name, pid in pids.items():
        sample = procstats.sample(pid) if pid is not None else None
        if sample is not None:
            result[name] = report.ProcessFigures(sample.cpu_seconds, sample.peak_rss_mib)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result["runner (this)"] = report.ProcessFigures(
        usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024
    )
    return result


def write_csv(path: Path, runner: Runner, started: float) -> None:
    def at(value: float | None) -> str:
        return "" if value is None else f"{value - started:.3f}"

    lines = ["key,class,created,admitted,finished,time_to_admission,evictions"]
    for r in runner.recorder.workloads.values():
        wait = "" if r.time_to_admission is None else f"{r.time_to_admission:.3f}"
        lines.append(
            f"{r.key},{r.class_name},{at(r.first_seen)},{at(r.admitted_at)},"
            f"{at(r.finished_at)},{wait},{r.evictions}"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    s = g.scenario(args.variant)
    timeout = args.timeout or 2 * s.thresholds.max_wall_seconds
    print(
        f"{s.name}: {s.cluster_queue_count} ClusterQueues, {s.workload_count} workloads, "
        f"planned generation {s.generation_seconds:.0f}s at up to {s.creation_rate:.0f}/s; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        flush=True,
    )
    load_before = os.getloadavg()
    with lite_cluster(f"bench-scheduler-{s.name}") as cluster:
        kfed = start_controllers(cluster, args)
        started = time.monotonic()
        try:
            wait_synced(kfed)
            print(f"kfed's controllers synced in {time.monotonic() - started:.1f}s", flush=True)
            sampler = start_profile(kfed, args.profile)
            try:
                runner, done_at = asyncio.run(
                    run_scenario(cluster, s, timeout=timeout, absolute_pace=args.absolute_pace)
                )
            finally:
                if sampler is not None:
                    sampler.stop()
            processes = process_figures(cluster, kfed)
            requests = {
                kind: request_counts(cluster, kind)
                for kind in ("workloads", "clusterqueues", "localqueues", "events")
            }
        finally:
            if args.log is not None and kfed.log_path.exists():
                args.log.write_bytes(kfed.log_path.read_bytes())
            kfed.stop()
    figures = report.figures_of(
        s,
        runner.recorder,
        wall_seconds=done_at - started,
        generation_seconds=runner.generation_seconds,
    )
    figures.processes = processes
    figures.timed_out = runner.timed_out
    if runner.timed_out:
        figures.notes.append(f"TIMED OUT after {timeout:.0f}s: {runner.unfinished_summary()}")
    figures.load_average_before = load_before
    figures.load_average_after = os.getloadavg()
    finish_writes = runner.finish_write_seconds
    extra: dict[str, Any] = {
        "runner": {
            "created": runner.created,
            "finish_writes": runner.finish_writes,
            "finish_failures": runner.finish_failures,
            "finish_write_ms_p50": round(1000 * report.percentile(finish_writes, 0.5)),
            "finish_write_ms_p90": round(1000 * report.percentile(finish_writes, 0.9)),
        },
        "machine": {"cpus": os.cpu_count()},
        "apiserver_requests": requests,
        "events": report.event_share(requests, done_at - started),
    }
    if args.csv is not None:
        write_csv(args.csv, runner, started)
    data = report.to_json(s, figures, extra)
    print(report.render(s, figures))
    print(
        "runner's finish writes (the API server's latency): "
        f"p50 {extra['runner']['finish_write_ms_p50']} ms, "
        f"p90 {extra['runner']['finish_write_ms_p90']} ms"
    )
    for kind, counts in requests.items():
        print(
            f"API server requests, {kind}: "
            + ", ".join(f"{verb} {n}" for verb, n in sorted(counts.items()))
        )
    events = extra["events"]
    print(
        f"Events written: {events['written']} ({events['per_second']:.1f}/s over the run's "
        f"{figures.wall_seconds:.0f} s), {100 * events['share_of_writes']:.1f} % of the API "
        "writes counted above"
        if events["written"]
        else "Events written: none"
    )
    if args.profile is not None and (args.profile / PROFILE_FILE).exists():
        where = profile.Profile.parse((args.profile / PROFILE_FILE).read_text())
        print(f"where kfed's controllers spent their time ({args.profile / PROFILE_FILE}):")
        print(where.render(25))
    text = report.dumps(data)
    print(text)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    return 0 if data["passed"] else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted; everything started was stopped", file=sys.stderr)
        sys.exit(130)
