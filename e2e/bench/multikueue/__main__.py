"""kfed in upstream Kueue's MultiKueue performance baseline shape.

    .venv/bin/python -m e2e.bench.multikueue [--jobs N] [--workers K]
        [--mode capacity|allatonce|incremental ...] [--creators C] [--json FILE]
        [--against-upstream [--upstream-client-qps Q] [--plot FILE.png]]
        [--settle-load L] [--settle-patience S] [--idle-seconds I]
    .venv/bin/python -m e2e.bench.multikueue --from-json FILE [--plot FILE.png]

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

``--against-upstream`` adds a run of upstream Kueue (the pinned version, built for the interop
tests) in the same shape on a fresh bed of its own: its MultiKueue manager (AllAtOnce, its
default) and its Kueue on every worker, the same generator and recorder; then kfed's figures
beside upstream's and the ratios kfed / upstream (``sidebyside``). Each run starts once the
load average has fallen below ``--settle-load`` or ``--settle-patience`` seconds have passed
(what it waited is in the report), then ``--idle-seconds`` at rest measure the background that
the side-by-side figures leave out.

Prints a table and JSON (--json FILE writes it too); exits 1 when a mode did not admit
every workload.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from e2e import binaries
from e2e.bench import apiserver, entry
from e2e.bench.federation.bed import Bed
from e2e.bench.federation.topology import Topology
from e2e.bench.multikueue import report, run, sidebyside, upstream
from e2e.local import upstream_kueue
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
        "--timeout",
        type=float,
        help="seconds a run may take (default 600; upstream's run 2 s per Job, at least 600: "
        "its clients to the workers allow ~1.3 workloads/s)",
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
    p.add_argument(
        "--against-upstream",
        action="store_true",
        help="after kfed's modes, the same shape with upstream Kueue as the MultiKueue manager "
        "and on every worker (AllAtOnce, its default); prints both and kfed / upstream",
    )
    p.add_argument(
        "--upstream-client-qps",
        type=float,
        help="clientConnection.qps of every upstream Kueue (negative: no limit; default: as "
        "its manifests deploy it, 50 in v0.17.0)",
    )
    p.add_argument(
        "--settle-load",
        type=float,
        default=1.5,
        help="each run starts once the 1-minute load average is below this (default 1.5)",
    )
    p.add_argument(
        "--settle-patience",
        type=float,
        help="seconds each run waits at most for that (default 180 with --against-upstream, "
        "else 0: no wait)",
    )
    p.add_argument(
        "--idle-seconds",
        type=float,
        help="an idle window before each run's Jobs, whose CPU and requests are taken off as "
        "background (default 15 with --against-upstream, else 0: none)",
    )
    p.add_argument("--json", type=Path, help="also write the JSON report to this file")
    p.add_argument("--plot", type=Path, help="with --against-upstream: the ratios as a PNG")
    p.add_argument(
        "--from-json",
        type=Path,
        metavar="FILE",
        help="run nothing: print the side-by-side of a saved --against-upstream report again "
        "(and --plot it)",
    )
    p.add_argument("--logs", type=Path, help="copy kfed's process logs into this directory")
    args = p.parse_args(argv)
    args.shim_flag = []
    if args.event_qps is not None:
        args.manager_flag.append(f"--event-qps={args.event_qps}")
        args.shim_flag.append(f"--event-qps={args.event_qps}")
    modes = args.mode or ["capacity", "allatonce"]
    args.modes = list(dict.fromkeys(MODE_NAMES[m] for m in modes))
    if args.against_upstream:
        args.modes.append(upstream.MODE)
    elif args.plot is not None and args.from_json is None:
        p.error("--plot draws the side-by side comparison: it needs --against-upstream")
    if args.settle_patience is None:
        args.settle_patience = 180.0 if args.against_upstream else 0.0
    args.upstream_timeout = args.timeout or max(600.0, 2.0 * args.jobs)
    args.timeout = args.timeout or 600.0
    if args.idle_seconds is None:
        args.idle_seconds = 15.0 if args.against_upstream else 0.0
    args.quiet = run.Quiet(
        load=args.settle_load, patience=args.settle_patience, idle=args.idle_seconds
    )
    return args


def settings_of(args: argparse.Namespace) -> dict[str, object]:
    return {
        "jobs": args.jobs,
        "workers": args.workers,
        "modes": args.modes,
        "creators": args.creators,
        "cpu_request": "1m",
        "timeout_seconds": args.timeout,
        "upstream_timeout_seconds": args.upstream_timeout,
        "extra_manager_flags": args.manager_flag,
        "extra_shim_flags": args.shim_flag,
        "against_upstream": args.against_upstream,
        "upstream_client_qps": args.upstream_client_qps,
        "settle": {
            "load": args.quiet.load,
            "patience_seconds": args.quiet.patience,
            "idle_seconds": args.quiet.idle,
        },
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


def measured(bed: Bed, mode: str, args: argparse.Namespace) -> Coroutine[Any, Any, run.ModeResult]:
    """One run of the shape on ``bed``: kfed's manager in ``mode``, or upstream Kueue."""
    common: dict[str, Any] = {
        "count": args.jobs,
        "creators": args.creators,
        "timeout": args.timeout,
        "quiet": args.quiet,
    }
    if mode == upstream.MODE:
        common["timeout"] = args.upstream_timeout
        return upstream.run_upstream(bed, client_qps=args.upstream_client_qps, **common)
    return run.run_mode(bed, mode, extra=args.manager_flag, profile_dir=args.profile, **common)


def redraw(path: Path, plot: Path | None) -> int:
    """The side-by-side of a saved report, printed (and plotted) again."""
    data = json.loads(path.read_text())
    if "side_by_side" not in data:
        print(f"{path}: no side_by_side in it (a report of --against-upstream has one)")
        return 2
    comparison = sidebyside.Comparison.from_json(data["side_by_side"])
    print(sidebyside.render(comparison))
    print("\nin Markdown:\n\n" + sidebyside.markdown(comparison))
    if plot is not None:
        sidebyside.plot(comparison, plot)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_json is not None:
        return redraw(args.from_json, args.plot)
    out = report.Report(settings=settings_of(args))
    started = time.monotonic()
    print(
        f"MultiKueue benchmark: {args.jobs} Jobs x {len(args.modes)} modes, {args.workers} "
        f"workers; load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()),
        flush=True,
    )
    if args.against_upstream:
        print(f"upstream Kueue {binaries.kueue_version()}: {upstream_kueue.binary()}", flush=True)
    topo = Topology(worker_flavors={w: ("default",) for w in worker_names(args.workers)})
    for index, mode in enumerate(args.modes):
        if mode == upstream.MODE:
            bed = upstream.new_bed(topo)
        else:
            bed = Bed(topo, name=f"bench-mk-{mode}", full=False)
        bed.shim_flags = list(args.shim_flag)
        try:
            bed.up()
            if index == 0 and mode != upstream.MODE and args.ceiling_objects > 0:
                out.ceiling = asyncio.run(measure_ceiling(bed, args.ceiling_objects))
                print(
                    f"API server ceiling: {out.ceiling.creates_per_second:.0f} creates/s, "
                    f"{out.ceiling.status_patches_per_second:.0f} status patches/s",
                    flush=True,
                )
            result = asyncio.run(measured(bed, mode, args))
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
    rendered, data = report.render(out), report.to_json(out)
    if args.against_upstream:
        kfed = [m for m in out.modes if m.mode != upstream.MODE]
        theirs = [m for m in out.modes if m.mode == upstream.MODE]
        if theirs:
            comparison = sidebyside.compare(kfed, theirs[0])
            rendered += "\n" + sidebyside.render(comparison)
            rendered += "\n\nin Markdown:\n\n" + sidebyside.markdown(comparison) + "\n"
            data["side_by_side"] = comparison.to_json()
            if args.plot is not None:
                sidebyside.plot(comparison, args.plot)
    entry.publish(rendered, json.dumps(data, indent=2), args.json)
    return 0 if out.passed else 1


if __name__ == "__main__":
    entry.run(main)
