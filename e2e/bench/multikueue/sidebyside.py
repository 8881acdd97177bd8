"""kfed's runs of the MultiKueue shape beside upstream Kueue's, in one table: the same figure
of each run and the ratio kfed / upstream. Above 1 is better for workloads/s, below 1 for
every other figure (time, requests, CPU, memory). Pure: results in, text and JSON out (the
plot imports matplotlib, a benchmark extra, only when drawn).

Processes are compared by what they do, not by whose they are: the federating manager's
controller (kfed's manager, upstream Kueue on the manager cluster) and each worker's
(kfed's shim, upstream Kueue on the worker), then every cluster's kube-apiserver and etcd.
Per-workload figures divide by the workloads the run created (every one was admitted in a
complete run; an incomplete run is marked and its figures are not comparable). Requests and
CPU are net of the background: what each API server served and each process spent at rest
(an idle window before the Jobs), scaled to the measured window's length, is taken off; a
slower run would otherwise pay for its length (lease renewals, resyncs, idle loops).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.bench.multikueue.run import UPSTREAM_KUEUE, ModeResult

KFED_MANAGER = "kfed manager"
KFED_SHIM = "kfed shim "
ROLES = ("controller", "kube-apiserver", "etcd")
HEADLINES = (
    "workloads/s",
    "quota reservation P95 (ms)",
    "admission P95 (ms)",
    "API requests / workload, all clusters",
    "writes / workload, all clusters",
    "CPU ms / workload, controllers",
    "CPU ms / workload, kube-apiservers",
    "CPU ms / workload, etcd",
    "peak RSS MiB, manager controller",
)
"""The rows the plot draws."""


def process_key(name: str) -> tuple[str, str] | None:
    """(role, cluster) of a process of the report, kfed's or upstream's alike; None for
    the benchmark itself."""
    if name == KFED_MANAGER:
        return "controller", "manager"
    if name.startswith(KFED_SHIM):
        return "controller", name.removeprefix(KFED_SHIM)
    if name.startswith(UPSTREAM_KUEUE + " "):
        return "controller", name.removeprefix(UPSTREAM_KUEUE + " ")
    role, _, cluster = name.partition(" ")
    if role in ROLES and cluster:
        return role, cluster
    return None


def _cluster_order(cluster: str) -> tuple[int, int, str]:
    """The manager first, then the workers by number (worker-2 before worker-10)."""
    if cluster == "manager":
        return 0, 0, cluster
    number = cluster.rsplit("-", 1)[-1]
    return 1, int(number) if number.isdigit() else 0, cluster


def figures(run: ModeResult) -> dict[str, float]:
    """Every figure of one run the comparison shows, in the table's order."""
    out: dict[str, float] = {
        "workloads/s": run.throughput,
        "quota reservation P50 (ms)": run.quota_reservation.p50_ms,
        "quota reservation P95 (ms)": run.quota_reservation.p95_ms,
        "admission P50 (ms)": run.admission.p50_ms,
        "admission P95 (ms)": run.admission.p95_ms,
    }
    clusters = sorted(run.requests, key=_cluster_order)
    for cluster in clusters:
        out[f"API requests / workload, {cluster}"] = run.net_per_workload(cluster)
        out[f"writes / workload, {cluster}"] = run.net_per_workload(cluster, writes_only=True)
    out["API requests / workload, all clusters"] = sum(run.net_per_workload(c) for c in clusters)
    out["writes / workload, all clusters"] = sum(
        run.net_per_workload(c, writes_only=True) for c in clusters
    )
    per_role: dict[str, float] = dict.fromkeys(ROLES, 0.0)
    keyed = sorted(
        ((key, name) for name in run.processes if (key := process_key(name))),
        key=lambda kn: (ROLES.index(kn[0][0]), _cluster_order(kn[0][1])),
    )
    workloads = max(run.workloads, 1)
    raw = 0.0
    for (role, cluster), name in keyed:
        cpu_ms = 1000 * run.net_cpu_seconds(name) / workloads
        out[f"CPU ms / workload, {role} {cluster}"] = cpu_ms
        per_role[role] += cpu_ms
        raw += 1000 * run.processes[name].cpu_seconds / workloads
    out["CPU ms / workload, controllers"] = per_role["controller"]
    out["CPU ms / workload, kube-apiservers"] = per_role["kube-apiserver"]
    out["CPU ms / workload, etcd"] = per_role["etcd"]
    out["CPU ms / workload, all of them"] = sum(per_role.values())
    out["CPU ms / workload, all of them, rest included"] = raw
    for (role, cluster), name in keyed:
        out[f"peak RSS MiB, {cluster} {role}"] = run.processes[name].peak_rss_mib
    return out


def ratio(ours: float | None, theirs: float | None) -> float | None:
    """ours / theirs; None when either is missing or theirs is zero."""
    if ours is None or theirs is None or theirs == 0:
        return None
    return ours / theirs


@dataclass
class Row:
    figure: str
    values: dict[str, float | None]
    """Run name -> its figure (None: that run has no such figure)."""
    ratios: dict[str, float | None]
    """kfed run name -> its figure / upstream's."""


@dataclass
class Comparison:
    baseline: str
    """Upstream's run."""
    runs: list[str]
    """kfed's runs, then upstream's."""
    rows: list[Row] = field(default_factory=list)
    complete: dict[str, bool] = field(default_factory=dict)
    settle_seconds: dict[str, float] = field(default_factory=dict)
    load_before: dict[str, float] = field(default_factory=dict)
    """Each run's 1-minute load average when its generator started."""
    idle_seconds: dict[str, float] = field(default_factory=dict)
    """Each run's idle window (0: none; its figures then include the background)."""

    def row(self, figure: str) -> Row | None:
        return next((r for r in self.rows if r.figure == figure), None)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Comparison:
        """Back from ``to_json`` (a saved report's ``side_by_side``), to draw it again."""
        out = cls(baseline=data["baseline"], runs=list(data["runs"]))
        out.rows = [Row(r["figure"], dict(r["values"]), dict(r["ratios"])) for r in data["rows"]]
        out.complete = dict(data["complete"])
        out.settle_seconds = dict(data["settle_seconds"])
        out.load_before = dict(data["load_average_before"])
        out.idle_seconds = dict(data["idle_seconds"])
        return out

    def to_json(self) -> dict[str, Any]:
        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, 3)

        return {
            "baseline": self.baseline,
            "runs": self.runs,
            "ratio": "kfed / upstream: above 1 is better for workloads/s, below 1 for the rest",
            "complete": self.complete,
            "settle_seconds": self.settle_seconds,
            "load_average_before": self.load_before,
            "idle_seconds": self.idle_seconds,
            "rows": [
                {
                    "figure": r.figure,
                    "values": {k: rounded(v) for k, v in r.values.items()},
                    "ratios": {k: rounded(v) for k, v in r.ratios.items()},
                }
                for r in self.rows
            ],
        }


def compare(kfed: list[ModeResult], upstream: ModeResult) -> Comparison:
    """Every figure any run has, each run's value, and each kfed run's ratio to upstream's."""
    runs = [*kfed, upstream]
    found = {run.mode: figures(run) for run in runs}
    order: list[str] = []
    for run in runs:
        order += [f for f in found[run.mode] if f not in order]
    theirs = found[upstream.mode]
    out = Comparison(baseline=upstream.mode, runs=[r.mode for r in runs])
    for figure in order:
        values = {name: found[name].get(figure) for name in out.runs}
        ratios = {r.mode: ratio(found[r.mode].get(figure), theirs.get(figure)) for r in kfed}
        out.rows.append(Row(figure, values, ratios))
    for run in runs:
        out.complete[run.mode] = run.complete
        out.settle_seconds[run.mode] = run.settle_seconds
        out.load_before[run.mode] = run.load_average_before[0]
        out.idle_seconds[run.mode] = round(run.idle_seconds, 1)
    return out


def _cell(value: float | None, width: int, digits: int = 1) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.{digits}f}"


def render(comparison: Comparison) -> str:
    kfed = [r for r in comparison.runs if r != comparison.baseline]
    width = max(len(r.figure) for r in comparison.rows) if comparison.rows else 10
    columns = [*comparison.runs, *(f"{r} / up" for r in kfed)]
    cell = max(12, *(len(c) for c in columns))
    lines = [
        "",
        f"kfed / upstream Kueue, side by side (baseline: {comparison.baseline})",
        "ratios are kfed / upstream: above 1 is better for workloads/s, below 1 for the rest;",
        "requests and CPU net of what each showed at rest over as long (idle window)",
        "",
        f"{'figure':<{width}} " + " ".join(f"{c:>{cell}}" for c in columns),
    ]
    lines.append("-" * len(lines[-1]))
    for row in comparison.rows:
        values = [_cell(row.values[r], cell) for r in comparison.runs]
        ratios = [_cell(row.ratios[r], cell, 2) for r in kfed]
        lines.append(f"{row.figure:<{width}} " + " ".join(values + ratios))
    for run in comparison.runs:
        state = "complete" if comparison.complete[run] else "INCOMPLETE: not comparable"
        lines.append(
            f"{run}: {state}; waited {comparison.settle_seconds[run]:.0f} s for the load "
            f"average to fall, {comparison.load_before[run]:.2f} at the start; idle window "
            f"{comparison.idle_seconds[run]:.0f} s"
        )
    return "\n".join(lines)


def markdown(comparison: Comparison) -> str:
    """The same table in Markdown, as docs/performance.md shows it: ratios in bold."""
    kfed = [r for r in comparison.runs if r != comparison.baseline]
    head = ["figure", *comparison.runs, *(f"{r} / upstream" for r in kfed)]
    lines = [
        "| " + " | ".join(head) + " |",
        "|---|" + "---:|" * (len(head) - 1),
    ]
    for row in comparison.rows:
        values = [
            "-" if row.values[r] is None else f"{row.values[r]:,.1f}" for r in comparison.runs
        ]
        ratios = ["-" if row.ratios[r] is None else f"**{row.ratios[r]:.2f}**" for r in kfed]
        lines.append("| " + " | ".join([row.figure, *values, *ratios]) + " |")
    return "\n".join(lines)


def plot(comparison: Comparison, path: Path) -> None:
    """The headline ratios as horizontal bars on a log scale, one colour per kfed run."""
    import matplotlib

    matplotlib.use("Agg")  # no display: a file
    import matplotlib.pyplot as plt

    kfed = [r for r in comparison.runs if r != comparison.baseline]
    rows = [r for f in HEADLINES if (r := comparison.row(f)) is not None]
    figure, axes = plt.subplots(figsize=(8, 0.5 * len(rows) * len(kfed) + 1.5))
    height = 0.8 / max(len(kfed), 1)
    for index, run in enumerate(kfed):
        positions = [i + index * height for i in range(len(rows))]
        values = [r.ratios[run] or 0.0 for r in rows]
        axes.barh(positions, values, height=height, label=run)
    axes.axvline(1.0, color="black", lw=1)
    axes.set_xscale("log")
    axes.set_yticks([i + height * (len(kfed) - 1) / 2 for i in range(len(rows))])
    axes.set_yticklabels([r.figure for r in rows])
    axes.invert_yaxis()
    axes.set_xlabel("kfed / upstream Kueue (1 = the same)")
    axes.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
