"""The scenarios of the scheduler benchmark, as data: Kueue's scheduler-performance
"baseline" and "large-scale" generators, reproduced from their published figures, with the
thresholds upstream checks them against.

Pure: no I/O. ``Scenario`` says what to create and at what pace; the ``*_object`` functions
build the API objects (plain dicts) the runner sends.

Shape (both variants): ``cohorts`` x ``queues_per_cohort`` ClusterQueues, each with one
flavor covering ``cpu`` (nominal quota, borrowing limit), preemption ``reclaimWithinCohort:
Any`` and ``withinClusterQueue: LowerPriority``; each ClusterQueue has its own namespace and
LocalQueue (all named after it). Per ClusterQueue, each workload class is a stream of
``count`` single-pod Workloads of ``cpu`` cpus, one created every ``interval_ms``; once
admitted, a workload "runs" for ``runtime_ms`` and the runner marks it Finished.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from manager.api import constants as C

FLAVOR = "bench"
CLASS_LABEL = "kfed.io/bench-class"
"""The workload class (small/medium/large) or ClusterQueue class (cq) of an object."""
RUNTIME_LABEL = "kfed.io/bench-runtime-ms"
"""How long an admitted workload "runs" before the runner marks it Finished."""
CQ_CLASS = "cq"

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class WorkloadClass:
    name: str
    count: int
    """Workloads of this class per ClusterQueue."""
    interval_ms: int
    """One is created every ``interval_ms`` in each ClusterQueue (the first after one interval)."""
    cpu: int
    runtime_ms: int
    priority: int

    def creation_offsets(self) -> list[float]:
        """Seconds after the start at which each workload of one stream is due."""
        return [(i + 1) * self.interval_ms / 1000 for i in range(self.count)]

    @property
    def generation_seconds(self) -> float:
        return self.count * self.interval_ms / 1000

    @property
    def cpu_seconds(self) -> float:
        """Work one stream offers: cpus x runtime, summed over its workloads."""
        return self.count * self.cpu * self.runtime_ms / 1000


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Upstream's pass criteria for a scenario (its rangespec)."""

    max_wall_seconds: float
    min_usage_percent: float
    max_avg_time_to_admission_seconds: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class QueueRef:
    name: str
    cohort: str


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    cohorts: int
    queues_per_cohort: int
    nominal_quota_cpu: int
    borrowing_limit_cpu: int
    classes: tuple[WorkloadClass, ...]
    thresholds: Thresholds

    @property
    def cluster_queue_count(self) -> int:
        return self.cohorts * self.queues_per_cohort

    @property
    def workloads_per_queue(self) -> int:
        return sum(c.count for c in self.classes)

    @property
    def workload_count(self) -> int:
        return self.cluster_queue_count * self.workloads_per_queue

    def count_of(self, class_name: str) -> int:
        return self.cluster_queue_count * self.workload_class(class_name).count

    def workload_class(self, name: str) -> WorkloadClass:
        for c in self.classes:
            if c.name == name:
                return c
        raise KeyError(f"no workload class {name!r} in {self.name}")

    @property
    def generation_seconds(self) -> float:
        """When the last workload is due: the slowest stream's length."""
        return max(c.generation_seconds for c in self.classes)

    @property
    def creation_rate(self) -> float:
        """Workloads due per second while every stream is still running (the peak rate)."""
        return self.cluster_queue_count * sum(1000 / c.interval_ms for c in self.classes)

    @property
    def offered_cpu_seconds_per_queue(self) -> float:
        return sum(c.cpu_seconds for c in self.classes)

    @property
    def min_drain_seconds(self) -> float:
        """A lower bound on the run: a cohort's work over its whole quota, used 100 %."""
        cohort_quota = self.queues_per_cohort * self.nominal_quota_cpu
        return self.queues_per_cohort * self.offered_cpu_seconds_per_queue / cohort_quota

    def queues(self) -> list[QueueRef]:
        return [
            QueueRef(f"cq-{c}-{q}", f"cohort-{c}")
            for c in range(self.cohorts)
            for q in range(self.queues_per_cohort)
        ]


BASELINE = Scenario(
    name="baseline",
    cohorts=5,
    queues_per_cohort=6,
    nominal_quota_cpu=20,
    borrowing_limit_cpu=100,
    classes=(
        WorkloadClass("small", count=350, interval_ms=100, cpu=1, runtime_ms=200, priority=50),
        WorkloadClass("medium", count=100, interval_ms=500, cpu=5, runtime_ms=500, priority=100),
        WorkloadClass("large", count=50, interval_ms=1200, cpu=20, runtime_ms=1000, priority=200),
    ),
    thresholds=Thresholds(
        max_wall_seconds=425.0,
        min_usage_percent=50.0,
        max_avg_time_to_admission_seconds={"large": 23.0, "medium": 90.0, "small": 260.0},
    ),
)

LARGE = Scenario(
    name="large",
    cohorts=10,
    queues_per_cohort=100,
    nominal_quota_cpu=20,
    borrowing_limit_cpu=100,
    classes=(
        WorkloadClass("small", count=35, interval_ms=60, cpu=1, runtime_ms=150, priority=50),
        WorkloadClass("medium", count=11, interval_ms=300, cpu=5, runtime_ms=350, priority=100),
        WorkloadClass("large", count=4, interval_ms=700, cpu=20, runtime_ms=700, priority=200),
    ),
    thresholds=Thresholds(
        max_wall_seconds=1416.0,
        min_usage_percent=31.6,
        max_avg_time_to_admission_seconds={"large": 128.0, "medium": 308.0, "small": 841.0},
    ),
)

SMOKE = Scenario(
    name="smoke",
    cohorts=1,
    queues_per_cohort=2,
    nominal_quota_cpu=20,
    borrowing_limit_cpu=100,
    classes=(
        WorkloadClass("small", count=40, interval_ms=100, cpu=1, runtime_ms=200, priority=50),
        WorkloadClass("medium", count=10, interval_ms=500, cpu=5, runtime_ms=500, priority=100),
        WorkloadClass("large", count=4, interval_ms=1200, cpu=20, runtime_ms=1000, priority=200),
    ),
    thresholds=BASELINE.thresholds,
)
"""Not upstream's: a few seconds' check that the benchmark itself works (baseline's limits)."""

SCENARIOS = {s.name: s for s in (BASELINE, LARGE, SMOKE)}


def scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise ValueError(
            f"unknown variant {name!r}; choose one of {', '.join(SCENARIOS)}"
        ) from None


# -- the objects ---------------------------------------------------------------------------


def flavor_object() -> Obj:
    return {
        "apiVersion": C.API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": FLAVOR},
        "spec": {},
    }


def cluster_queue_object(s: Scenario, queue: QueueRef) -> Obj:
    return {
        "apiVersion": C.API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": queue.name, "labels": {CLASS_LABEL: CQ_CLASS}},
        "spec": {
            "cohortName": queue.cohort,
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {
                            "name": FLAVOR,
                            "resources": [
                                {
                                    "name": "cpu",
                                    "nominalQuota": s.nominal_quota_cpu,
                                    "borrowingLimit": s.borrowing_limit_cpu,
                                }
                            ],
                        }
                    ],
                }
            ],
            "preemption": {
                "reclaimWithinCohort": "Any",
                "withinClusterQueue": "LowerPriority",
            },
        },
    }


def namespace_object(queue: QueueRef) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": queue.name}}


def local_queue_object(queue: QueueRef) -> Obj:
    return {
        "apiVersion": C.API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": queue.name, "namespace": queue.name},
        "spec": {"clusterQueue": queue.name},
    }


def workload_name(cls: WorkloadClass, index: int) -> str:
    # Zero-padded, so that name order (the last tie-breaker) is creation order.
    return f"{cls.name}-{index:05d}"


def workload_object(queue: QueueRef, cls: WorkloadClass, index: int) -> Obj:
    return {
        "apiVersion": C.API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": workload_name(cls, index),
            "namespace": queue.name,
            "labels": {CLASS_LABEL: cls.name, RUNTIME_LABEL: str(cls.runtime_ms)},
        },
        "spec": {
            "queueName": queue.name,
            "priority": cls.priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": str(cls.cpu)}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }
