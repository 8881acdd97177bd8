"""kfed's single-cluster controllers alone (informers, admission core, scheduling loop,
Workload and queue-status controllers), as a process of their own: the benchmark's
counterpart of upstream's "minimalkueue". It is what ``python -m worker_shim --no-fencing``
runs, with the knobs the benchmark turns.

    python -m e2e.bench.scheduler.controller_process --kubeconfig FILE [--workers N]

Prints ``SYNCED`` on stdout once the controller has listed everything and starts
scheduling, so the benchmark knows when to start creating objects.

Upstream's runner (``test/performance/scheduler/runner``) starts it too, through the wrapper
``upstream.py`` writes, in place of ``minimalkueue``: with ``--kubeconfig`` and, by its own
options, ``--zap-log-level``, ``--metricsPort``, ``--cpuprofile``, ``--memprofile``,
``--enableTAS``. Those are accepted and said to be ignored (kfed's process has no Go
profiles; profile it with py-spy from outside).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import sys
import time

from manager.controllers.runtime import ClusterController
from manager.controllers.settings import ControllerSettings
from manager.kube.api import KubeApi
from manager.kube.process import (
    configure_logging,
    pace_garbage_collector,
    run_until_signalled,
)

SYNCED = "SYNCED"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    defaults = ControllerSettings()
    p = argparse.ArgumentParser(prog="python -m e2e.bench.scheduler.controller_process")
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--workers", type=int, default=defaults.workers)
    p.add_argument("--status-period", type=float, default=defaults.status_period)
    p.add_argument("--write-concurrency", type=int, default=defaults.write_concurrency)
    p.add_argument(
        "--event-qps",
        type=float,
        default=defaults.event_qps,
        help="Kubernetes Events per second at most (0: none)",
    )
    p.add_argument("--log-level", default="WARNING")
    upstream = p.add_argument_group("upstream runner's options (accepted, ignored)")
    for flag in ("--zap-log-level", "--metricsPort", "--cpuprofile", "--memprofile"):
        upstream.add_argument(flag, dest=f"ignored_{flag.strip('-')}", help=argparse.SUPPRESS)
    upstream.add_argument("--enableTAS", action="store_true", help=argparse.SUPPRESS)
    p.add_argument(
        "--stats-every",
        type=float,
        default=0.0,
        help="print a line of internal figures (queues, cycles, event-loop lag) this often",
    )
    return p.parse_args(argv)


async def run(args: argparse.Namespace) -> None:
    settings = ControllerSettings(
        workers=args.workers,
        status_period=args.status_period,
        write_concurrency=args.write_concurrency,
        event_qps=args.event_qps,
    )
    async with await KubeApi.from_kubeconfig_file(args.kubeconfig, name="bench") as api:
        controller = ClusterController(api, settings)
        task = asyncio.create_task(controller.run(), name="cluster-controller")
        synced = asyncio.create_task(controller.synced.wait())
        await asyncio.wait({task, synced}, return_when=asyncio.FIRST_COMPLETED)
        if synced.done():
            print(SYNCED, flush=True)
        else:
            synced.cancel()
        if args.stats_every > 0:
            stats = asyncio.create_task(print_stats(controller, args.stats_every))
            task.add_done_callback(lambda _: stats.cancel())
        await task


async def print_stats(controller: ClusterController, every: float) -> None:
    """Internal figures for whoever tunes the controllers: work queue lengths, scheduling
    cycles so far, and how late the event loop wakes a sleeper (its lag)."""
    loop = asyncio.get_running_loop()
    while True:
        before = loop.time()
        await asyncio.sleep(every)
        lag = loop.time() - before - every
        figures = {
            "t": round(time.time(), 1),
            "lag_ms": round(lag * 1000, 1),
            "cycles": controller.admission.cycles,
            "heads": controller.state.core.heads_evaluated,
            "nominated": controller.state.core.heads_nominated,
            "in_flight": len(controller.admission.in_flight),
            "workload_queue": len(controller.workloads.queue),
            "pending_status_queue": len(controller.admission.pending_status.queue),
            "pending_status_written": controller.admission.pending_status.written,
            "pending_status_coalesced": controller.admission.pending_status.coalesced,
            "gc_collections": [g["collections"] for g in gc.get_stats()],
            "cpu_s": round(time.process_time(), 1),
        }
        print(json.dumps(figures), flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.log_level)
    log = logging.getLogger(__name__)
    log.info("starting on %s", args.kubeconfig)
    ignored = [k for k, v in vars(args).items() if k.startswith("ignored_") and v is not None]
    if ignored or args.enableTAS:
        log.warning("upstream runner's options ignored: %s", ", ".join(ignored) or "enableTAS")
    pace_garbage_collector()  # as the manager and the worker shim do (run_process)
    asyncio.run(run_until_signalled(run(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
