"""kfed's controllers and upstream's minimalkueue, side by side (both under upstream's own
runner, or kfed under its own): the same figures from both JSON reports, kfed / upstream
ratios, upstream's gates (its pinned ``rangespec.yaml``) applied to both, and the goals for
kfed (issue #36: wall <= 0.8x upstream's, every class admitted sooner on average, controller
CPU per admitted workload <= 1x). The maths is pure;
``run_kfed`` and ``settle`` are the only parts that run anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

KFED_CONTROLLER = "kfed controllers"
UPSTREAM_CONTROLLER = "minimalkueue"
WALL_GOAL = 0.8
CPU_PER_WORKLOAD_GOAL = 1.0
CLASSES = ("large", "medium", "small")


def settle(threshold: float, *, patience: float = 180.0) -> float:
    """Waits until the 1-minute load average is below ``threshold`` (or ``patience`` seconds
    have passed) so that one run's tail does not load the next; returns the load then."""
    deadline = time.monotonic() + patience
    load = os.getloadavg()[0]
    while load >= threshold and time.monotonic() < deadline:
        print(f"waiting for the machine to settle: load average {load:.2f}", flush=True)
        time.sleep(10)
        load = os.getloadavg()[0]
    return load


def run_kfed(settle_load: float) -> dict[str, Any]:
    """kfed's scheduler benchmark in a fresh process (its table goes to our stdout)."""
    settle(settle_load)
    with tempfile.TemporaryDirectory(prefix="kfed-compare-") as tmp:
        path = Path(tmp) / "kfed.json"
        argv = [sys.executable, "-m", "e2e.bench.scheduler", "--json", str(path)]
        done = subprocess.run(argv, check=False, stdout=subprocess.PIPE, text=True)
        # Its table, not its JSON (which is in the comparison's report).
        print(done.stdout.split("\n{", 1)[0], flush=True)
        if not path.exists():
            raise RuntimeError(f"kfed's scheduler benchmark exited {done.returncode}, no report")
        data: dict[str, Any] = json.loads(path.read_text())
        return data


# -- the comparison (pure) --------------------------------------------------------------------


def _class(report: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    for c in report["figures"]["classes"]:
        if c["name"] == name:
            return dict(c)
    return {}


def _process(report: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    return dict(report["figures"]["processes"].get(name, {}))


def _admitted(report: Mapping[str, Any]) -> int:
    return sum(int(c["admitted"]) for c in report["figures"]["classes"])


def _evictions(report: Mapping[str, Any]) -> int:
    return sum(int(c["evictions"]) for c in report["figures"]["classes"])


def figures(report: Mapping[str, Any], controller: str) -> dict[str, float]:
    """The compared figures of one report, by row name."""
    f = report["figures"]
    rows: dict[str, float] = {
        "wall (s)": f["wall_seconds"],
        "usage, cq class (%)": f["usage"]["class_percent"],
    }
    for name in CLASSES:
        rows[f"avg time to admission, {name} (s)"] = _class(report, name).get(
            "avg_time_to_admission", 0.0
        )
    for name in CLASSES:
        rows[f"p95 time to admission, {name} (s)"] = _class(report, name).get(
            "p95_time_to_admission", 0.0
        )
    rows["evictions"] = _evictions(report)
    for name in CLASSES:
        rows[f"evictions, {name}"] = _class(report, name).get("evictions", 0)
    own = _process(report, controller)
    admitted = _admitted(report)
    rows["controller CPU (s)"] = own.get("cpu_seconds", 0.0)
    rows["controller CPU per admitted workload (ms)"] = (
        1000 * own.get("cpu_seconds", 0.0) / admitted if admitted else 0.0
    )
    rows["controller peak RSS (MiB)"] = own.get("peak_rss_mib", 0.0)
    rows["kube-apiserver CPU (s)"] = _process(report, "kube-apiserver").get("cpu_seconds", 0.0)
    rows["etcd CPU (s)"] = _process(report, "etcd").get("cpu_seconds", 0.0)
    return rows


def ratio(ours: float, theirs: float) -> float | None:
    return ours / theirs if theirs else None


def upstream_gates(rangespec: Mapping[str, Any]) -> dict[str, tuple[str, float]]:
    """Upstream's pass criteria from its rangespec.yaml, by row name: (max|min, limit)."""
    gates: dict[str, tuple[str, float]] = {}
    cmd = rangespec.get("cmd", {})
    if "maxWallMs" in cmd:
        gates["wall (s)"] = ("max", cmd["maxWallMs"] / 1000)
    usage = rangespec.get("clusterQueueClassesMinUsage", {})
    if "cq" in usage:
        gates["usage, cq class (%)"] = ("min", float(usage["cq"]))
    for name, limit in rangespec.get("wlClassesMaxAvgTimeToAdmissionMs", {}).items():
        gates[f"avg time to admission, {name} (s)"] = ("max", limit / 1000)
    return gates


def _holds(kind: str, value: float, limit: float) -> bool:
    return value <= limit if kind == "max" else value >= limit


def goals(kfed: Mapping[str, float], upstream: Mapping[str, float]) -> list[dict[str, Any]]:
    """The goals for kfed against upstream, each with its verdict."""
    result = []
    wall = ratio(kfed["wall (s)"], upstream["wall (s)"])
    result.append(
        {
            "goal": f"wall <= {WALL_GOAL}x upstream's",
            "ratio": wall,
            "met": wall is not None and wall <= WALL_GOAL,
        }
    )
    for name in CLASSES:
        row = f"avg time to admission, {name} (s)"
        r = ratio(kfed[row], upstream[row])
        result.append(
            {
                "goal": f"{name}: admitted sooner than upstream",
                "ratio": r,
                "met": r is not None and r < 1,
            }
        )
    row = "controller CPU per admitted workload (ms)"
    r = ratio(kfed[row], upstream[row])
    result.append(
        {
            "goal": f"controller CPU per admitted workload <= {CPU_PER_WORKLOAD_GOAL}x upstream's",
            "ratio": r,
            "met": r is not None and r <= CPU_PER_WORKLOAD_GOAL,
        }
    )
    return result


def comparison(kfed: Mapping[str, Any], upstream: Mapping[str, Any]) -> dict[str, Any]:
    ours = figures(kfed, KFED_CONTROLLER)
    theirs = figures(upstream, UPSTREAM_CONTROLLER)
    gates = upstream_gates(upstream.get("upstream_rangespec", {}))
    rows = []
    for name, value in ours.items():
        row: dict[str, Any] = {
            "figure": name,
            "upstream": round(theirs[name], 3),
            "kfed": round(value, 3),
            "ratio": None if (r := ratio(value, theirs[name])) is None else round(r, 3),
        }
        if name in gates:
            kind, limit = gates[name]
            row["gate"] = {"kind": kind, "limit": limit}
            row["upstream_passes"] = _holds(kind, theirs[name], limit)
            row["kfed_passes"] = _holds(kind, value, limit)
        rows.append(row)
    return {
        "benchmark": "scheduler, kfed vs upstream's harness",
        "upstream": upstream.get("implementation", "upstream"),
        "rows": rows,
        "goals": goals(ours, theirs),
        "load_average": {
            "kfed": [kfed["figures"]["load_average_before"], kfed["figures"]["load_average_after"]],
            "upstream": [
                upstream["figures"]["load_average_before"],
                upstream["figures"]["load_average_after"],
            ],
        },
        "kfed_report": kfed,
        "upstream_report": upstream,
    }


def render(result: Mapping[str, Any]) -> str:
    lines = [
        f"kfed vs {result['upstream']}, baseline scenario, back to back "
        f"(kfed under {result.get('kfed_runner', 'its own')} runner)",
        "",
        f"{'figure':<44} {'upstream':>10} {'kfed':>10} {'kfed/up':>8}  gate",
    ]
    for row in result["rows"]:
        r = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
        gate = ""
        if "gate" in row:
            op = "<=" if row["gate"]["kind"] == "max" else ">="
            verdicts = (
                f"up {'pass' if row['upstream_passes'] else 'FAIL'}, "
                f"kfed {'pass' if row['kfed_passes'] else 'FAIL'}"
            )
            gate = f"{op} {row['gate']['limit']:g} ({verdicts})"
        lines.append(
            f"{row['figure']:<44} {row['upstream']:>10.1f} {row['kfed']:>10.1f} {r:>8}  {gate}"
        )
    lines.append("")
    for goal in result["goals"]:
        r = "-" if goal["ratio"] is None else f"{goal['ratio']:.2f}"
        lines.append(f"goal: {goal['goal']:<58} ratio {r:>5}  {'met' if goal['met'] else 'MISSED'}")
    load = result["load_average"]
    lines.append("")
    for who in ("kfed", "upstream"):
        before, after = load[who]
        lines.append(f"load average, {who} run: before {before[0]:.2f}, after {after[0]:.2f}")
    return "\n".join(lines)
