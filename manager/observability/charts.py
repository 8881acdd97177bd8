"""Line charts as SVG documents, drawn on the server from the manager's recent history, so
the dashboard needs no charting library and no Internet: the page shows them as images.

Pure functions of their inputs: every label is XML-escaped (names come from the cluster),
and an SVG shown through ``<img>`` runs no script, whatever it contains.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from xml.sax.saxutils import escape

Point = tuple[float, float]
"""(unix time, value)."""

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
WIDTH, HEIGHT = 460, 210
LEFT, RIGHT, TOP, BOTTOM = 46, 12, 28, 52
"""Margins: y labels on the left, the title on top, time labels and the legend below."""
LEGEND_ROWS = 2


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten at or above ``value`` (1 for 0)."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * power:
            return float(step * power)
    return 10.0 * power  # pragma: no cover - the loop always returns


def number(value: float) -> str:
    """A tick label: whole numbers without decimals, others with three significant digits
    (0.375, 0.0125)."""
    if abs(value - round(value)) < 1e-9:
        return str(round(value))
    return f"{value:.3g}"


def relative(seconds: float) -> str:
    """A time axis label, counted back from now: "now", "-5m", "-90s"."""
    s = round(seconds)
    if s <= 0:
        return "now"
    return f"-{s // 60}m" if s >= 120 and s % 60 == 0 else f"-{s}s"


def time_ticks(window: float) -> list[float]:
    """Seconds back from now at which to label the time axis: about five, round."""
    for step in (10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600):
        if window / step <= 6:
            return [float(t) for t in range(0, int(window) + 1, step)]
    return [0.0, window]


def line_chart(
    title: str,
    series: Mapping[str, Sequence[Point]],
    *,
    now: float,
    window: float,
    unit: str = "",
    steps: bool = False,
) -> str:
    """One chart: a line per series over the last ``window`` seconds before ``now``; with
    ``steps``, values hold until the next point (counts per interval)."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    start = now - window
    shown = {
        name: [(t, v) for t, v in points if t >= start] for name, points in sorted(series.items())
    }
    shown = {name: points for name, points in shown.items() if points}
    top = nice_ceiling(max((v for pts in shown.values() for _, v in pts), default=0.0))

    def x(t: float) -> float:
        return LEFT + plot_w * (t - start) / window

    def y(v: float) -> float:
        return TOP + plot_h * (1 - v / top)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="system-ui, sans-serif" font-size="11">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#fff"/>',
        f'<text x="{LEFT}" y="17" font-size="13" font-weight="600" fill="#1d2330">'
        f"{escape(title)}{escape(f' ({unit})') if unit else ''}</text>",
    ]
    for i in range(5):  # horizontal grid with the y labels
        v = top * i / 4
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
            f'stroke="{"#9aa1ad" if i == 0 else "#e6e8ec"}"/>'
            f'<text x="{LEFT - 5}" y="{y(v) + 4:.1f}" text-anchor="end" fill="#5b6475">'
            f"{number(v)}</text>"
        )
    for back in time_ticks(window):
        tx = x(now - back)
        parts.append(
            f'<text x="{tx:.1f}" y="{TOP + plot_h + 14}" text-anchor="middle" fill="#5b6475">'
            f"{relative(back)}</text>"
        )
    if not shown:
        parts.append(
            f'<text x="{LEFT + plot_w / 2:.1f}" y="{TOP + plot_h / 2:.1f}" text-anchor="middle" '
            f'fill="#5b6475" font-style="italic">no data yet</text>'
        )
    for i, (name, points) in enumerate(shown.items()):
        color = PALETTE[i % len(PALETTE)]
        coords: list[str] = []
        for j, (t, v) in enumerate(points):
            if steps and j:
                coords.append(f"{x(t):.1f},{y(points[j - 1][1]):.1f}")
            coords.append(f"{x(t):.1f},{y(v):.1f}")
        if len(points) == 1:
            t, v = points[0]
            parts.append(f'<circle cx="{x(t):.1f}" cy="{y(v):.1f}" r="2.5" fill="{color}"/>')
        else:
            parts.append(
                f'<polyline fill="none" stroke="{color}" stroke-width="1.8" '
                f'points="{" ".join(coords)}"><title>{escape(name)}</title></polyline>'
            )
        if i >= LEGEND_ROWS * 3:
            continue  # its line is drawn (with its name on hover); the legend says how many
        lx = LEFT + (i % 3) * (plot_w / 3)
        ly = TOP + plot_h + 30 + (i // 3) * 13
        label = name if len(name) <= 24 else name[:23] + "…"
        if i == LEGEND_ROWS * 3 - 1 and len(shown) > LEGEND_ROWS * 3:
            label = f"+{len(shown) - i} more"
        parts.append(
            f'<rect x="{lx:.1f}" y="{ly - 8}" width="10" height="3" fill="{color}"/>'
            f'<text x="{lx + 14:.1f}" y="{ly - 4}" fill="#1d2330">{escape(label)}'
            f"<title>{escape(name)}</title></text>"
        )
    parts.append("</svg>")
    return "".join(parts)
