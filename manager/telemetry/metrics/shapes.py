"""The shapes the upstream Kueue families share: upstream's bucket layouts, and a gauge for
the one name prometheus_client would refuse."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric


def kueue_buckets(count: int) -> tuple[float, ...]:
    """Upstream's ``generateExponentialBuckets(count)``: 1, then 2.5 doubling."""
    return (1.0, *(2.5 * 2**i for i in range(count - 1)))


# Buckets, in seconds.
KUEUE_BUCKETS_14 = kueue_buckets(14)
KUEUE_BUCKETS_16 = kueue_buckets(16)
"""``kueue_admission_wait_time_seconds`` has 16 (up to ~11 h); upstream's other waits 14."""
DEF_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""client_golang's ``DefBuckets``: upstream's admission attempt duration names none."""


class PlainGauge:
    """A labelled gauge for a name that prometheus_client's own would refuse: upstream has
    both ``kueue_finished_workloads`` (a gauge) and ``kueue_finished_workloads_total`` (a
    counter), and a client_python Counter claims its name without ``_total`` too. The
    exposition of the two is distinct (the counter's family is written ``..._total``)."""

    def __init__(
        self, name: str, documentation: str, labelnames: list[str], *, registry: CollectorRegistry
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._values: dict[tuple[str, ...], float] = {}
        registry.register(self)

    def describe(self) -> list[Metric]:
        return []  # nothing for the registry's duplicate check to refuse

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, value in sorted(self._values.items()):
            family.add_metric(list(labels), value)
        yield family

    def set(self, labels: tuple[str, ...], value: float) -> None:
        if len(labels) != len(self.labelnames):
            raise ValueError(f"{self.name}: {len(self.labelnames)} label values expected")
        self._values[labels] = value

    def clear(self) -> None:
        self._values.clear()
