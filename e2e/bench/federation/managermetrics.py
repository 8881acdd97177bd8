"""The manager's own account of a dispatch run, read from its ``/metrics``: a cross-check of
what the benchmark measured from outside, never the figure itself. Pure: Prometheus text in.

- ``multikueue_workloads_dispatched_total{cluster_queue,cluster}``: remote Workload copies created;
- ``kfed_remote_objects_created_total{cluster,kind}``: remote Workloads and Jobs created;
- ``kfed_dispatch_latency_seconds{cluster}``: from the manager's reservation to the copy
  admitted, as the manager timed it (a histogram: quantiles are estimated from its buckets
  as Prometheus' ``histogram_quantile`` does, so they are only as fine as the buckets).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

DISPATCHED = "multikueue_workloads_dispatched_total"
REMOTE_OBJECTS = "kfed_remote_objects_created_total"
LATENCY = "kfed_dispatch_latency_seconds"


@dataclass
class ManagerMetrics:
    dispatched: dict[str, float] = field(default_factory=dict)
    """cluster -> copies created."""
    remote_objects: dict[str, float] = field(default_factory=dict)
    """kind -> objects created on workers (all clusters)."""
    latency_count: float = 0.0
    latency_sum: float = 0.0
    latency_buckets: dict[float, float] = field(default_factory=dict)
    """upper bound -> cumulative count, summed over clusters."""
    present: set[str] = field(default_factory=set)
    """Which of the three metrics the manager exposes at all."""

    @property
    def latency_mean(self) -> float:
        return self.latency_sum / self.latency_count if self.latency_count else 0.0

    def latency_quantile(self, q: float) -> float:
        return histogram_quantile(q, self.latency_buckets)

    def to_json(self) -> dict[str, Any]:
        if not self.present:
            return {"available": False}
        return {
            "available": True,
            "workloads_dispatched": {k: int(v) for k, v in sorted(self.dispatched.items())},
            "workloads_dispatched_total": int(sum(self.dispatched.values())),
            "remote_objects_created": {k: int(v) for k, v in sorted(self.remote_objects.items())},
            "dispatch_latency_seconds": {
                "count": int(self.latency_count),
                "mean": round(self.latency_mean, 3),
                "p50_from_buckets": round(self.latency_quantile(0.5), 3),
                "p99_from_buckets": round(self.latency_quantile(0.99), 3),
            },
        }


def parse(text: str) -> ManagerMetrics:
    result = ManagerMetrics()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name, labels, value = sample.name, sample.labels, float(sample.value)
            if name == DISPATCHED:
                result.present.add(DISPATCHED)
                cluster = labels.get("cluster", "")
                result.dispatched[cluster] = result.dispatched.get(cluster, 0.0) + value
            elif name == REMOTE_OBJECTS:
                result.present.add(REMOTE_OBJECTS)
                kind = labels.get("kind", "")
                result.remote_objects[kind] = result.remote_objects.get(kind, 0.0) + value
            elif name == LATENCY + "_bucket":
                result.present.add(LATENCY)
                bound = float(labels["le"])
                result.latency_buckets[bound] = result.latency_buckets.get(bound, 0.0) + value
            elif name == LATENCY + "_count":
                result.latency_count += value
            elif name == LATENCY + "_sum":
                result.latency_sum += value
    return result


def histogram_quantile(
    q: float, buckets: dict[float, float] | Iterable[tuple[float, float]]
) -> float:
    """Prometheus' estimate: find the bucket holding rank ``q x total`` and interpolate
    linearly inside it (from 0 for the first bucket); in the +Inf bucket, the highest
    finite bound. 0.0 without observations."""
    ordered: list[tuple[float, float]] = sorted(
        buckets.items() if isinstance(buckets, dict) else buckets
    )
    if not ordered or ordered[-1][1] <= 0:
        return 0.0
    total = ordered[-1][1]
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in ordered:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (
                count - lower_count
            )
        lower_bound, lower_count = bound, count
    return lower_bound
