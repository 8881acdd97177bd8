"""The raw rate one local kube-apiserver sustains on this machine for the two writes kfed's
admission path is made of: creating Workload objects, and merge-patching their status
(``QuotaReserved`` + ``status.admission``, as kfed writes an admission). kfed's admission
throughput can then be stated as a fraction of it.

    .venv/bin/python -m e2e.bench.apiserver [--concurrency 1,8,32] [--objects 2000] [--json F]

On a fresh lite control plane (etcd + kube-apiserver) with kfed's CRDs: for each concurrency,
``--objects`` Workloads are created by that many concurrent asyncio clients (one
kubernetes_asyncio client via ``manager.kube.api.KubeApi``, in one process), then each gets
one status patch. A last row repeats the highest concurrency with ``--watchers`` watches on
Workloads open (the scheduler benchmark has two: kfed's and its runner's), since every write
is then also an event sent to each watcher. The CPU seconds the API server, etcd and this
client spent during each phase show which of them bounds the rate.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from e2e.bench import procstats
from e2e.bench.cluster import lite_cluster
from e2e.bench.scheduler.generator import (
    QueueRef,
    WorkloadClass,
    workload_name,
    workload_object,
)
from e2e.local.cluster import LocalCluster
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]


BENCH_CLASS = WorkloadClass("bench", count=0, interval_ms=0, cpu=1, runtime_ms=0, priority=100)
"""One-cpu Workloads, the shape the scheduler benchmark creates."""


def workload(namespace: str, index: int) -> Obj:
    return workload_object(QueueRef(namespace, cohort=""), BENCH_CLASS, index)


def admission_patch() -> Obj:
    """What kfed sends when it reserves quota for a workload (one flavor, one pod set)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "status": {
            "admission": {
                "clusterQueue": "bench",
                "podSetAssignments": [
                    {
                        "name": "main",
                        "flavors": {"cpu": "bench"},
                        "resourceUsage": {"cpu": "1"},
                        "count": 1,
                    }
                ],
            },
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "True",
                    "reason": "QuotaReserved",
                    "message": "Quota reserved in ClusterQueue bench",
                    "lastTransitionTime": now,
                },
                {
                    "type": "Admitted",
                    "status": "True",
                    "reason": "Admitted",
                    "message": "The workload is admitted",
                    "lastTransitionTime": now,
                },
            ],
        }
    }


@dataclass
class Phase:
    requests: int
    seconds: float
    rate: float
    latency_ms_p50: float
    latency_ms_p99: float
    apiserver_cpu_seconds: float
    etcd_cpu_seconds: float
    client_cpu_seconds: float


@dataclass
class Row:
    concurrency: int
    watchers: int
    creates: Phase
    status_patches: Phase


class CpuMeter:
    """CPU seconds spent by the API server, etcd and this process between two readings."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.pids = {role: cluster.processes[role].pid for role in ("kube-apiserver", "etcd")}

    def read(self) -> dict[str, float]:
        result = {}
        for role, pid in self.pids.items():
            sample = procstats.sample(pid) if pid is not None else None
            result[role] = sample.cpu_seconds if sample else 0.0
        usage = resource.getrusage(resource.RUSAGE_SELF)
        result["client"] = usage.ru_utime + usage.ru_stime
        return result


async def timed_phase(
    count: int, concurrency: int, call: Callable[[int], Awaitable[object]], meter: CpuMeter
) -> Phase:
    latencies: list[float] = []
    next_index = 0

    async def client() -> None:
        nonlocal next_index
        while next_index < count:
            index = next_index
            next_index += 1
            start = time.perf_counter()
            await call(index)
            latencies.append(time.perf_counter() - start)

    cpu_before = meter.read()
    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    seconds = time.perf_counter() - start
    cpu_after = meter.read()
    ordered = sorted(latencies)
    return Phase(
        requests=count,
        seconds=round(seconds, 3),
        rate=round(count / seconds, 1),
        latency_ms_p50=round(statistics.median(ordered) * 1000, 2),
        latency_ms_p99=round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 2),
        apiserver_cpu_seconds=round(cpu_after["kube-apiserver"] - cpu_before["kube-apiserver"], 2),
        etcd_cpu_seconds=round(cpu_after["etcd"] - cpu_before["etcd"], 2),
        client_cpu_seconds=round(cpu_after["client"] - cpu_before["client"], 2),
    )


async def drain_watch(api: KubeApi, resource_version: str) -> None:
    """A watcher that reads and decodes every Workload event, as an informer does."""
    while True:
        async for _ in api.watch(R.WORKLOADS, resource_version=resource_version):
            pass


async def run_row(
    api: KubeApi, meter: CpuMeter, *, concurrency: int, objects: int, watchers: int, tag: str
) -> Row:
    namespace = f"bench-{tag}"
    await api.create(R.NAMESPACES, {"metadata": {"name": namespace}})
    watches: list[asyncio.Task[None]] = []
    if watchers:
        listing = await api.list(R.WORKLOADS, page_size=1)
        version = listing["metadata"]["resourceVersion"]
        watches = [asyncio.create_task(drain_watch(api, version)) for _ in range(watchers)]
    try:
        creates = await timed_phase(
            objects,
            concurrency,
            lambda i: api.create(R.WORKLOADS, workload(namespace, i)),
            meter,
        )
        patches = await timed_phase(
            objects,
            concurrency,
            lambda i: api.patch(
                R.WORKLOADS,
                workload_name(BENCH_CLASS, i),
                admission_patch(),
                namespace,
                subresource="status",
            ),
            meter,
        )
    finally:
        for task in watches:
            task.cancel()
        for task in watches:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    return Row(concurrency, watchers, creates, patches)


async def run_all(
    cluster: LocalCluster, concurrencies: list[int], objects: int, watchers: int
) -> list[Row]:
    meter = CpuMeter(cluster)
    async with await KubeApi.from_kubeconfig_file(cluster.kubeconfig, name="bench") as api:
        rows = []
        plan = [(c, 0) for c in concurrencies]
        if watchers:
            plan.append((max(concurrencies), watchers))
        for index, (concurrency, watching) in enumerate(plan):
            row = await run_row(
                api,
                meter,
                concurrency=concurrency,
                objects=objects,
                watchers=watching,
                tag=f"{index}-c{concurrency}-w{watching}",
            )
            print(
                f"concurrency {concurrency:>3}, watchers {watching}: "
                f"{row.creates.rate:.0f} creates/s, {row.status_patches.rate:.0f} patches/s",
                file=sys.stderr,
                flush=True,
            )
            rows.append(row)
        return rows


def render(rows: list[Row]) -> str:
    header = (
        f"{'conc':>4} {'watch':>5} | {'creates/s':>9} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'api cpu':>7} {'etcd':>5} {'client':>6} | {'patches/s':>9} {'p50 ms':>7} "
        f"{'p99 ms':>7} {'api cpu':>7} {'etcd':>5} {'client':>6}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        c, p = r.creates, r.status_patches
        lines.append(
            f"{r.concurrency:>4} {r.watchers:>5} | {c.rate:>9.0f} {c.latency_ms_p50:>7.1f} "
            f"{c.latency_ms_p99:>7.1f} {c.apiserver_cpu_seconds:>7.1f} {c.etcd_cpu_seconds:>5.1f} "
            f"{c.client_cpu_seconds:>6.1f} | {p.rate:>9.0f} {p.latency_ms_p50:>7.1f} "
            f"{p.latency_ms_p99:>7.1f} {p.apiserver_cpu_seconds:>7.1f} {p.etcd_cpu_seconds:>5.1f} "
            f"{p.client_cpu_seconds:>6.1f}"
        )
    lines.append("cpu columns: seconds spent during the phase by the API server, etcd, this client")
    return "\n".join(lines)


def _positive_ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"need positive integers: {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m e2e.bench.apiserver",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--concurrency", type=_positive_ints, default=[1, 8, 32])
    p.add_argument("--objects", type=int, default=2000, help="Workloads per concurrency level")
    p.add_argument("--watchers", type=int, default=2, help="watches open in the last row")
    p.add_argument("--json", type=Path, help="also write the JSON report to this file")
    args = p.parse_args(argv)
    if args.objects < 1:
        p.error("--objects must be at least 1")

    load_before = os.getloadavg()
    with lite_cluster("bench-apiserver") as cluster:
        rows = asyncio.run(run_all(cluster, args.concurrency, args.objects, args.watchers))
    report = {
        "benchmark": "apiserver",
        "objects_per_row": args.objects,
        "machine": {"cpus": os.cpu_count()},
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "rows": [asdict(r) for r in rows],
    }
    print(render(rows))
    print(
        "load average before "
        + " ".join(f"{x:.2f}" for x in load_before)
        + ", after "
        + " ".join(f"{x:.2f}" for x in os.getloadavg())
    )
    text = json.dumps(report, indent=2)
    print(text)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted; everything started was stopped", file=sys.stderr)
        sys.exit(130)
