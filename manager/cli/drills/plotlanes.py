"""The lanes of the drill's picture (plot.py) and its legend: the manager's view of the
broken cluster, then per worker where it could not be read and, per probe, its Workload copy
and its running pod there. matplotlib is imported only to draw."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from manager.cli.drills.intervals import Interval
from manager.cli.drills.plotdata import unreadable
from manager.cli.drills.plotstyle import (
    DOUBLE_RUN_COLOR,
    LANE_PAD,
    LEFT,
    LOST_COLOR,
    MANAGER_LANE,
    PROBE_COLORS,
    READABLE_COLOR,
    UNVERIFIED_COLOR,
    WIDTH,
)
from manager.cli.drills.report import DrillReport

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def _bars(
    ax: Axes,
    intervals: Sequence[Interval],
    y: float,
    height: float,
    min_width: float,
    **style: object,
) -> None:
    """Intervals as bars; one sample (no length) still shows, ``min_width`` wide."""
    if intervals:
        ranges = [(i.start, max(i.end - i.start, min_width)) for i in intervals]
        ax.broken_barh(ranges, (y, height), **style)  # type: ignore[arg-type]


def manager_lane(ax: Axes, report: DrillReport, xmin: float, xmax: float) -> None:
    ax.broken_barh([(xmin, xmax - xmin)], (0, MANAGER_LANE), facecolors=READABLE_COLOR)
    _bars(
        ax,
        report.timeline.lost,
        0.1,
        MANAGER_LANE - 0.2,
        report.interval,
        facecolors=LOST_COLOR,
        alpha=0.7,
    )


def worker_lane(
    ax: Axes,
    report: DrillReport,
    cluster: str,
    y: float,
    lane: float,
    probe_row: float,
    xmin: float,
    xmax: float,
) -> None:
    ax.broken_barh([(xmin, xmax - xmin)], (y, lane), facecolors=READABLE_COLOR)
    holes = unreadable(report, cluster)
    _bars(ax, holes, y, lane, 0.0, facecolors="white", linewidth=0.0)
    tl = report.timeline
    for i, probe in enumerate(report.probes):
        color = PROBE_COLORS[i % len(PROBE_COLORS)]
        row = y + LANE_PAD + i * probe_row
        bar = probe_row * 0.8
        copies = tl.copies.get(probe.probe, {}).get(cluster, [])
        running = report.running.get(probe.probe, {}).get(cluster, [])
        _bars(ax, copies, row, bar, report.interval, facecolors=color, alpha=0.25)
        _bars(ax, running, row + bar * 0.2, bar * 0.6, report.interval, facecolors=color)
        for spans, mark in (
            (probe.double_runs, DOUBLE_RUN_COLOR),
            (probe.unverified, UNVERIFIED_COLOR),
        ):
            mine = [s for s in spans if cluster in s.clusters]
            _bars(
                ax,
                mine,
                row - 0.02,
                bar + 0.04,
                report.interval,
                facecolors="none",
                edgecolors=mark,
                linewidth=1.5,
            )
        if probe_row >= 0.15:
            ax.text(
                xmin,
                row + bar / 2,
                f" p{i + 1}",
                fontsize=6.5,
                color="#555555",
                va="center",
                ha="left",
            )
    # Over the bars: a run bridged across a stretch the drill could not see is not a fact.
    _bars(
        ax,
        holes,
        y,
        lane,
        0.0,
        facecolors="none",
        edgecolors="#888888",
        hatch="///",
        linewidth=0.0,
        zorder=2,
    )


def legend_entries(report: DrillReport) -> list[tuple[str, dict[str, object]]]:
    """(label, patch style) for the legend."""
    entries: list[tuple[str, dict[str, object]]] = [
        ("pod Running there", {"facecolor": "#555555"}),
        ("Workload copy there", {"facecolor": "#555555", "alpha": 0.25}),
        (
            "the drill could not read it",
            {"facecolor": "white", "edgecolor": "#888888", "hatch": "///"},
        ),
        (f"manager reports {report.cluster} lost", {"facecolor": LOST_COLOR, "alpha": 0.7}),
    ]
    if report.double_run_count:
        entries.append(("double run", {"facecolor": "none", "edgecolor": DOUBLE_RUN_COLOR}))
    if any(p.unverified for p in report.probes):
        entries.append(("unverified", {"facecolor": "none", "edgecolor": UNVERIFIED_COLOR}))
    for i, probe in enumerate(report.probes[: len(PROBE_COLORS)]):
        entries.append((f"p{i + 1}: {probe.probe}", {"facecolor": PROBE_COLORS[i]}))
    return entries


def legend(fig: Figure, report: DrillReport, height: float) -> None:
    from matplotlib.patches import Patch

    handles = [Patch(label=label, **style) for label, style in legend_entries(report)]  # type: ignore[arg-type]
    fig.legend(
        handles=handles,
        loc="lower left",
        bbox_to_anchor=(LEFT / WIDTH, 0.05 / height),
        ncol=4,
        fontsize=8,
        frameon=False,
        handlelength=1.6,
        columnspacing=1.5,
    )
