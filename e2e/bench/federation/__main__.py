"""Dispatch and failover benchmark of kfed on local control planes.

    .venv/bin/python -m e2e.bench.federation [--jobs N] [--drills N] [--json out.json]

Starts a fresh full local federation (manager + 3 workers: etcd, kube-apiserver,
controller-manager, scheduler and kwok fake GPU nodes; worker-1 rtx-a1000, worker-2 h100,
worker-3 both), kfed's worker shims and manager as real processes, and then:

1. dispatch, once per mode (capacity-aware, then AllAtOnce, each with a fresh manager and
   a clean namespace): the same --jobs Jobs, half per GPU flavor, at --rate per second.
   Measured from outside with watches on every cluster: dispatch latency from the manager's
   quota reservation to the remote copy's admission (p50, p99), remote Workloads created
   per workload, the manager's CPU seconds (and every other process's), and the API requests
   each cluster's kube-apiserver served per workload (manager, each worker, the chosen
   worker), net of the background measured in an idle window just before submitting;
2. --drills partition drills: time from cutting the manager's link to a worker to the
   probe Job running on another worker (p50, max), and double runs (must be 0).

Prints a table and JSON (--json FILE writes it too). Exits 1 if a mode did not complete,
a drill did not fail over, or anything ran twice. Everything it started is stopped at the
end, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from e2e.bench import entry
from e2e.bench.federation import dispatchrun, drills, jobs, report
from e2e.bench.federation.bed import Bed
from e2e.bench.federation.topology import Topology
from e2e.waiting import WaitTimeout
from manager.kube import errors

MODES = ("capacity-aware", "all-at-once")
BUSY_LOAD = 1.5
"""A 1-minute load average above this at the start gets a note: the 2-core machines this
runs on share their CPUs with whatever else runs, and latencies then include waiting."""


def count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {value}")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m e2e.bench.federation",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--jobs", type=count, default=2000, help="Jobs per dispatch mode")
    p.add_argument(
        "--rate",
        type=positive_float,
        default=4.0,
        help="Jobs submitted per second (default 4: below what 2 cores sustain in AllAtOnce)",
    )
    p.add_argument("--runtime-ms", type=count, default=2000, help="how long kwok runs each pod")
    p.add_argument(
        "--idle-seconds",
        type=float,
        default=None,
        help="idle window before each mode's submissions, for the background API requests "
        "(default: the submission time, at most 60 s; 0: none)",
    )
    p.add_argument("--drills", type=count, default=10, help="partition drills")
    p.add_argument(
        "--modes",
        default=",".join(MODES),
        help=f"dispatch modes to measure, in order (default: {','.join(MODES)})",
    )
    p.add_argument(
        "--default-failover",
        action="store_true",
        help="run the drills with the manager's default lease and timeouts, not fast ones",
    )
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=900.0,
        help="seconds a mode may take after its last submission",
    )
    p.add_argument(
        "--manager-flag",
        action="append",
        default=[],
        metavar="FLAG",
        help="an extra flag for `python -m manager` in every phase, e.g. "
        "--manager-flag=--workers=16 (repeatable; recorded in the report)",
    )
    p.add_argument("--json", type=Path, help="also write the JSON report to this file")
    p.add_argument("--logs", type=Path, help="copy kfed's process logs into this directory")
    args = p.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in (*MODES, "incremental")]
    if unknown:
        p.error(
            f"unknown dispatch mode {', '.join(unknown)}; known: {', '.join(MODES)}, incremental"
        )
    args.modes = modes
    if args.idle_seconds is None:
        args.idle_seconds = min(60.0, args.jobs / args.rate)
    if args.idle_seconds < 0:
        p.error(f"--idle-seconds must be 0 or more, got {args.idle_seconds}")
    return args


def settings_of(
    args: argparse.Namespace, topo: Topology, shape: jobs.JobShape
) -> dict[str, object]:
    return {
        "jobs": args.jobs,
        "rate_per_second": args.rate,
        "job_shape": shape.to_json(),
        "flavors": list(jobs.FLAVORS),
        "modes": args.modes,
        "drills": args.drills,
        "idle_window_seconds": args.idle_seconds,
        "drill_failover": "default" if args.default_failover else "fast",
        "timeout_seconds": args.timeout,
        "extra_manager_flags": args.manager_flag,
        "topology": topo.to_json(),
        "manager": "python -m manager, a subprocess; --no-webhook (Jobs carry managedBy)",
        "worker_shims": "python -m worker_shim per worker, subprocesses, default settings",
        "manager_to_workers": "direct for dispatch; through a cuttable TCP proxy for drills",
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "started_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


async def run(bed: Bed, args: argparse.Namespace, shape: jobs.JobShape, out: report.Report) -> None:
    await bed.connect()
    try:
        await bed.configure()
        load = jobs.load_jobs(args.jobs, shape)
        if args.jobs:
            for mode in args.modes:
                await dispatchrun.run_mode(
                    bed,
                    mode,
                    load,
                    rate=args.rate,
                    timeout=args.timeout,
                    results=out.modes,
                    extra=args.manager_flag,
                    idle_seconds=args.idle_seconds,
                )
        if args.drills:
            manager_argv, out.drills = drills.plan(
                bed, fast=not args.default_failover, extra=args.manager_flag
            )
            await drills.run_drills(bed, manager_argv, out.drills, args.drills, shape)
    except (WaitTimeout, TimeoutError, RuntimeError, errors.KubeError) as err:
        # The bed is in an unknown state: stop here, and report what was measured.
        out.aborted = f"{type(err).__name__}: {err}"
        print(f"aborted: {out.aborted}", file=sys.stderr, flush=True)
    finally:
        await bed.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    topo, shape = Topology(), jobs.JobShape(runtime_ms=args.runtime_ms)
    out = report.Report(settings=settings_of(args, topo, shape))
    out.load_average_start = os.getloadavg()
    started = time.monotonic()
    print(
        f"federation benchmark: {args.jobs} jobs x {len(args.modes)} modes at {args.rate}/s, "
        f"{args.drills} drills; load average "
        + " ".join(f"{x:.2f}" for x in out.load_average_start),
        flush=True,
    )
    bed = Bed(topo)
    try:
        bed.up()
        asyncio.run(run(bed, args, shape, out))
    finally:
        logs = args.logs
        if logs is None and not out.passed and bed.logs.exists():
            logs = Path(tempfile.mkdtemp(prefix="kfed-bench-federation-logs-"))
            out.notes.append(f"kfed's process logs kept in {logs}")
        if logs is not None and bed.logs.exists():
            shutil.copytree(bed.logs, logs, dirs_exist_ok=True)
        bed.down()
    out.load_average_end = os.getloadavg()
    out.duration_seconds = time.monotonic() - started
    if out.load_average_start[0] > BUSY_LOAD:
        out.notes.append(
            "the machine was busy when the run started (1-min load "
            f"{out.load_average_start[0]:.2f}): latencies include waiting for a CPU"
        )
    entry.publish(report.render(out), report.dumps(out), args.json)
    return 0 if out.passed else 1


if __name__ == "__main__":
    entry.run(main)
