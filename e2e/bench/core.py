"""Benchmark of the pure admission core: decisions per second and per-decision latency.

    .venv/bin/python -m e2e.bench.core [--sizes 1000,10000,50000] [--output FILE]

The setup follows Kueue's scheduler performance test in shape (5 cohorts x 6
ClusterQueues, withinClusterQueue LowerPriority, reclaimWithinCohort Any, three
workload classes with priorities 50/100/200), with two GPU flavors. The benchmark plays
the controllers: admitted workloads run for a virtual duration and finish, preemption
victims are evicted at once with a backoff, and every admitted workload is replaced by
a new one, so the number of pending workloads stays at the target size throughout.

A *decision* is one head evaluated by a cycle: it ends in an admission, a preemption or
a pending verdict with a reason. Reported per size:

- decisions/s: decisions divided by the time spent inside ``schedule()``;
- per-decision latency: each cycle's duration divided by its decisions (amortised,
  includes all cycle overhead), p50/p99/max;
- nominate latency: the time to judge one head (flavors, quota, preemption), measured
  by wrapping the scheduler's per-head step, p50/p99/max: the worst single decision;
- cycle latency and controller-event latency (finish/evict/add, including requeues).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

from manager.core import (
    AdmissionCore,
    ClusterQueue,
    ClusterQueueName,
    ClusterQueuePreemption,
    CohortName,
    FlavorName,
    FlavorQuotas,
    LabelSelector,
    LocalQueue,
    Namespace,
    PodSet,
    PodSetName,
    PreemptionPolicy,
    QueueingStrategy,
    ResourceFlavor,
    ResourceGroup,
    ResourceName,
    ResourceQuota,
    Workload,
    WorkloadKey,
)

GI = 2**30
CPU, MEMORY, GPU = ResourceName("cpu"), ResourceName("memory"), ResourceName("nvidia.com/gpu")
FLAVORS = (FlavorName("a100"), FlavorName("h100"))
COHORTS = 5
QUEUES_PER_COHORT = 6
CYCLE_SECONDS = 0.05  # virtual time between two cycles
BACKOFF_SECONDS = 10.0


@dataclass(frozen=True)
class WorkloadClass:
    name: str
    priority: int
    gpus: int
    cpu_millis: int
    memory: int
    runtime: tuple[float, float]  # virtual seconds, uniform
    weight: int


CLASSES = (
    WorkloadClass("small", 50, 1, 4000, 16 * GI, (2.0, 8.0), 7),
    WorkloadClass("medium", 100, 2, 8000, 64 * GI, (4.0, 15.0), 2),
    WorkloadClass("large", 200, 4, 16000, 128 * GI, (8.0, 25.0), 1),
)


@dataclass
class Percentiles:
    p50: float
    p99: float
    max: float

    @classmethod
    def of(cls, samples: list[float]) -> Percentiles:
        if not samples:
            return cls(0.0, 0.0, 0.0)
        ordered = sorted(samples)
        return cls(
            p50=round(statistics.median(ordered), 2),
            p99=round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
            max=round(ordered[-1], 2),
        )


@dataclass
class SizeResult:
    pending_target: int
    cluster_queues: int
    cohorts: int
    flavors: int
    decisions: int
    admitted: int
    preempted: int
    pending_verdicts: int
    cycles: int
    schedule_seconds: float
    decisions_per_second: float
    per_decision_us: Percentiles
    nominate_us: Percentiles
    cycle_us: Percentiles
    event_us: Percentiles
    pending_min: int
    pending_max: int
    running_avg: float
    setup_seconds: float


@dataclass
class Simulation:
    """Plays the controllers around one AdmissionCore."""

    pending_target: int
    rng: random.Random
    core: AdmissionCore = field(default_factory=AdmissionCore)
    now: float = 0.0
    serial: int = 0
    running: dict[WorkloadKey, float] = field(default_factory=dict)  # key -> finish time
    pending: int = 0
    event_ns: list[int] = field(default_factory=list)

    def configure(self) -> None:
        for flavor in FLAVORS:
            self.core.upsert_flavor(ResourceFlavor(flavor, {"gpu.model": str(flavor)}))
        for c in range(COHORTS):
            for q in range(QUEUES_PER_COHORT):
                index = c * QUEUES_PER_COHORT + q
                name = ClusterQueueName(f"cq-{index}")
                self.core.upsert_cluster_queue(
                    ClusterQueue(
                        name=name,
                        cohort=CohortName(f"cohort-{c}"),
                        namespace_selector=LabelSelector(),
                        queueing_strategy=(
                            QueueingStrategy.STRICT_FIFO
                            if q == 0
                            else QueueingStrategy.BEST_EFFORT_FIFO
                        ),
                        resource_groups=(
                            ResourceGroup(
                                (CPU, MEMORY, GPU),
                                tuple(
                                    FlavorQuotas(
                                        flavor,
                                        (
                                            ResourceQuota(CPU, 64_000, borrowing_limit=64_000),
                                            ResourceQuota(
                                                MEMORY, 512 * GI, borrowing_limit=512 * GI
                                            ),
                                            ResourceQuota(GPU, 8, borrowing_limit=8),
                                        ),
                                    )
                                    for flavor in FLAVORS
                                ),
                            ),
                        ),
                        preemption=ClusterQueuePreemption(
                            within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY,
                            reclaim_within_cohort=PreemptionPolicy.ANY,
                        ),
                    )
                )
                self.core.upsert_local_queue(LocalQueue(Namespace(f"team-{index}"), "jobs", name))

    def new_workload(self) -> None:
        self.serial += 1
        cls = self.rng.choices(CLASSES, weights=[c.weight for c in CLASSES])[0]
        team = self.rng.randrange(COHORTS * QUEUES_PER_COHORT)
        selector = self.rng.choice(({}, {}, {"gpu.model": "a100"}, {"gpu.model": "h100"}))
        workload = Workload(
            key=WorkloadKey(f"team-{team}/{cls.name}-{self.serial}"),
            queue_name="jobs",
            pod_sets=(
                PodSet(
                    PodSetName("main"),
                    1,
                    {CPU: cls.cpu_millis, MEMORY: cls.memory, GPU: cls.gpus},
                    node_selector=selector,
                ),
            ),
            priority=cls.priority,
            creation_time=self.now,
            uid=f"uid-{self.serial}",
        )
        self._timed(partial(self.core.add_workload, workload))
        self.pending += 1

    def _timed(self, call: Callable[[], object]) -> None:
        start = time.perf_counter_ns()
        call()
        self.event_ns.append(time.perf_counter_ns() - start)

    def finish_due(self) -> None:
        for key in [k for k, at in self.running.items() if at <= self.now]:
            del self.running[key]
            self._timed(partial(self.core.finish, key))

    def runtime_of(self, key: WorkloadKey) -> float:
        name = key.split("/", 1)[1].rsplit("-", 1)[0]
        cls = next(c for c in CLASSES if c.name == name)
        return self.rng.uniform(*cls.runtime)


T = TypeVar("T")


def _instrument_nominate(core: AdmissionCore, samples: list[float]) -> None:
    """Time the scheduler's per-head step (benchmark-only instrumentation)."""
    scheduler = core._scheduler
    original = scheduler._nominate

    def timed(head: T) -> object:
        start = time.perf_counter_ns()
        result = original(head)  # type: ignore[arg-type]
        samples.append((time.perf_counter_ns() - start) / 1000)
        return result

    scheduler._nominate = timed  # type: ignore[assignment,method-assign]


def decisions_digest(pending_target: int, *, cycles: int, seed: int) -> str:
    """SHA-256 of every decision of a simulated run: equal across processes and hash seeds."""
    sim = Simulation(pending_target, random.Random(seed))
    sim.configure()
    for _ in range(pending_target):
        sim.new_workload()
    digest = hashlib.sha256()
    for _ in range(cycles):
        sim.now += CYCLE_SECONDS
        sim.finish_due()
        result = sim.core.schedule(sim.now)
        digest.update(repr(result).encode())
        for admit in result.admitted:
            sim.running[admit.workload] = sim.now + sim.runtime_of(admit.workload)
            sim.core.confirm(admit.workload)
            sim.new_workload()
        for preempt in result.preempted:
            for victim in preempt.victims:
                sim.running.pop(victim.workload, None)
                sim.core.evict(victim.workload, now=sim.now, requeue_at=sim.now + BACKOFF_SECONDS)
    return digest.hexdigest()


def run_size(pending_target: int, *, decisions: int, seed: int) -> SizeResult:
    sim = Simulation(pending_target, random.Random(seed))
    setup_start = time.perf_counter()
    sim.configure()
    for _ in range(pending_target):
        sim.new_workload()
    setup_seconds = time.perf_counter() - setup_start
    sim.event_ns.clear()

    nominate_us: list[float] = []
    _instrument_nominate(sim.core, nominate_us)
    per_decision_us: list[float] = []
    cycle_us: list[float] = []
    done = admitted = preempted = preemptors = cycles = 0
    schedule_ns = 0
    running_samples: list[int] = []
    pending_seen: list[int] = []
    while done < decisions:
        sim.now += CYCLE_SECONDS
        sim.finish_due()
        start = time.perf_counter_ns()
        result = sim.core.schedule(sim.now)
        elapsed = time.perf_counter_ns() - start
        schedule_ns += elapsed
        cycles += 1
        if result.evaluated:
            share = elapsed / result.evaluated / 1000
            per_decision_us.extend([share] * result.evaluated)
            cycle_us.append(elapsed / 1000)
        done += result.evaluated
        admitted += len(result.admitted)
        for admit in result.admitted:
            sim.running[admit.workload] = sim.now + sim.runtime_of(admit.workload)
            sim.core.confirm(admit.workload)
            sim.pending -= 1
            sim.new_workload()
        preemptors += len(result.preempted)
        for preempt in result.preempted:
            for victim in preempt.victims:
                preempted += 1
                sim.running.pop(victim.workload, None)
                sim._timed(
                    partial(
                        sim.core.evict,
                        victim.workload,
                        now=sim.now,
                        requeue_at=sim.now + BACKOFF_SECONDS,
                    )
                )
                sim.pending += 1
        running_samples.append(len(sim.running))
        pending_seen.append(sim.pending)
    seconds = schedule_ns / 1e9
    return SizeResult(
        pending_target=pending_target,
        cluster_queues=COHORTS * QUEUES_PER_COHORT,
        cohorts=COHORTS,
        flavors=len(FLAVORS),
        decisions=done,
        admitted=admitted,
        preempted=preempted,
        pending_verdicts=done - admitted - preemptors,
        cycles=cycles,
        schedule_seconds=round(seconds, 3),
        decisions_per_second=round(done / seconds) if seconds else 0.0,
        per_decision_us=Percentiles.of(per_decision_us),
        nominate_us=Percentiles.of(nominate_us),
        cycle_us=Percentiles.of(cycle_us),
        event_us=Percentiles.of([ns / 1000 for ns in sim.event_ns]),
        pending_min=min(pending_seen),
        pending_max=max(pending_seen),
        running_avg=round(sum(running_samples) / len(running_samples), 1),
        setup_seconds=round(setup_seconds, 2),
    )


def render_table(results: list[SizeResult]) -> str:
    columns: tuple[tuple[str, int, Callable[[SizeResult], str]], ...] = (
        ("pending", 8, lambda r: f"{r.pending_target}"),
        ("decisions", 9, lambda r: f"{r.decisions}"),
        ("admit", 6, lambda r: f"{r.admitted}"),
        ("preempt", 7, lambda r: f"{r.preempted}"),
        ("dec/s", 8, lambda r: f"{r.decisions_per_second:.0f}"),
        ("p50 us", 7, lambda r: f"{r.per_decision_us.p50:.1f}"),
        ("p99 us", 7, lambda r: f"{r.per_decision_us.p99:.1f}"),
        ("nom p99", 8, lambda r: f"{r.nominate_us.p99:.1f}"),
        ("nom max", 8, lambda r: f"{r.nominate_us.max:.1f}"),
        ("cycle p99", 9, lambda r: f"{r.cycle_us.p99:.1f}"),
        ("event p99", 9, lambda r: f"{r.event_us.p99:.1f}"),
    )
    header = " ".join(f"{name:>{width}}" for name, width, _ in columns)
    lines = [header, "-" * len(header)]
    for result in results:
        lines.append(" ".join(f"{cell(result):>{width}}" for _, width, cell in columns))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000,50000", help="pending workload counts")
    parser.add_argument("--decisions", type=int, default=30_000, help="decisions measured per size")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--output", type=Path, default=Path("artifacts/bench-core.json"))
    args = parser.parse_args(argv)

    sizes = [int(s) for s in args.sizes.split(",") if s]
    results = [run_size(size, decisions=args.decisions, seed=args.seed) for size in sizes]
    report = {
        "benchmark": "admission-core",
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "seed": args.seed,
        "decisions_per_size": args.decisions,
        "results": [asdict(r) for r in results],
    }
    print(render_table(results))
    text = json.dumps(report, indent=2)
    print(text)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
