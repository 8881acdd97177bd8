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

What to draw is computed in plotdata.py (pure), the lanes and legend drawn in plotlanes.py,
with the sizes and colors of plotstyle.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from manager.cli.drills.plotdata import BREAK_NAMES, Event, events, headline, label_rows, workers
from manager.cli.drills.plotlanes import legend, legend_entries, manager_lane, worker_lane
from manager.cli.drills.plotstyle import (
    AXIS,
    LABEL_ROW,
    LANE_PAD,
    LEFT,
    LEGEND_ROW,
    MANAGER_LANE,
    PROBE_ROW,
    PROBE_ROWS_MAX,
    RIGHT,
    TITLE,
    WIDTH,
)
from manager.cli.drills.report import DrillReport

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FORMATS = {".png": "png", ".svg": "svg"}
INSTALL_HINT = "pip install 'kfed[plot]'"


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
    legend_rows = -(-len(legend_entries(report)) // 4)
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

    manager_lane(ax, report, xmin, xmax)
    ticks, tick_labels = [MANAGER_LANE / 2], [f"manager's view\nof {report.cluster}"]
    for i, cluster in enumerate(names):
        y = MANAGER_LANE + i * lane
        worker_lane(ax, report, cluster, y, lane, probe_row, xmin, xmax)
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
    legend(fig, report, height)
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
