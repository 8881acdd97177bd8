"""Replay upstream's scheduler-performance trace through kfed's admission core, in process.

    .venv/bin/python -m e2e.bench.scheduler.replay [--json FILE] [--variants NAMES]

No API server, no runner, no controller process: the baseline generator's trace (5 cohorts x
6 ClusterQueues, nominal 20 cpu, borrowingLimit 100, reclaimWithinCohort Any,
withinClusterQueue LowerPriority; per queue 350 small / 100 medium / 50 large workloads, one
every 100 / 500 / 1,200 ms, running 200 / 500 / 1,000 ms at priorities 50 / 100 / 200) is
played on a simulated clock against ``AdmissionCore``, and every eviction is counted by the
victim's class, the preemptor's class and the reason. The controllers and the runner are
modelled by a few latencies (``Model``):

- ``pace``: the generation's stretch (upstream plans 60 s; under the runner it took 85-88 s);
- ``admit_s``: from kfed's decision to the runner seeing the workload ``Admitted``;
- ``runner_write_s``: upstream's runner finishes workloads with one reconciler worker: each
  ``Finished`` write takes this long, one after the other (0: an ideal runner). While the
  writes queue, the finished workloads keep their quota;
- ``release_s``: from a preemption to the victim's quota being freed (kfed releases it);
- ``cycle_s``: the least time between two scheduling cycles;
- ``requeue_batch_s``: upstream v0.19.2 returns a cohort's parked (inadmissible) workloads to
  their queues at most once per ``requeueBatchPeriod`` (1 s), not at every release as kfed
  does; a queue whose head waits for its victims is woken at once (upstream requeues such a
  "sticky" preemptor immediately);
- ``reservation_seconds_granularity``: upstream orders preemption candidates by the
  QuotaReserved condition's lastTransitionTime, which the API keeps to the second, then by
  UID; kfed by the exact reservation time.

Deterministic: the same model gives the same counts.
"""

from __future__ import annotations

import argparse
import heapq
import json
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from e2e.bench.scheduler.generator import BASELINE, Scenario
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

CPU = ResourceName("cpu")
FLAVOR = FlavorName("rf")


@dataclass(frozen=True, slots=True)
class Model:
    pace: float = 1.0
    admit_s: float = 0.0
    runner_write_s: float = 0.0
    release_s: float = 0.0
    cycle_s: float = 0.001
    requeue_batch_s: float = 0.0
    reservation_seconds_granularity: bool = False


RECORDED = Model(pace=88 / 60, admit_s=0.3, runner_write_s=0.014, release_s=2.0, cycle_s=0.014)
"""kfed's run under upstream's v0.19.2 runner (2026-12-06), roughly: the generation stretched
to 88 s; an admission seen by the runner 0.3 s after the decision; the runner's one worker
finishing ~70 workloads/s (14 ms a write: the drain phase's rate, which the run's 8.5 s
between a small's admission and its finish implies with ~600 cpu of smalls held); a victim's
quota freed 2 s after its preemption (kfed's Evicted write, its event, the release write and
its event, on an API server at 1.3 cores); ~70 cycles/s (19,000 cycles in ~270 s)."""

VARIANTS: dict[str, Model] = {
    # kfed's rules and no latency at all: only the trace and the scheduler.
    "ideal": Model(),
    # the same with upstream v0.19.2's queueing and ordering rules switched on.
    "ideal+upstream-rules": Model(requeue_batch_s=1.0, reservation_seconds_granularity=True),
    "recorded": RECORDED,
    "recorded+requeue-batch": replace(RECORDED, requeue_batch_s=1.0),
    "recorded+coarse-order": replace(RECORDED, reservation_seconds_granularity=True),
    "recorded+upstream-rules": replace(
        RECORDED, requeue_batch_s=1.0, reservation_seconds_granularity=True
    ),
    # kfed's rules, a scheduler that decides less often (one cycle every 0.2 s): fewer
    # workloads admitted while the generator still creates higher-priority ones.
    "recorded-slow-scheduler": replace(RECORDED, cycle_s=0.2),
    "recorded-slower-scheduler": replace(RECORDED, cycle_s=0.5),
    # kfed's rules, a victim's quota freed after 0.05 s instead of 2 s.
    "recorded-fast-release": replace(RECORDED, release_s=0.05),
    # kfed's rules, a runner that keeps up (2 ms a write): holds are runtimes again.
    "recorded-fast-runner": replace(RECORDED, runner_write_s=0.002),
}


@dataclass
class Counts:
    admitted: Counter[str] = field(default_factory=Counter)
    evicted: Counter[str] = field(default_factory=Counter)
    """By the victim's class."""
    by_pair: Counter[str] = field(default_factory=Counter)
    """``preemptor class -> victim class``."""
    by_reason: Counter[str] = field(default_factory=Counter)
    preemptions: int = 0
    """Preempt decisions (one preemptor, one or more victims)."""
    cycles: int = 0
    wall: float = 0.0
    held_cpu_seconds: float = 0.0
    admission_wait: dict[str, float] = field(default_factory=dict)
    """Average seconds from creation to the last admission, by class."""
    by_phase: Counter[str] = field(default_factory=Counter)
    """Evictions while the generator runs (``generating``) and after (``draining``)."""
    admitted_by_phase: Counter[str] = field(default_factory=Counter)
    held_while_generating: dict[str, float] = field(default_factory=dict)
    """Cpu-seconds each class held quota while the generator ran: what a higher-priority
    arrival could find to reclaim."""
    """Admissions by class and phase (``small/generating``, ...)."""


def class_of(key: str) -> str:
    return key.split("/", 1)[1].split("-", 1)[0]


class Replay:
    """One run of the trace through one AdmissionCore under one Model."""

    def __init__(self, scenario: Scenario, model: Model) -> None:
        self.scenario = scenario
        self.model = model
        self.core = AdmissionCore()
        self.now = 0.0
        self.seq = 0
        self.events: list[tuple[float, int, str, str]] = []
        self.counts = Counts()
        self.runtime = {c.name: c.runtime_ms / 1000 for c in scenario.classes}
        self.created: dict[str, float] = {}
        self.last_admitted: dict[str, float] = {}
        self.admitted_at: dict[str, float] = {}
        self.running: dict[str, int] = {}
        """Admitted workloads whose finish is scheduled, by the admission's serial."""
        self.serial = 0
        self.runner_free_at = 0.0
        self.generation_end = 0.0
        self.batch_due: dict[str, float] = {}
        self.pending_wakes: set[ClusterQueueName] = set()
        self._configure()
        if model.requeue_batch_s > 0:
            self._batch_wakes()
        if model.reservation_seconds_granularity:
            self._coarse_reservation_times()

    # -- setup -----------------------------------------------------------------------

    def _configure(self) -> None:
        s = self.scenario
        self.core.upsert_flavor(ResourceFlavor(FLAVOR, {}))
        for c in range(s.cohorts):
            for q in range(s.queues_per_cohort):
                name = ClusterQueueName(f"cq-{q}-cohort-{c}")
                self.core.upsert_cluster_queue(
                    ClusterQueue(
                        name=name,
                        cohort=CohortName(f"cohort-{c}"),
                        namespace_selector=LabelSelector(),
                        queueing_strategy=QueueingStrategy.BEST_EFFORT_FIFO,
                        resource_groups=(
                            ResourceGroup(
                                (CPU,),
                                (
                                    FlavorQuotas(
                                        FLAVOR,
                                        (
                                            ResourceQuota(
                                                CPU,
                                                s.nominal_quota_cpu * 1000,
                                                borrowing_limit=s.borrowing_limit_cpu * 1000,
                                            ),
                                        ),
                                    ),
                                ),
                            ),
                        ),
                        preemption=ClusterQueuePreemption(
                            within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY,
                            reclaim_within_cohort=PreemptionPolicy.ANY,
                        ),
                    )
                )
                self.core.upsert_local_queue(LocalQueue(Namespace(name), name, name))
                for wclass in s.classes:
                    for i, offset in enumerate(wclass.creation_offsets()):
                        at = offset * self.model.pace
                        self.generation_end = max(self.generation_end, at)
                        self._at(at, "arrive", f"{name}/{wclass.name}-{i}")

    def _batch_wakes(self) -> None:
        """Upstream's inadmissible requeue: at most once per batch period per cohort tree,
        except for a queue whose head waits for its victims (requeued at once upstream)."""
        queues = self.core._queues
        original = queues.wake
        cache = self.core._cache

        def deferred(names: list[ClusterQueueName]) -> None:
            now_names = [
                n for n in names if n in queues.queues and queues.queues[n].preempting_head
            ]
            if now_names:
                original(now_names)
            for name in names:
                if name in now_names or name not in cache.cluster_queues:
                    continue
                root = str(id(cache.cluster_queues[name].root()))
                if root not in self.batch_due:
                    self.batch_due[root] = self.now + self.model.requeue_batch_s
                    self._at(self.batch_due[root], "wake", root)
                self.pending_wakes.add(name)

        def flush(root: str) -> None:
            del self.batch_due[root]
            names = [
                n
                for n in self.pending_wakes
                if n in cache.cluster_queues and str(id(cache.cluster_queues[n].root())) == root
            ]
            self.pending_wakes.difference_update(names)
            original(sorted(names))

        queues.wake = deferred  # type: ignore[method-assign]
        self._flush = flush

    def _coarse_reservation_times(self) -> None:
        """Reservation times as the API keeps them: whole seconds (ties go to the key, as
        upstream's go to the UID)."""
        cache = self.core._cache
        original = cache.reserve

        def reserve(*args: Any, **kwargs: Any) -> Any:
            kwargs["reserved_at"] = float(int(kwargs["reserved_at"]))
            return original(*args, **kwargs)

        cache.reserve = reserve  # type: ignore[method-assign]

    def _at(self, at: float, kind: str, key: str) -> None:
        self.seq += 1
        heapq.heappush(self.events, (at, self.seq, kind, key))

    # -- the run -----------------------------------------------------------------------

    def run(self) -> Counts:
        next_cycle = 0.0
        dirty = False
        while self.events or dirty:
            if dirty and (not self.events or self.events[0][0] >= next_cycle):
                self.now = max(self.now, next_cycle)
                dirty = self._cycle()
                next_cycle = self.now + self.model.cycle_s
                continue
            at, _, kind, key = heapq.heappop(self.events)
            self.now = max(self.now, at)
            dirty = self._event(kind, key) or dirty
        self.counts.wall = round(self.now, 3)
        waits: dict[str, list[float]] = {}
        for key, created in self.created.items():
            waits.setdefault(class_of(key), []).append(self.last_admitted[key] - created)
        self.counts.admission_wait = {
            c: round(sum(v) / len(v), 2) for c, v in sorted(waits.items())
        }
        self.counts.held_cpu_seconds = round(self.counts.held_cpu_seconds, 1)
        return self.counts

    def _event(self, kind: str, key: str) -> bool:
        wkey = WorkloadKey(key)
        if kind == "arrive":
            self.created[key] = self.now
            cls = self.scenario.workload_class(class_of(key))
            namespace = key.split("/", 1)[0]
            self.core.add_workload(
                Workload(
                    key=wkey,
                    queue_name=namespace,
                    pod_sets=(PodSet(PodSetName("main"), 1, {CPU: cls.cpu * 1000}),),
                    priority=cls.priority,
                    creation_time=self.now,
                    uid=key,
                )
            )
            return True
        if kind == "wake":
            self._flush(key)
            return True
        if kind == "runtime-over":
            serial = int(key.rsplit("#", 1)[1])
            wkey = WorkloadKey(key.rsplit("#", 1)[0])
            if self.running.get(wkey) != serial:
                return False  # evicted meanwhile: the runner drops it
            # The runner's single worker writes Finished once it is free.
            start = max(self.now, self.runner_free_at)
            self.runner_free_at = start + self.model.runner_write_s
            self._at(self.runner_free_at, "finished", key)
            return False
        if kind == "finished":
            serial = int(key.rsplit("#", 1)[1])
            wkey = WorkloadKey(key.rsplit("#", 1)[0])
            if self.running.get(wkey) != serial:
                return False
            del self.running[wkey]
            self._release_held(wkey)
            self.core.finish(wkey)
            return True
        if kind == "release":
            self._release_held(wkey)
            self.core.evict(wkey, now=self.now)
            return True
        if kind == "visible":
            serial = int(key.rsplit("#", 1)[1])
            wkey = WorkloadKey(key.rsplit("#", 1)[0])
            if self.running.get(wkey) == serial:
                self._at(self.now + self.runtime[class_of(wkey)], "runtime-over", key)
            return False
        raise ValueError(kind)

    def _release_held(self, key: WorkloadKey) -> None:
        since = self.admitted_at.pop(key, None)
        if since is not None:
            cpu = self.scenario.workload_class(class_of(key)).cpu
            self.counts.held_cpu_seconds += cpu * (self.now - since)
            overlap = min(self.now, self.generation_end) - since
            if overlap > 0:
                held = self.counts.held_while_generating
                held[class_of(key)] = held.get(class_of(key), 0.0) + cpu * overlap

    def _cycle(self) -> bool:
        result = self.core.schedule(self.now)
        self.counts.cycles += 1
        for admit in result.admitted:
            key = admit.workload
            self.core.confirm(key)
            self.core.set_admitted(key)
            self.serial += 1
            self.running[key] = self.serial
            self.admitted_at[key] = self.now
            self.last_admitted[key] = self.now
            self.counts.admitted[class_of(key)] += 1
            phase = "generating" if self.now <= self.generation_end else "draining"
            self.counts.admitted_by_phase[f"{class_of(key)}/{phase}"] += 1
            self._at(self.now + self.model.admit_s, "visible", f"{key}#{self.serial}")
        for preempt in result.preempted:
            self.counts.preemptions += 1
            for victim in preempt.victims:
                vclass = class_of(victim.workload)
                self.counts.evicted[vclass] += 1
                self.counts.by_pair[f"{class_of(preempt.preemptor)}->{vclass}"] += 1
                self.counts.by_reason[str(victim.reason)] += 1
                phase = "generating" if self.now <= self.generation_end else "draining"
                self.counts.by_phase[phase] += 1
                self.running.pop(victim.workload, None)
                self._at(self.now + self.model.release_s, "release", victim.workload)
        return bool(result.more or result.admitted or result.preempted)


def replay(model: Model, scenario: Scenario = BASELINE) -> dict[str, Any]:
    started = time.perf_counter()
    counts = Replay(scenario, model).run()
    report: dict[str, Any] = {"model": asdict(model)}
    report.update(
        evictions_total=sum(counts.evicted.values()),
        evictions_by_victim_class=dict(sorted(counts.evicted.items())),
        evictions_by_preemptor_and_victim=dict(sorted(counts.by_pair.items())),
        evictions_by_reason=dict(sorted(counts.by_reason.items())),
        evictions_by_phase=dict(sorted(counts.by_phase.items())),
        preemptions=counts.preemptions,
        admissions=dict(sorted(counts.admitted.items())),
        admissions_by_phase=dict(sorted(counts.admitted_by_phase.items())),
        cpu_seconds_held_while_generating={
            c: round(v, 1) for c, v in sorted(counts.held_while_generating.items())
        },
        avg_time_to_admission_s=counts.admission_wait,
        wall_s=counts.wall,
        held_cpu_seconds=counts.held_cpu_seconds,
        usage_percent=round(
            100
            * counts.held_cpu_seconds
            / (scenario.cluster_queue_count * scenario.nominal_quota_cpu * max(counts.wall, 1e-9)),
            1,
        ),
        cycles=counts.cycles,
        replay_cpu_seconds=round(time.perf_counter() - started, 1),
    )
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated")
    parser.add_argument("--json", type=Path, help="write the reports here")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a Model field in every variant (e.g. release_s=1.0)",
    )
    args = parser.parse_args(argv)
    reports: dict[str, Any] = {}
    for name in args.variants.split(","):
        model = VARIANTS[name]
        for item in args.set:
            field_name, value = item.split("=", 1)
            current = getattr(model, field_name)
            typed: object = (
                value.lower() in ("1", "true", "yes") if isinstance(current, bool) else float(value)
            )
            fields: dict[str, Any] = {field_name: typed}
            model = replace(model, **fields)
        reports[name] = replay(model)
        r = reports[name]
        print(
            f"{name:28s} evictions {r['evictions_total']:4d} "
            f"(small {r['evictions_by_victim_class'].get('small', 0)}, "
            f"medium {r['evictions_by_victim_class'].get('medium', 0)}, "
            f"large {r['evictions_by_victim_class'].get('large', 0)}) "
            f"pairs {r['evictions_by_preemptor_and_victim']} "
            f"phase {r['evictions_by_phase']} wall {r['wall_s']} s usage {r['usage_percent']} % "
            f"wait {r['avg_time_to_admission_s']} admitted {r['admissions_by_phase']}",
            flush=True,
        )
    if args.json is not None:
        args.json.write_text(json.dumps({"benchmark": "scheduler-replay", **reports}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
