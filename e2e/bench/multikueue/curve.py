"""The MultiKueue benchmark's scale curve: the same shape at several Job counts and worker
counts, one fresh bed per point, and a plot of how throughput, the manager's CPU per
workload and its memory grow.

    .venv/bin/python -m e2e.bench.multikueue.curve [--jobs 1000,5000] [--workers 3,10]
        [--mode capacity] [--json FILE] [--plot FILE.png]

Every (jobs, workers) pair is one run of ``python -m e2e.bench.multikueue`` in a child
process (its own report kept in the JSON); ``--plot`` draws the PNG from that JSON (also
on its own: ``--from-json FILE --plot FILE.png``). matplotlib is a benchmark extra
(``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def _ints(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"need positive integers: {text!r}")
    return values


def point(report: dict[str, Any], jobs: int, workers: int) -> dict[str, Any]:
    """One point of the curve from one run's report (its first mode)."""
    mode = report["modes"][0]
    manager = mode["processes"].get("kfed manager", {})
    apiservers = sum(
        p["cpu_seconds"] for n, p in mode["processes"].items() if n.startswith("kube-apiserver")
    )
    admitted = max(mode["admitted"], 1)
    return {
        "jobs": jobs,
        "workers": workers,
        "mode": mode["mode"],
        "complete": mode["complete"],
        "throughput": round(mode["throughput"], 2),
        "admission_p95_ms": mode["admission"]["p95Ms"],
        "quota_reservation_p95_ms": mode["quota_reservation"]["p95Ms"],
        "manager_cpu_ms_per_workload": round(1000 * manager.get("cpu_seconds", 0.0) / admitted, 2),
        "manager_peak_rss_mib": round(manager.get("peak_rss_mib", 0.0)),
        "apiservers_cpu_ms_per_workload": round(1000 * apiservers / admitted, 2),
        "manager_requests_per_workload": mode["requests_per_workload"].get("manager"),
        **({"error": mode["error"]} if mode.get("error") else {}),
    }


def run_point(jobs: int, workers: int, mode: str, timeout: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kfed-mk-curve-") as tmp:
        out = Path(tmp) / "point.json"
        argv = [
            sys.executable,
            "-m",
            "e2e.bench.multikueue",
            "--jobs",
            str(jobs),
            "--workers",
            str(workers),
            "--mode",
            mode,
            "--ceiling-objects",
            "0",
            "--timeout",
            str(timeout),
            "--json",
            str(out),
        ]
        print(f"== {jobs} jobs, {workers} workers, {mode}", flush=True)
        subprocess.run(argv, check=False, stdout=subprocess.DEVNULL)
        if not out.exists():
            return {"jobs": jobs, "workers": workers, "mode": mode, "complete": False}
        return point(json.loads(out.read_text()), jobs, workers)


def plot(points: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display: a file
    import matplotlib.pyplot as plt

    done = [p for p in points if p.get("complete")]
    figure, axes = plt.subplots(1, 3, figsize=(13, 4))
    panels = [
        ("throughput", "workloads admitted / s"),
        ("manager_cpu_ms_per_workload", "manager CPU ms / workload"),
        ("manager_peak_rss_mib", "manager peak RSS (MiB)"),
    ]
    for axis, (field, label) in zip(axes, panels, strict=True):
        for workers in sorted({p["workers"] for p in done}):
            series = sorted((p["jobs"], p[field]) for p in done if p["workers"] == workers)
            axis.plot(
                [x for x, _ in series], [y for _, y in series], marker="o", label=f"{workers} w"
            )
        axis.set_xlabel("Jobs")
        axis.set_ylabel(label)
        highest = max((p[field] for p in done), default=1) or 1
        axis.set_ylim(bottom=0, top=highest * 1.15)  # room above the highest point
        axis.grid(alpha=0.3)
        axis.legend()
    figure.suptitle("kfed, upstream's MultiKueue baseline shape, by Jobs and workers")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def render(points: list[dict[str, Any]]) -> str:
    header = (
        f"{'jobs':>6} {'workers':>7} {'wl/s':>6} {'adm p95 ms':>10} {'mgr cpu ms/wl':>13} "
        f"{'mgr RSS MiB':>11} {'apiservers ms/wl':>16}"
    )
    lines = [header, "-" * len(header)]
    for p in points:
        if not p.get("complete"):
            why = str(p.get("error", "")).splitlines()[:1]
            lines.append(f"{p['jobs']:>6} {p['workers']:>7}  incomplete {' '.join(why)}")
            continue
        lines.append(
            f"{p['jobs']:>6} {p['workers']:>7} {p['throughput']:>6.1f} "
            f"{p['admission_p95_ms']:>10.0f} {p['manager_cpu_ms_per_workload']:>13.1f} "
            f"{p['manager_peak_rss_mib']:>11} {p['apiservers_cpu_ms_per_workload']:>16.1f}"
        )
    return "\n".join(lines)


def save(points: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"points": points}, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m e2e.bench.multikueue.curve",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--jobs", type=_ints, default=[1000, 5000])
    p.add_argument("--workers", type=_ints, default=[3, 10])
    p.add_argument("--mode", default="capacity", help="one dispatch mode (default capacity)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per point")
    p.add_argument("--json", type=Path, help="write the points here")
    p.add_argument("--plot", type=Path, help="draw the curve into this PNG")
    p.add_argument("--from-json", type=Path, help="plot points measured before, run nothing")
    args = p.parse_args(argv)
    if args.from_json is not None:
        points = json.loads(args.from_json.read_text())["points"]
    else:
        points = []
        for workers in args.workers:
            for jobs in args.jobs:
                points.append(run_point(jobs, workers, args.mode, args.timeout))
                print(render(points[-1:]).splitlines()[-1], flush=True)
                if args.json is not None:  # after every point: a long curve cut short keeps them
                    save(points, args.json)
    print(render(points))
    if args.plot is not None:
        plot(points, args.plot)
        print(f"plot: {args.plot}")
    return 0 if all(pt.get("complete") for pt in points) else 1


if __name__ == "__main__":
    sys.exit(main())
