"""Benchmark of the manager's placement by topology (docs/tas.md, "Across workers"): the time
to place a TAS gang among workers, and the memory the manager keeps per worker node.

    .venv/bin/python -m e2e.bench.tasfederation [--workers 3] [--nodes 64] [--repeat 300]
        [--output artifacts/bench-tas-federation.json]

Each worker has blocks of 8 racks of 8 hosts of 8 GPUs, a quarter of the GPUs taken at random
(``e2e.bench.tas.nodes``, another seed per worker). Its shim's report is made as the shim
makes it (``summarize``), and read as the manager reads it (``snapshot_of``). Reported:

- report: the bytes of one worker's report and the time to make it and to read it (once per
  change of the worker's topology; every placement until the next change reuses it);
- place: one manager decision for a TAS gang (``topology.evaluate`` on every worker), for an
  8-pod gang that requires a rack and a 64-pod gang that prefers a rack, p50 and p99;
- memory per 1,000 nodes: what the manager holds for a worker of 1,000 nodes (the domain
  tree read from its report, and the report's text in the informer's cache), tracemalloc.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import tracemalloc
from pathlib import Path
from typing import Any

from e2e.bench.tas import nodes
from manager.core.model import TopologyRequest
from manager.core.tas import TopologySnapshot
from manager.core.tas_model import HOSTNAME, Topology
from manager.core.tas_summary import snapshot_of, summarize
from manager.federation.decisions import capacity, topology
from manager.federation.decisions.topology import Need, PodSetNeed

LEVELS = ("block", "rack", HOSTNAME)


def report_of(count: int, seed: int) -> str:
    made, used = nodes(count, seed)
    tree = TopologySnapshot(Topology("default", LEVELS), made, pod_usage=used)
    return json.dumps(summarize(tree), separators=(",", ":"))


def percentiles(times: list[float]) -> dict[str, float]:
    times = sorted(times)
    return {
        "p50_ms": round(statistics.median(times) * 1000, 3),
        "p99_ms": round(times[max(0, int(len(times) * 0.99) - 1)] * 1000, 3),
    }


def memory_per_thousand() -> dict[str, int]:
    text = report_of(1000, seed=7)
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    tree = snapshot_of(json.loads(text))
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    assert len(tree.leaves) == 1000
    return {
        "tree_bytes": sum(s.size_diff for s in after.compare_to(before, "filename")),
        "report_bytes": len(text.encode()),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument("--output", type=Path, default=Path("artifacts/bench-tas-federation.json"))
    args = parser.parse_args()

    started = time.perf_counter()
    reports = {f"worker-{i + 1}": report_of(args.nodes, seed=i + 1) for i in range(args.workers)}
    made_s = (time.perf_counter() - started) / args.workers
    started = time.perf_counter()
    trees = {name: {"tas": snapshot_of(json.loads(text))} for name, text in reports.items()}
    read_s = (time.perf_counter() - started) / args.workers

    def gang(count: int, asked: TopologyRequest) -> Need:
        return Need((PodSetNeed("main", count, {"nvidia.com/gpu": 1}, asked, "tas"),))

    gangs = {
        "8 pods, rack required": gang(8, TopologyRequest(required="rack")),
        "64 pods, rack preferred": gang(64, TopologyRequest(preferred="rack")),
    }
    quota = {
        name: capacity.Candidate(name, True, "fits", "cq", {"tas": "tas"}, {}, (0.5, 0, i))
        for i, name in enumerate(trees)
    }
    result: dict[str, Any] = {
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
        "workers": args.workers,
        "nodes_per_worker": args.nodes,
        "report_bytes": len(next(iter(reports.values())).encode()),
        "report_make_ms": round(made_s * 1000, 3),
        "report_read_ms": round(read_s * 1000, 3),
        "place": {},
    }
    for label, need in gangs.items():
        times = []
        chosen = None
        for _ in range(args.repeat):
            started = time.perf_counter()
            judged = [topology.evaluate(quota[n], trees[n], need) for n in trees]
            chosen = capacity.choose(judged)
            times.append(time.perf_counter() - started)
        result["place"][label] = {
            **percentiles(times),
            "chosen": chosen.cluster if chosen else None,
        }
    result["memory_per_1000_nodes"] = memory_per_thousand()

    print(
        f"load average {result['load_average_1m_at_start']} on {result['cpus']} cpus; "
        f"{args.workers} workers x {args.nodes} nodes: report {result['report_bytes']} bytes, "
        f"made in {result['report_make_ms']} ms, read in {result['report_read_ms']} ms"
    )
    for label, figures in result["place"].items():
        print(
            f"  place {label}: p50 {figures['p50_ms']} ms, p99 {figures['p99_ms']} ms "
            f"(chosen: {figures['chosen']})"
        )
    memory = result["memory_per_1000_nodes"]
    print(
        f"manager memory per 1,000 worker nodes: tree {memory['tree_bytes'] / 1024:.0f} KiB, "
        f"report text {memory['report_bytes'] / 1024:.0f} KiB"
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"saved {args.output}")


if __name__ == "__main__":
    main()
