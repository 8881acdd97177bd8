"""The core benchmark runs and reports sane figures (tiny sizes; the real run is manual)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from e2e.bench import core as bench


def test_benchmark_runs_and_writes_json(tmp_path: Path) -> None:
    output = tmp_path / "bench.json"

    assert bench.main(["--sizes", "200", "--decisions", "300", "--output", str(output)]) == 0

    report = json.loads(output.read_text())
    (result,) = report["results"]
    assert result["pending_target"] == 200
    assert result["decisions"] >= 300
    assert result["admitted"] > 0
    assert result["decisions_per_second"] > 0
    assert result["per_decision_us"]["p50"] <= result["per_decision_us"]["p99"]


def test_decisions_do_not_depend_on_the_hash_seed() -> None:
    """Same inputs, same decisions, across processes (set and dict order included)."""
    code = (
        "from e2e.bench.core import decisions_digest; "
        "print(decisions_digest(300, cycles=150, seed=3))"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": str(hash_seed)},
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parents[3],
        ).stdout.strip()
        for hash_seed in (1, 2, 3)
    }
    assert len(digests) == 1
