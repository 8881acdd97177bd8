"""What one drill is asked to do (``DrillOptions``), the defaults of its flags, and where
its report and plot are written."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from manager.cli.common import (
    usage_error,
)
from manager.cli.drills import plot as drillplot

DEFAULT_QUEUE = "ml-jobs/gpu-lq"
DEFAULT_PROBES = 3
DEFAULT_TIMEOUT = 120.0
DEFAULT_INTERVAL = 0.25


@dataclass(frozen=True, slots=True)
class DrillOptions:
    kind: str
    cluster: str
    queue: str
    probes: int
    flavor: str | None
    image: str
    timeout: float
    interval: float
    output: str | None
    blackhole: str | None = None
    break_command: str | None = None
    restore_command: str | None = None
    hold: float | None = None
    """Restore after this many seconds even if the probes have not moved (None: --timeout)."""
    plot: str | None = None
    """Where to draw the drill's timeline (.png or .svg; None: no picture)."""

    @property
    def probe_seconds(self) -> int:
        """Longer than every phase of the drill together."""
        return int(self.timeout * 4 + (self.hold or 0) + 300)


def report_path(output: str | None, kind: str, cluster: str, when: dt.datetime) -> Path:
    """Where the JSON report goes: ``--output`` as a file, or the default name
    ``drill-<kind>-<cluster>-<UTC time>.json`` in ``--output`` (a directory) or the cwd."""
    name = f"drill-{kind}-{cluster}-{when.astimezone(dt.UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    if output is None:
        return Path.cwd() / name
    path = Path(output).expanduser()
    if path.is_dir():
        return path / name
    if not path.parent.is_dir():
        raise usage_error(f"--output {output}: directory {path.parent} does not exist")
    return path


def plot_path(plot: str | None) -> Path | None:
    """Where ``--plot`` draws the timeline, checked before anything is touched: a .png or
    .svg in an existing directory, with matplotlib installed (None: no picture)."""
    if plot is None:
        return None
    path = Path(plot).expanduser()
    if drillplot.plot_format(path) is None:
        raise usage_error(f"--plot {plot}: the picture's name must end in .png or .svg")
    if not path.parent.is_dir():
        raise usage_error(f"--plot {plot}: directory {path.parent} does not exist")
    missing = drillplot.unavailable()
    if missing is not None:
        raise usage_error(missing)
    return path
