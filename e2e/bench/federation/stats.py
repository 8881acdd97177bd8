"""Summaries of measured durations: percentiles by linear interpolation between the two
closest ranks (numpy's default), so that p50 of [1, 2] is 1.5 and p99 of a short run still
moves with its worst samples. Pure."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass


def percentile(values: Iterable[float], share: float) -> float:
    """The ``share`` (0..1) quantile of ``values``; 0.0 when there are none."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share must be within 0..1, got {share}")
    ordered = sorted(values)
    if not ordered:
        return 0.0
    position = share * (len(ordered) - 1)
    below, above = math.floor(position), math.ceil(position)
    weight = position - below
    return ordered[below] + (ordered[above] - ordered[below]) * weight


@dataclass(frozen=True, slots=True)
class Summary:
    """Count, mean and the quantiles a reader asks for first, of one kind of duration."""

    count: int
    mean: float
    p50: float
    p99: float
    max: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Summary:
        samples = list(values)
        if not samples:
            return cls(0, 0.0, 0.0, 0.0, 0.0)
        return cls(
            count=len(samples),
            mean=statistics.fmean(samples),
            p50=percentile(samples, 0.5),
            p99=percentile(samples, 0.99),
            max=max(samples),
        )

    def rounded(self, digits: int = 3) -> dict[str, float | int]:
        return {
            "count": self.count,
            "mean": round(self.mean, digits),
            "p50": round(self.p50, digits),
            "p99": round(self.p99, digits),
            "max": round(self.max, digits),
        }
