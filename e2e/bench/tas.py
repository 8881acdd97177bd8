"""Benchmark of TAS placement in the pure core: the time to place one gang, and the memory
a cluster's topology takes.

    .venv/bin/python -m e2e.bench.tas [--nodes 64,1000,5000] [--repeat 200]

The topology is blocks of 8 racks of 8 hosts (8 GPUs each), a quarter of the GPUs already
taken at random. Reported per size:

- build: the time to build a flavor's domain tree (once per change of nodes, pods or
  admitted TAS workloads; every placement until the next change reuses it);
- place p50/p99: one ``find_assignment`` of an 8-pod gang that requires a rack, and of a
  64-pod gang that prefers a rack (it spreads over a block);
- memory: what the tree of that many nodes holds (tracemalloc, the snapshot alone).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import tracemalloc

from manager.core.model import PodSetName, ResourceName, TopologyRequest
from manager.core.tas import TopologySnapshot
from manager.core.tas_model import HOSTNAME, Node, PodSetRequest, Topology

GPU = ResourceName("nvidia.com/gpu")
BLOCK, RACK = "block", "rack"


def nodes(count: int, seed: int = 1) -> tuple[list[Node], dict[str, dict[ResourceName, int]]]:
    rng = random.Random(seed)
    made: list[Node] = []
    used: dict[str, dict[ResourceName, int]] = {}
    for i in range(count):
        block, rack = f"b{i // 64}", f"b{i // 64}-r{(i // 8) % 8}"
        name = f"n{i}"
        made.append(
            Node(
                name,
                {BLOCK: block, RACK: rack, HOSTNAME: name},
                {GPU: 8, ResourceName("cpu"): 64000, ResourceName("pods"): 110},
            )
        )
        taken = rng.choice([0, 0, 2, 4, 8])
        if taken:
            used[name] = {GPU: taken, ResourceName("pods"): taken}
    return made, used


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", default="64,1000,5000")
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    topology = Topology("default", (BLOCK, RACK, HOSTNAME))
    gangs = {
        "8 pods, rack required": PodSetRequest(
            PodSetName("main"), 8, {GPU: 1}, TopologyRequest(required=RACK)
        ),
        "64 pods, rack preferred": PodSetRequest(
            PodSetName("main"), 64, {GPU: 1}, TopologyRequest(preferred=RACK)
        ),
    }
    for size in (int(s) for s in args.nodes.split(",")):
        made, used = nodes(size)
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
        started = time.perf_counter()
        snapshot = TopologySnapshot(topology, made, pod_usage=used)
        build = time.perf_counter() - started
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        memory = sum(s.size_diff for s in after.compare_to(before, "filename"))
        print(f"{size} nodes: build {build * 1000:.1f} ms, tree {memory / 1024:.0f} KiB")
        for label, gang in gangs.items():
            times = []
            result = None
            for _ in range(args.repeat):
                started = time.perf_counter()
                result = snapshot.find_assignment(gang)
                times.append(time.perf_counter() - started)
            times.sort()
            p50 = statistics.median(times) * 1000
            p99 = times[int(len(times) * 0.99) - 1] * 1000
            placed = "placed" if not isinstance(result, str) else f"not placed: {result}"
            print(f"  {label}: p50 {p50:.2f} ms, p99 {p99:.2f} ms ({placed})")


if __name__ == "__main__":
    main()
