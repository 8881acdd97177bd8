"""The backlog benchmark's admission-cycle figures: each cycle the manager times is kept with
the CPU time of the core's ``schedule`` it came from, and percentiles are read from them."""

from __future__ import annotations

from e2e.bench.backlog import CycleTimes, percentile_ms
from manager import core


def test_each_timed_cycle_keeps_its_wall_and_cpu_time() -> None:
    admission = core.AdmissionCore()
    metrics = CycleTimes()
    metrics.time_core(admission)

    result = admission.schedule(0.0)
    metrics.scheduling_cycle(admitted=0, seconds=0.002)

    assert result.evaluated == 0
    assert metrics.cycle_seconds == [0.002]
    assert len(metrics.cycle_cpu_seconds) == 1 and 0 <= metrics.cycle_cpu_seconds[0] < 0.002
    metrics.clear()
    assert metrics.cycle_seconds == [] and metrics.cycle_cpu_seconds == []


def test_percentiles_in_milliseconds() -> None:
    values = [i / 1000 for i in range(1, 101)]  # 1..100 ms
    assert percentile_ms(values, 0.5) == 51.0  # the nearest rank
    assert percentile_ms(values, 0.99) == 99.0
    assert percentile_ms(values, 1.0) == 100.0
    assert percentile_ms([], 0.99) == 0.0
