"""The views benchmark reads what the hand-written chains read, and writes its figures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from e2e.bench import views


def test_views_and_chains_read_the_same_fields() -> None:
    objects = [views.workload(i) for i in range(3)]
    through, chains = views.through_views(objects), views.by_chains(objects)
    assert [(r[0], r[1], r[3], r[4]) for r in through] == [(r[0], r[1], r[3], r[4]) for r in chains]
    assert [r[2] for r in through] == ["ns/j0", "ns/j1", "ns/j2"]
    assert [w.metadata.name for w in views.parsed(objects)] == ["w0", "w1", "w2"]


def test_the_figures_are_printed_and_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "views.json"
    argv = ["views", "--objects", "20", "--runs", "1", "--out", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    views.main()
    saved = json.loads(out.read_text())
    assert json.loads(capsys.readouterr().out) == saved
    assert saved["objects"] == 20
    assert all(saved[k] > 0 for k in saved if k.startswith("us_per_object"))
