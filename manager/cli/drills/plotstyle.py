"""The drill's picture's sizes (in inches) and colors (plot.py, plotlanes.py)."""

from __future__ import annotations

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
