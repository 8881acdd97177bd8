"""The drill's timeline as a picture (``kfed drill ... --plot FILE.png|svg``).

It draws what the report holds, nothing more: plain data in, a file out, no Kubernetes. One
lane for the manager's view of the broken cluster (when it reported it lost), then one lane
per worker as the drill read it directly: where it could not be read (hatched), and per
probe when a Workload copy of it was there (pale) and when its pod ran there (solid). The
moments of the drill are vertical lines labelled with their time since the break: the cut,
detection, fencing, eviction, re-dispatch, running elsewhere (or resumed), the restore, the
cluster Active again and the finish; phase times are the medians over the probes, as in the
report's phases table. The title names the drill and its headline figures.

matplotlib is an optional dependency (the ``plot`` extra): it is imported only to draw, so
``kfed`` works without it and ``unavailable()`` says why a picture cannot be drawn. It draws
with the Agg canvas (no display needed); ``.svg`` keeps its text as text.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from manager.cli.drills.intervals import Interval
from manager.cli.drills.report import DrillReport, fmt

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FORMATS = {".png": "png", ".svg": "svg"}
INSTALL_HINT = "pip install 'kfed[plot]'"

BREAK_NAMES = {"partition": "cut", "outage": "outage", "maintenance": "drain"}
STOP_NAMES = {"partition": "fenced", "outage": "fenced", "maintenance": "stopped"}

# Sizes in inches: the lanes' y axis counts in inches too, so the layout is plain sums.
WIDTH = 11.0
LEFT = 1.6
RIGHT = 0.3
TITLE = 0.8
LABEL_ROW = 0.2
MANAGER_LANE = 0.45
LANE_PAD = 0.12
PROBE_ROW = 0.22
PROBE_ROWS_MAX = 2.6
"""A worker lane's probe rows together at most: 50 probes get thin rows, not a tall page."""
AXIS = 0.45
LEGEND_ROW = 0.22

PROBE_COLORS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#7f7f7f",
    "#aec7e8",
)
LOST_COLOR = "#d62728"
READABLE_COLOR = "#f3f5f7"
DOUBLE_RUN_COLOR = "#d62728"
UNVERIFIED_COLOR = "#ff9f1c"


@dataclass(frozen=True, slots=True)
class Event:
    """A moment of the drill, drawn as a vertical line with its label."""

    at: float
    """Seconds since the break."""
    name: str
    color: str

    @property
    def label(self) -> str:
        return f"{self.name} {'0s' if self.at == 0 else fmt(self.at)}"


def plot_format(path: Path) -> str | None:
    """The picture's format by the file name's suffix ("png", "svg"; None: neither)."""
    return FORMATS.get(path.suffix.lower())


def unavailable() -> str | None:
    """Why this kfed cannot draw (None: it can)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as missing:
        return f"--plot needs matplotlib, which is not installed ({missing}): {INSTALL_HINT}"
    return None


# -- what to draw (pure) ---------------------------------------------------------------------


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def events(report: DrillReport) -> list[Event]:
    """The drill's moments, in time order; a phase no probe reached is left out."""
    target = report.cluster
    phases = {p.phase: p.p50 for p in report.phases}
    found: list[tuple[float | None, str, str]] = [
        (0.0, BREAK_NAMES.get(report.kind, "break"), "#000000"),
        (phases.get("detection"), "detected", "#9467bd"),
        (phases.get("stopped"), f"{STOP_NAMES.get(report.kind, 'stopped')} on {target}", "#8c564b"),
        (phases.get("eviction"), "evicted", "#e377c2"),
        (phases.get("re-dispatch"), "re-dispatched", "#17becf"),
        (phases.get("running elsewhere"), "running elsewhere", "#2ca02c"),
        (_median([p.resumed for p in report.probes]), f"resumed on {target}", "#2ca02c"),
    ]
    r = report.restoration
    if r.restored_at is not None:
        found.append((r.restored_at, "restored", "#1f77b4"))
        if r.active_again_after is not None:
            found.append((r.restored_at + r.active_again_after, "Active again", "#1f77b4"))
    found.append((report.timeline.end, "finish", "#555555"))
    result = [Event(at, name, color) for at, name, color in found if at is not None]
    return sorted(result, key=lambda e: e.at)


def headline(report: DrillReport) -> tuple[str, str]:
    """The title (the drill, its run, its verdict) and the line of headline figures."""
    verdict = "PASS" if report.exit_code == 0 else f"FAIL (exit {report.exit_code})"
    title = (
        f"kfed drill {report.kind} of {report.cluster} — run {report.run_id}, "
        f"{report.started_at[:19].replace('T', ' ')} UTC — {verdict}"
    )
    phases = {p.phase: p for p in report.phases}
    n = len(report.probes)
    detection, elsewhere = phases["detection"], phases["running elsewhere"]
    figures = [
        f"detection {fmt(detection.p50)}",
        f"running elsewhere {fmt(elsewhere.p50)} (p50; max {fmt(elsewhere.max)})",
        f"moved {report.moved_count}/{n}",
        f"resumed {report.resumed_count}/{n}",
        f"double runs {report.double_run_count} in {report.samples} samples "
        f"(every {report.interval:g}s)",
    ]
    return title, " · ".join(figures)


def workers(report: DrillReport) -> list[str]:
    """The workers' lanes, the broken one first."""
    others = sorted(c for c in report.timeline.readable if c != report.cluster)
    return [report.cluster, *others]


def unreadable(report: DrillReport, cluster: str) -> list[Interval]:
    """When the drill could not read ``cluster``: between and after its readable stretches
    (gaps as long as the report's), and all along when it never could."""
    tl = report.timeline
    gap = max(1.0, 4 * report.interval)
    stretches = tl.readable.get(cluster, [])
    if not stretches:
        return [Interval(tl.start, tl.end, (cluster,))]
    holes = [Interval(a.end, b.start, (cluster,)) for a, b in itertools.pairwise(stretches)]
    if stretches[0].start - tl.start > gap:
        holes.insert(0, Interval(tl.start, stretches[0].start, (cluster,)))
    if tl.end - stretches[-1].end > gap:
        holes.append(Interval(stretches[-1].end, tl.end, (cluster,)))
    return holes


def label_rows(spans: Sequence[tuple[float, float]], pad: float) -> list[int]:
    """For labels spanning (left, right), the lowest row each fits in without touching another
    (greedy, left to right): close events get stacked labels instead of overlapping ones."""
    order = sorted(range(len(spans)), key=lambda i: spans[i][0])
    ends: list[float] = []
    rows = [0] * len(spans)
    for i in order:
        left, right = spans[i]
        row = next((r for r, end in enumerate(ends) if left >= end + pad), len(ends))
        if row == len(ends):
            ends.append(right)
        else:
            ends[row] = right
        rows[i] = row
    return rows


# -- drawing -------------------------------------------------------------------------------------


def render(report: DrillReport, path: Path) -> None:
    """Draw the drill's timeline into ``path`` (.png or .svg)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    file_format = plot_format(path)
    if file_format is None:
        raise ValueError(f"{path}: a picture's name ends in .png or .svg")
    n = len(report.probes)
    probe_row = min(PROBE_ROW, PROBE_ROWS_MAX / max(n, 1))
    lane = LANE_PAD * 2 + probe_row * n
    names = workers(report)
    lanes_height = MANAGER_LANE + lane * len(names)
    tl = report.timeline
    span = max(tl.end - min(tl.start, 0.0), 1.0)
    xmin, xmax = min(tl.start, 0.0) - 0.02 * span, tl.end + 0.02 * span

    fig = Figure(figsize=(WIDTH, 4.0), dpi=110)
    FigureCanvasAgg(fig)  # draws on Agg, whatever the default backend
    drawn = events(report)
    axes_width = WIDTH - LEFT - RIGHT
    rows, flipped = _place_labels(fig, drawn, xmin, xmax)
    band = (max(rows, default=0) + 1) * LABEL_ROW + 0.05
    legend_rows = -(-len(_legend_entries(report)) // 4)
    bottom = AXIS + legend_rows * LEGEND_ROW + 0.1
    height = TITLE + band + lanes_height + bottom
    fig.set_size_inches(WIDTH, height)

    def box(top: float, h: float) -> tuple[float, float, float, float]:
        """An axes rectangle in figure fractions, from its top and height in inches."""
        return (LEFT / WIDTH, (height - top - h) / height, axes_width / WIDTH, h / height)

    ax = fig.add_axes(box(TITLE + band, lanes_height))
    top = fig.add_axes(box(TITLE, band), sharex=ax)
    ax.set_xlim(xmin, xmax)
    ax.set_ylim(lanes_height, 0)
    top.set_ylim(0, band / LABEL_ROW)
    top.axis("off")

    _manager_lane(ax, report, xmin, xmax)
    ticks, tick_labels = [MANAGER_LANE / 2], [f"manager's view\nof {report.cluster}"]
    for i, cluster in enumerate(names):
        y = MANAGER_LANE + i * lane
        _worker_lane(ax, report, cluster, y, lane, probe_row, xmin, xmax)
        ticks.append(y + lane / 2)
        tick_labels.append(f"{cluster}\n(broken)" if cluster == report.cluster else cluster)
        ax.axhline(y, color="#999999", linewidth=0.8)
    ax.set_yticks(ticks, tick_labels, fontsize=9)
    ax.tick_params(axis="y", length=0)
    ax.set_xlabel(f"seconds since the {BREAK_NAMES.get(report.kind, 'break')}", fontsize=9)
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(axis="x", color="#dddddd", linewidth=0.5)
    ax.set_axisbelow(True)

    pad = 0.04 * (xmax - xmin) / axes_width  # 0.04 inch in seconds
    for event, row, flip in zip(drawn, rows, flipped, strict=True):
        ax.axvline(event.at, color=event.color, linewidth=1.1, linestyle="--", zorder=5)
        top.vlines(event.at, 0, row + 0.5, color=event.color, linewidth=1.1, linestyle="--")
        top.text(
            event.at - pad if flip else event.at + pad,
            row + 0.5,
            event.label,
            fontsize=8,
            color=event.color,
            ha="right" if flip else "left",
            va="center",
            fontweight="bold",
            zorder=10,  # above the lines of later events, which the white box hides
            bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.6},
        )

    title, figures = headline(report)
    fig.text(0.3 / WIDTH, 1 - 0.3 / height, title, fontsize=12, fontweight="bold")
    fig.text(0.3 / WIDTH, 1 - 0.58 / height, figures, fontsize=9.5)
    _legend(fig, report, height)
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "kfed-drill"}):
        metadata = {"Date": None} if file_format == "svg" else {}
        fig.savefig(path, format=file_format, metadata=metadata)


def _place_labels(
    fig: Figure, drawn: Sequence[Event], xmin: float, xmax: float
) -> tuple[list[int], list[bool]]:
    """Each event label's row above the lanes, and whether it goes left of its line (no
    room on the right), from the labels' widths as the figure draws them."""
    axes_width = WIDTH - LEFT - RIGHT
    x_inch = [LEFT + (e.at - xmin) / (xmax - xmin) * axes_width for e in drawn]
    widths = _text_widths(fig, [e.label for e in drawn], fontsize=8)
    spans, flipped = [], []
    for x, w in zip(x_inch, widths, strict=True):
        flip = x + w + 0.05 > WIDTH - 0.05
        flipped.append(flip)
        spans.append((x - w - 0.05, x) if flip else (x, x + w + 0.05))
    return label_rows(spans, pad=0.08), flipped


def _text_widths(fig: Figure, texts: Sequence[str], fontsize: float) -> list[float]:
    """Each text's width in inches, as the figure's canvas will draw it."""
    widths = []
    for text in texts:
        artist = fig.text(0, 0, text, fontsize=fontsize, fontweight="bold")
        widths.append(artist.get_window_extent().width / fig.dpi)
        artist.remove()
    return widths


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


def _manager_lane(ax: Axes, report: DrillReport, xmin: float, xmax: float) -> None:
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


def _worker_lane(
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


def _legend_entries(report: DrillReport) -> list[tuple[str, dict[str, object]]]:
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


def _legend(fig: Figure, report: DrillReport, height: float) -> None:
    from matplotlib.patches import Patch

    handles = [Patch(label=label, **style) for label, style in _legend_entries(report)]  # type: ignore[arg-type]
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
