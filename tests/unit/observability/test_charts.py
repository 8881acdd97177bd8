"""The dashboard's charts: the SVG drawing (valid, escaped, scaled), the history's series
(levels as sampled, counters per interval) and the window it keeps."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from hypothesis import given
from hypothesis import strategies as st

from manager.observability import charts
from manager.observability.history import CHARTS, History, Sample, counter_totals
from manager.telemetry.metrics import Metrics

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def texts(root: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


def test_a_chart_draws_a_line_per_series_with_its_name_in_the_legend() -> None:
    svg = charts.line_chart(
        "Pending workloads per ClusterQueue",
        {"gpu-cq": [(100.0, 1), (110.0, 3), (120.0, 2)], "cpu-cq": [(110.0, 7)]},
        now=120.0,
        window=60.0,
    )
    root = parse(svg)
    lines = root.findall(f"{SVG}polyline")
    assert len(lines) == 1 and len(lines[0].get("points", "").split()) == 3
    assert len(root.findall(f"{SVG}circle")) == 1  # a single point is a dot
    words = texts(root)
    assert "gpu-cq" in " ".join(words) and "cpu-cq" in " ".join(words)
    assert "10" in words  # the y axis goes up to a round 10 above the largest value 7
    assert "now" in words and "-60s" in words


def test_names_from_the_cluster_cannot_inject_markup() -> None:
    svg = charts.line_chart(
        "<b>x</b>", {'<script>alert("x")</script>': [(1.0, 1), (2.0, 2)]}, now=2.0, window=10.0
    )
    root = parse(svg)  # still well-formed XML
    assert root.find(f".//{SVG}script") is None
    assert "<script>" not in svg


def test_an_empty_chart_says_so() -> None:
    assert "no data yet" in texts(parse(charts.line_chart("t", {}, now=10.0, window=10.0)))


def test_points_older_than_the_window_are_left_out() -> None:
    svg = charts.line_chart(
        "t", {"old": [(0.0, 5)], "new": [(95.0, 1), (99.0, 2)]}, now=100.0, window=10.0
    )
    assert "old" not in " ".join(texts(parse(svg)))


def test_steps_hold_a_value_until_the_next_point() -> None:
    svg = charts.line_chart(
        "t", {"w": [(0.0, 0), (5.0, 2), (10.0, 0)]}, now=10.0, window=10.0, steps=True
    )
    points = parse(svg).findall(f"{SVG}polyline")[0].get("points", "").split()
    assert len(points) == 5  # each change drawn as a horizontal then a vertical segment


@given(st.floats(min_value=1e-6, max_value=1e9, allow_nan=False))
def test_the_y_axis_top_is_round_and_covers_the_largest_value(value: float) -> None:
    top = charts.nice_ceiling(value)
    assert top >= value
    assert top <= value * 2.5 * (1 + 1e-9) or top == 1.0


def sample(at: float, **kw: object) -> Sample:
    return Sample(at=at, **kw)  # type: ignore[arg-type]


def test_counters_are_charted_per_interval_and_levels_as_sampled() -> None:
    history = History(window=60, interval=1)
    history.add(
        sample(0, pending={"gpu-cq": 3}, dispatch_totals={"w1": (0.0, 0.0)}, failover_totals={})
    )
    history.add(
        sample(
            1, pending={"gpu-cq": 1}, dispatch_totals={"w1": (3.0, 2.0)}, failover_totals={"w1": 1}
        )
    )
    history.add(
        sample(
            2, pending={"gpu-cq": 0}, dispatch_totals={"w1": (3.0, 2.0)}, failover_totals={"w1": 1}
        )
    )
    series = history.to_json()["charts"]
    assert isinstance(series, dict)
    assert series["pending"]["series"] == {"gpu-cq": [[0, 3.0], [1, 1.0], [2, 0.0]]}
    # 2 dispatches taking 3 s in all between the first two samples; none after.
    assert series["dispatch-latency"]["series"] == {"w1": [[1, 1.5]]}
    assert series["failovers"]["series"] == {"w1": [[1, 1.0], [2, 0.0]]}
    for name in CHARTS:
        parse(history.chart(name, now=2.0))


def test_the_history_keeps_only_its_window() -> None:
    history = History(window=10, interval=1)
    for t in range(100):
        history.add(sample(float(t)))
    assert len(history.samples()) <= 12 and history.samples()[-1].at == 99.0


def test_counter_totals_are_read_from_the_process_metrics() -> None:
    metrics = Metrics()
    metrics.dispatch_done("worker-1", 2.0)
    metrics.dispatch_done("worker-1", 4.0)
    metrics.failover("worker-2", "lost")
    metrics.failover("worker-2", "drain")
    dispatch, failovers = counter_totals(metrics.registry)
    assert dispatch == {"worker-1": (6.0, 2.0)}
    assert failovers == {"worker-2": 2.0}
