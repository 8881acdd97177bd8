"""A small run of the MultiKueue benchmark (``python -m e2e.bench.multikueue``), as a user
runs it: it completes in both modes and reports every field; and a tiny run against upstream
Kueue (``--against-upstream``) reports both and the ratios. Speed is the benchmark's to
print, never asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from e2e import binaries
from e2e.bench.multikueue import upstream
from e2e.local import upstream_kueue

FIELDS = {
    "admitted",
    "throughput",
    "generation_seconds",
    "total_seconds",
    "drain_seconds",
    "quota_reservation",
    "admission",
    "dispatch",
    "watch_gaps",
    "distribution",
    "requests",
    "requests_per_workload",
    "writes_per_workload",
    "processes",
    "load_average_before",
    "load_average_after",
    "ceiling_workloads_per_second",
    "upstream_gate",
}


def run_benchmark(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    """The benchmark as a user runs it, in its own process; its output and its JSON."""
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "e2e.bench.multikueue", *args, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=560,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads(out.read_text())


@pytest.mark.timeout(600)
def test_a_small_multikueue_benchmark_completes_and_reports_every_field(tmp_path: Path) -> None:
    proc, report = run_benchmark(
        tmp_path,
        "--jobs", "20", "--mode", "capacity", "--mode", "allatonce", "--ceiling-objects", "100",
        "--timeout", "240",
    )  # fmt: skip
    assert "MultiKueue benchmark" in proc.stdout
    assert report["passed"] is True
    assert report["ceiling"]["creates_per_second"] > 0
    assert [m["mode"] for m in report["modes"]] == ["capacity-aware", "all-at-once"]
    for mode in report["modes"]:
        assert set(mode) >= FIELDS, FIELDS - set(mode)
        assert mode["admitted"] == 20 and mode["complete"] is True
        assert mode["admission"]["count"] == 20
        assert mode["quota_reservation"]["count"] == 20
        assert sum(mode["distribution"].values()) == 20
        assert set(mode["requests"]) == {"manager", "worker-1", "worker-2", "worker-3"}
        assert mode["requests"]["manager"].get("POST jobs", 0) >= 20
        assert "kfed manager" in mode["processes"]
        assert any(name.startswith("kube-apiserver") for name in mode["processes"])
    capacity, all_at_once = report["modes"]
    # Capacity-aware sends each workload to one worker; AllAtOnce copies it to every one. A
    # create the manager makes again before it has seen the first one is refused with 409
    # (AlreadyExists) and is not a copy: count the creates that made one.
    assert copies_made(capacity) == 20
    assert copies_made(all_at_once) == 60


def copies_made(mode: dict[str, object]) -> int:
    requests, failed = mode["requests"], mode["failed_requests"]
    assert isinstance(requests, dict) and isinstance(failed, dict)
    made = 0
    for worker in ("worker-1", "worker-2", "worker-3"):
        refused = {k: v for k, v in failed[worker].items() if k.startswith("POST workloads ->")}
        assert set(refused) <= {"POST workloads -> 409"}, refused
        made += requests[worker].get("POST workloads", 0) - sum(refused.values())
    return made


@pytest.mark.timeout(300)
def test_a_tiny_run_against_upstream_kueue_reports_both_and_the_ratios(tmp_path: Path) -> None:
    try:
        upstream_kueue.binary()
    except binaries.BinariesMissing as err:
        pytest.skip(f"upstream Kueue: {err} (`make test` builds it)")
    proc, report = run_benchmark(
        tmp_path,
        "--jobs", "6", "--mode", "allatonce", "--against-upstream", "--ceiling-objects", "0",
        "--settle-patience", "0", "--idle-seconds", "2", "--timeout", "180",
    )  # fmt: skip
    assert "side by side" in proc.stdout
    assert [m["mode"] for m in report["modes"]] == ["all-at-once", upstream.MODE]
    ours, theirs = report["modes"]
    assert theirs["complete"] is True and theirs["admitted"] == 6
    # Upstream's own controllers did the work: its process on every cluster, none of kfed's.
    assert {"upstream kueue manager", "upstream kueue worker-1"} <= set(theirs["processes"])
    assert not [p for p in theirs["processes"] if p.startswith("kfed")]
    # AllAtOnce in both: a copy of every workload on every worker.
    assert copies_made(ours) == 18
    for worker in ("worker-1", "worker-2", "worker-3"):
        assert theirs["requests"][worker].get("POST workloads", 0) >= 6
    rows = {r["figure"]: r for r in report["side_by_side"]["rows"]}
    for figure in (
        "workloads/s",
        "admission P95 (ms)",
        "writes / workload, manager",
        "CPU ms / workload, controller manager",
        "CPU ms / workload, kube-apiservers",
        "peak RSS MiB, manager controller",
    ):
        assert rows[figure]["ratios"]["all-at-once"] is not None, figure
