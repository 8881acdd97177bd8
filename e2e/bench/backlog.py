"""What the manager holds per pending workload, by owner: the memory figure of a deep backlog.

    .venv/bin/python -m e2e.bench.backlog [--jobs 1000,5000,10000] [--workers 3]
        [--json FILE] [--plot FILE.png] [--from-json FILE]

One bed of lite control planes (etcd + kube-apiserver: pending workloads run nothing), the
MultiKueue benchmark's queues with quota for one workload (every other one stays pending),
the workers registered with a shim each, and kfed's manager controllers **in this process**,
so that what they hold can be walked. The Jobs are created in steps up to each count of
``--jobs``; after each step, once the manager has a pending Workload for every Job, the
figures are read:

- the process's RSS (from /proc) against its RSS before the manager started;
- the deep size (``sys.getsizeof`` over ``gc.get_referents``, each object counted once, in
  the order below) of what each owner keeps: every informer's cache by kind, the admission
  core, the dispatcher's records, the Event recorder, the metrics registry, and the rest of
  the federation's objects;
- the admission cycle at that backlog: every cycle that evaluated a head during the step
  (arriving Workloads become heads that do not fit), its wall time as the manager's own
  ``kueue_admission_attempt_duration_seconds`` times it and its CPU time (the thread's: on a
  loaded two-core machine, where 21 control planes and the Job creators share the CPU, wall
  time also counts the moments the process was not running); p50, p99 and the largest over
  the step's last ``TAIL_CYCLES`` cycles (the backlog at its fullest).

Per pending workload = the growth between the first and the last step, divided by the Jobs
added. The deep sizes undercount the allocator's overhead (RSS is the truth); they say where
the bytes are.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import time
import types
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from e2e.bench import procstats
from e2e.bench.federation import processes
from e2e.bench.federation.bed import Bed
from e2e.bench.federation.topology import Topology
from e2e.bench.multikueue import shape
from e2e.local.federation import MANAGER, worker_names
from e2e.waiting import wait_for
from manager.federation.runtime import FederationController
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.informer import Informer
from manager.main import parse_args, settings_from
from manager.telemetry.metrics import Metrics

TAIL_CYCLES = 2000
NAMESPACE = "backlog"
MODE = "backlog"
CREATORS = 32

_NOT_DATA = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)
_MACHINERY = ("asyncio", "aiohttp", "ssl", "socket", "logging", "kubernetes_asyncio", "yarl")
"""Modules whose objects are the process's machinery (the event loop, connections, loggers),
shared by every owner: an owner's walk stops there, or the first owner with a client would
count the whole process."""


def _is_machinery(obj: object) -> bool:
    if isinstance(obj, (KubeApi, Informer, asyncio.AbstractEventLoop)):
        return True
    module = type(obj).__module__.split(".", 1)[0]
    return module in _MACHINERY


def deep_size(roots: Iterable[object], seen: set[int]) -> int:
    """Bytes of everything reachable from ``roots`` not in ``seen`` (which it extends):
    classes, modules and functions are shared code, not data, and are not walked, nor is
    the process's machinery (``_MACHINERY``; a root itself always is)."""
    stack = list(roots)
    size, root_ids = 0, {id(r) for r in stack}
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _NOT_DATA):
            continue
        if id(obj) not in root_ids and _is_machinery(obj):
            continue
        seen.add(id(obj))
        size += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return size


def _informers(controller: FederationController) -> Iterator[tuple[str, Informer]]:
    for informer in controller.manager.state.informers:
        yield informer.resource.plural, informer


def owners(controller: FederationController) -> dict[str, int]:
    """Deep size per owner, in bytes; an object reachable from two owners counts for the
    first. Informers: their cache and indices only (not their client)."""
    seen: set[int] = set()
    sizes: dict[str, int] = {}
    for plural, informer in _informers(controller):
        sizes[f"informer {plural}"] = deep_size(
            [informer.cache, informer._indices, informer._unseen], seen
        )
    state = controller.manager.state
    sizes["admission core"] = deep_size([state.core], seen)
    sizes["dispatcher records"] = deep_size([controller.dispatcher.records], seen)
    sizes["event recorder"] = deep_size([state.events], seen)
    sizes["metrics"] = deep_size([state.metrics], seen)
    sizes["the rest of the manager"] = deep_size([controller], seen)
    return sizes


class CycleTimes(Metrics):
    """The manager's metrics, also keeping each admission cycle's duration (in process): its
    wall time (what the metric observes) and the CPU time of the cycle ``time_core`` saw."""

    def __init__(self) -> None:
        super().__init__()
        self.cycle_seconds: list[float] = []
        self.cycle_cpu_seconds: list[float] = []
        self._last_cpu = 0.0

    def time_core(self, admission_core: object) -> None:
        """Wraps the core's ``schedule`` to take its thread CPU time."""
        schedule = admission_core.schedule  # type: ignore[attr-defined]

        def timed(now: float) -> object:
            started = time.thread_time()
            try:
                return schedule(now)
            finally:
                self._last_cpu = time.thread_time() - started

        admission_core.schedule = timed  # type: ignore[attr-defined]

    def scheduling_cycle(self, *, admitted: int, seconds: float) -> None:
        super().scheduling_cycle(admitted=admitted, seconds=seconds)
        self.cycle_seconds.append(seconds)
        self.cycle_cpu_seconds.append(self._last_cpu)

    def clear(self) -> None:
        self.cycle_seconds.clear()
        self.cycle_cpu_seconds.clear()


def percentile_ms(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return round(ordered[index] * 1000, 3)


@dataclass
class Step:
    jobs: int
    pending: int
    seconds_to_pending: float
    rss_mib: float
    rss_growth_mib: float
    objects: int
    """Objects the garbage collector tracks (containers), all owners'."""
    owners_mib: dict[str, float]
    cycles: int = 0
    """Admission cycles that evaluated a head during the step."""
    cycle_p50_ms: float = 0.0
    cycle_p99_ms: float = 0.0
    cycle_max_ms: float = 0.0
    """Wall time, over the step's last ``TAIL_CYCLES`` cycles."""
    cycle_cpu_p50_ms: float = 0.0
    cycle_cpu_p99_ms: float = 0.0
    cycle_cpu_max_ms: float = 0.0
    """CPU time of the same cycles."""


@dataclass
class Report:
    workers: int
    baseline_rss_mib: float
    steps: list[Step] = field(default_factory=list)
    per_workload_kib: dict[str, float] = field(default_factory=dict)
    """Growth from the first to the last step per Job added: ``rss`` and each owner."""


async def create_jobs(api: KubeApi, start: int, stop: int) -> None:
    indices = iter(range(start, stop))

    async def creator() -> None:
        for index in indices:
            await api.create(R.JOBS, shape.job(NAMESPACE, index, MODE), NAMESPACE)

    await asyncio.gather(*(creator() for _ in range(CREATORS)))


def pending_count(controller: FederationController) -> int:
    workloads = controller.manager.state.workloads.cache.values()
    return sum(1 for w in workloads if not (w.get("status") or {}).get("admission"))


def rss_mib() -> float:
    sample = procstats.sample(os.getpid())
    assert sample is not None
    return sample.rss_mib


async def measure(counts: list[int], workers: int) -> Report:
    bed = Bed(
        Topology(worker_flavors={w: ("default",) for w in worker_names(workers)}),
        name="bench-backlog",
        full=False,
    )
    bed.up()
    controller_task: asyncio.Task[None] | None = None
    api: KubeApi | None = None
    try:
        await bed.connect()
        await bed.configure(
            manager_queues=shape.queues(NAMESPACE, 1, check=True),
            worker_queues=lambda _worker: shape.queues(NAMESPACE, 1, check=False),
        )
        args = parse_args(processes.manager_args(bed.fed.kubeconfig(MANAGER), "capacity-aware"))
        api = await KubeApi.connect(args.kubeconfig, name="manager")
        gc.collect()
        report = Report(workers=workers, baseline_rss_mib=rss_mib())
        metrics = CycleTimes()
        controller = FederationController(
            api, settings_from(args), args.controller_settings, metrics=metrics
        )
        metrics.time_core(controller.manager.state.core)
        controller_task = asyncio.create_task(controller.run())
        created = 0
        for count in counts:
            started = time.monotonic()
            metrics.clear()
            await create_jobs(bed.manager, created, count)
            created = count

            async def all_pending(expected: int = count) -> bool:
                return pending_count(controller) >= expected - 1  # one fits the quota

            # A deadline for a loaded machine (the API server created ~8 Jobs/s on one
            # shared with three test runs); the condition ends the wait as soon as it holds.
            await wait_for(
                all_pending, timeout=300 + count / 4, what=f"{count} pending", interval=1
            )
            tail = metrics.cycle_seconds[-TAIL_CYCLES:]
            cpu_tail = metrics.cycle_cpu_seconds[-TAIL_CYCLES:]
            cycles = len(metrics.cycle_seconds)
            gc.collect()
            rss = rss_mib()
            sizes = owners(controller)
            report.steps.append(
                Step(
                    jobs=count,
                    pending=pending_count(controller),
                    seconds_to_pending=round(time.monotonic() - started, 1),
                    rss_mib=round(rss, 1),
                    rss_growth_mib=round(rss - report.baseline_rss_mib, 1),
                    objects=len(gc.get_objects()),
                    owners_mib={k: round(v / 2**20, 2) for k, v in sizes.items()},
                    cycles=cycles,
                    cycle_p50_ms=percentile_ms(tail, 0.50),
                    cycle_p99_ms=percentile_ms(tail, 0.99),
                    cycle_max_ms=percentile_ms(tail, 1.0),
                    cycle_cpu_p50_ms=percentile_ms(cpu_tail, 0.50),
                    cycle_cpu_p99_ms=percentile_ms(cpu_tail, 0.99),
                    cycle_cpu_max_ms=percentile_ms(cpu_tail, 1.0),
                )
            )
            print(json.dumps(asdict(report.steps[-1])), flush=True)
        first, last = report.steps[0], report.steps[-1]
        added = last.jobs - first.jobs
        if added > 0:
            report.per_workload_kib["rss"] = round((last.rss_mib - first.rss_mib) * 1024 / added, 1)
            for owner, mib in last.owners_mib.items():
                grown = mib - first.owners_mib.get(owner, 0.0)
                report.per_workload_kib[owner] = round(grown * 1024 / added, 2)
        return report
    finally:
        if controller_task is not None:
            controller_task.cancel()
            await asyncio.gather(controller_task, return_exceptions=True)
        if api is not None:
            await api.close()
        await bed.close()
        bed.down()


def plot(report: Report, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    jobs = [s.jobs for s in report.steps]
    fig, (ax, cycle_ax) = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True)
    ax.plot(jobs, [s.rss_growth_mib for s in report.steps], marker="o", label="RSS growth")
    # The owners that hold something (>= 1 MiB at the deepest step): the rest are flat at 0.
    owners_seen = [o for o, mib in report.steps[-1].owners_mib.items() if mib >= 1.0]
    for owner in owners_seen:
        ax.plot(jobs, [s.owners_mib.get(owner, 0.0) for s in report.steps], label=owner, lw=1)
    ax.set_ylabel("MiB")
    ax.set_title(f"kfed manager memory by pending backlog ({report.workers} workers)")
    ax.legend(fontsize=7)
    cycle_ax.plot(jobs, [s.cycle_p99_ms for s in report.steps], marker="o", label="p99 wall")
    cycle_ax.plot(jobs, [s.cycle_cpu_p50_ms for s in report.steps], marker="o", label="p50 CPU")
    cycle_ax.plot(jobs, [s.cycle_cpu_p99_ms for s in report.steps], marker="o", label="p99 CPU")
    cycle_ax.axhline(1.0, color="grey", lw=0.8, ls="--", label="1 ms")
    cycle_ax.set_xlabel("pending Jobs")
    cycle_ax.set_ylabel("admission cycle, ms")
    cycle_ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _counts(text: str) -> list[int]:
    values = sorted({int(v) for v in text.split(",") if v.strip()})
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"need positive Job counts: {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.bench.backlog", description=__doc__)
    parser.add_argument("--jobs", type=_counts, default=[1000, 5000, 10000])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--from-json", type=Path, help="plot a report saved before; run nothing")
    args = parser.parse_args(argv)
    if args.from_json is not None:
        data = json.loads(args.from_json.read_text())
        saved = Report(
            workers=data["workers"],
            baseline_rss_mib=data["baseline_rss_mib"],
            steps=[Step(**step) for step in data["steps"]],
            per_workload_kib=data["per_workload_kib"],
        )
        if args.plot:
            plot(saved, args.plot)
        return 0
    report = asyncio.run(measure(args.jobs, args.workers))
    text = json.dumps(asdict(report), indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    if args.plot:
        plot(report, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
