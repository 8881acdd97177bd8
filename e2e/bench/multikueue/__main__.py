"""kfed in upstream Kueue's MultiKueue performance baseline shape.

    .venv/bin/python -m e2e.bench.multikueue [--jobs N] [--workers K]
        [--mode capacity|allatonce|incremental ...] [--creators C] [--json FILE]

Upstream's gate (``test/performance/multikueue``, baseline): 1 manager + 3 workers, 1,000
suspended ``batch/v1`` Jobs of ``cpu: 1m`` from one generator, AllAtOnce; throughput is
workloads admitted on the manager per second from the first create to the last admission;
quota reservation and admission latencies from immediately before each create to the state
first seen on a watch, as P50/P95/P99 by nearest rank.

Each mode gets a fresh bed: lite control planes (etcd + kube-apiserver; upstream's boundary
leaves Job and Pod execution out, so nothing needs to run them), kfed's CRDs, a worker shim
per worker (the worker's Kueue), the manager as a subprocess in the mode, without its Job
webhook (the Jobs carry ``managedBy``, as upstream's generator writes them). Before the first
mode, the manager's API server's own write rate is measured (the ceiling).

Prints a table and JSON (--json FILE writes it too); exits 1 when a mode did not admit
every workload.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

from e2e.bench import apiserver, entry
from e2e.bench.federation.bed import Bed
from e2e.bench.federation.topology import Topology
from e2e.bench.multikueue import report, run
from e2e.local.federation import MANAGER, worker_names
from manager.kube import resources as R

MODE_NAMES = {
    "capacity": "capacity-aware",
    "capacity-aware": "capacity-aware",
    "allatonce": "all-at-once",
    "all-at-once": "all-at-once",
    "incremental": "incremental",
}


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m e2e.bench.multikueue",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--jobs", type=positive, default=1000, help="Jobs per mode (default 1000)")
    p.add_argument("--workers", type=positive, default=3, help="worker clusters (default 3)")
    p.add_argument(
        "--mode",
        action="append",
        choices=sorted(MODE_NAMES),
        help="a dispatch mode to run (repeatable; default: capacity and allatonce)",
    )
    p.add_argument(
        "--creators", type=positive, default=1, help="concurrent Job generators (default 1)"
    )
    p.add_argument(
        "--timeout", type=float, default=600.0, help="seconds a mode may take (default 600)"
    )
    p.add_argument(
        "--ceiling-objects",
        type=int,
        default=1000,
        help="objects for the API server's write-rate measurement (0: skip it)",
    )
    p.add_argument(
        "--manager-flag",
        action="append",
        default=[],
        metavar="FLAG",
        help="an extra flag for `python -m manager`, e.g. --manager-flag=--workers=16",
    )
    p.add_argument(
        "--event-qps",
        type=float,
        help="Kubernetes Events per second at most, for the manager and every shim (default "
        "kfed's; 0: none, to measure what they cost)",
    )
    p.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="sample the manager with py-spy during each mode; raw stacks saved in DIR",
    )
    p.add_argument("--json", type=Path, help="also write the JSON report to this file")
    p.add_argument("--logs", type=Path, help="copy kfed's process logs into this directory")
    args = p.parse_args(argv)
    args.shim_flag = []
    if args.event_qps is not None:
        args.manager_flag.append(f"--event-qps={args.event_qps}")
        args.shim_flag.append(f"--event-qps={args.event_qps}")
    modes = args.mode or ["capacity", "allatonce"]
    args.modes = list(dict.fromkeys(MODE_NAMES[m] for m in modes))
    return args


def settings_of(args: argparse.Namespace) -> dict[str, object]:
    return {
        "jobs": args.jobs,
        "workers": args.workers,
        "modes": args.modes,
        "creators": args.creators,
        "cpu_request": "1m",
        "timeout_seconds": args.timeout,
        "extra_manager_flags": args.manager_flag,
        "extra_shim_flags": args.shim_flag,
        "control_planes": "lite: etcd + kube-apiserver per cluster (no Job runs, as upstream)",
        "manager": "python -m manager, a subprocess; --no-webhook (Jobs carry managedBy)",
        "worker_shims": "python -m worker_shim per worker, subprocesses, default settings",
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "started_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


async def measure_ceiling(bed: Bed, objects: int) -> report.Ceiling:
    """The manager API server's create and status-patch rates, before kfed starts; the
    Workloads it made are deleted again (nothing else is there yet)."""
    await bed.connect()
    try:
        cluster = bed.fed.cluster(MANAGER)
        row = await apiserver.run_row(
            bed.manager,
            apiserver.CpuMeter(cluster),
            concurrency=32,
            objects=objects,
            watchers=0,
            tag="ceiling",
        )
        await bed.manager.request("DELETE", R.WORKLOADS.path("bench-ceiling"))
    finally:
        await bed.close()
        bed.manager_api, bed.worker_apis = None, {}
    return report.Ceiling(row.creates.rate, row.status_patches.rate)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = report.Report(settings=settings_of(args))
    started = time.monotonic()
    print(
        f"MultiKueue benchmark: {args.jobs} Jobs x {len(args.modes)} modes, {args.workers} "
        f"workers; load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()),
        flush=True,
    )
    topo = Topology(worker_flavors={w: ("default",) for w in worker_names(args.workers)})
    for index, mode in enumerate(args.modes):
        bed = Bed(topo, name=f"bench-mk-{mode}", full=False)
        bed.shim_flags = list(args.shim_flag)
        try:
            bed.up()
            if index == 0 and args.ceiling_objects > 0:
                out.ceiling = asyncio.run(measure_ceiling(bed, args.ceiling_objects))
                print(
                    f"API server ceiling: {out.ceiling.creates_per_second:.0f} creates/s, "
                    f"{out.ceiling.status_patches_per_second:.0f} status patches/s",
                    flush=True,
                )
            result = asyncio.run(
                run.run_mode(
                    bed,
                    mode,
                    count=args.jobs,
                    creators=args.creators,
                    timeout=args.timeout,
                    extra=args.manager_flag,
                    profile_dir=args.profile,
                )
            )
            out.modes.append(result)
            run.say(
                f"   {mode}: {result.admitted}/{args.jobs} admitted, "
                f"{result.throughput:.1f} workloads/s, admission P95 "
                f"{result.admission.p95_ms:.0f} ms"
            )
        finally:
            logs = args.logs
            if logs is None and out.modes and not out.modes[-1].complete:
                logs = Path(tempfile.mkdtemp(prefix="kfed-bench-mk-logs-"))
                out.notes.append(f"kfed's process logs of {mode} kept in {logs}")
            if logs is not None and bed.logs.exists():
                shutil.copytree(bed.logs, logs / mode, dirs_exist_ok=True)
            bed.down()
    out.settings["duration_seconds"] = round(time.monotonic() - started, 1)
    entry.publish(report.render(out), report.dumps(out), args.json)
    return 0 if out.passed else 1


if __name__ == "__main__":
    entry.run(main)
