"""`kfed drill ... --plot`: the drill's timeline drawn from a synthetic report (no cluster),
to PNG and SVG; what the picture holds (lanes, events, headline figures); and the option's
bad uses, refused with exit 2 before anything is contacted."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from manager.cli.drills import plot, plotdata
from manager.cli.drills.intervals import Interval, ManagerSample, WorkerSample
from manager.cli.drills.output import as_json
from manager.cli.drills.report import DrillReport, Restoration, build
from manager.cli.main import main

TARGET, DEST, IDLE = "worker-1", "worker-2", "worker-3"
PROBES = ["drill-partition-abc123-1", "drill-partition-abc123-2"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def synthetic(*, double: bool = False) -> DrillReport:
    """A partition of worker-1: the manager reports it lost from 2.0 s; its shim fences the
    probes at 5.5 s; the manager evicts them at 6.0 s; copies on worker-2 from 6.25 s, running
    there from 6.75 s; worker-1 restored at 7.0 s, Active again 0.5 s later; worker-3 could
    not be read from 3 s to 5 s; the drill watches until 9 s. ``double``: probe 1 also runs
    on worker-2 from 5.0 s, while it still runs on worker-1."""
    samples: list[WorkerSample] = []
    for i in range(-4, 37):
        at = i * 0.25
        on_target = frozenset(PROBES) if at < 5.5 else frozenset()
        samples.append(
            WorkerSample(at, TARGET, on_target, frozenset(PROBES) if at < 7.5 else frozenset())
        )
        moved = at >= 6.75 or (double and at >= 5.0)
        running = frozenset(PROBES if at >= 6.75 else PROBES[:1]) if moved else frozenset()
        copies = frozenset(PROBES) if at >= 6.25 or (double and at >= 5.0) else frozenset()
        samples.append(WorkerSample(at + 0.01, DEST, running, copies))
        if not 3.0 < at < 5.0:
            samples.append(WorkerSample(at + 0.02, IDLE, frozenset(), frozenset()))
    manager = [
        ManagerSample(
            i * 0.25,
            2.0 <= i * 0.25 < 7.25,
            {p: TARGET if i * 0.25 < 6.0 else (DEST if i * 0.25 >= 6.5 else "") for p in PROBES},
        )
        for i in range(-4, 37)
    ]
    return build(
        kind="partition",
        cluster=TARGET,
        run_id="abc123",
        started_at="2026-12-02T07:00:00.000000Z",
        queue="ml-jobs/gpu-lq",
        flavor="h100",
        breaking="Secret kueue-system/worker-1 pointed at https://127.0.0.1:4000",
        timeout=60,
        interval=0.25,
        probes=PROBES,
        samples=samples,
        manager=manager,
        clusters=[TARGET, DEST, IDLE],
        end=9.0,
        restoration=Restoration(["restored"], 7.0, 0.5, 0.75),
    )


# -- what the report keeps for the picture -------------------------------------------------------


def test_the_report_keeps_the_timeline_the_picture_needs() -> None:
    tl = synthetic().timeline
    assert tl.start == -1.0 and tl.end == 9.0
    assert tl.lost == [Interval(2.0, 7.0, (TARGET,))]
    (before, after) = tl.readable[IDLE]
    assert before.start == pytest.approx(-0.98) and before.end == pytest.approx(3.02)
    assert after.start == pytest.approx(5.02)
    assert len(tl.readable[TARGET]) == 1
    assert tl.copies[PROBES[0]][DEST][0].start == pytest.approx(6.26)
    assert tl.copies[PROBES[0]][TARGET][0].end == 7.25
    data = json.loads(as_json(synthetic()))["timeline"]
    assert data["lost"] == [{"start": 2.0, "end": 7.0, "clusters": [TARGET]}]
    assert data["readable"][IDLE][1]["start"] == 5.02


def test_events_follow_the_report_in_time_order() -> None:
    report = synthetic()
    labels = [e.label for e in plotdata.events(report)]
    assert labels == [
        "cut 0s",
        "detected 2.0s",
        "fenced on worker-1 5.5s",
        "evicted 6.0s",
        "re-dispatched 6.3s",
        "running elsewhere 6.8s",
        "restored 7.0s",
        "Active again 7.5s",
        "finish 9.0s",
    ]
    title, figures = plotdata.headline(report)
    assert title.startswith("kfed drill partition of worker-1 — run abc123") and "PASS" in title
    assert "detection 2.0s" in figures and "running elsewhere 6.8s" in figures
    assert "moved 2/2" in figures and "double runs 0" in figures
    assert plotdata.workers(report) == [TARGET, DEST, IDLE]
    assert plotdata.unreadable(report, IDLE) == [
        Interval(pytest.approx(3.02), pytest.approx(5.02), (IDLE,))  # type: ignore[arg-type]
    ]
    assert plotdata.unreadable(report, TARGET) == []


def test_close_labels_are_stacked_and_far_ones_share_a_row() -> None:
    assert plotdata.label_rows([(0, 1), (0.5, 2), (1.2, 3), (3.5, 4)], pad=0.1) == [0, 1, 0, 0]
    assert plotdata.label_rows([(2, 3), (0, 1)], pad=0.1) == [0, 0]


# -- the files ---------------------------------------------------------------------------------


def test_a_png_is_drawn(tmp_path: Path) -> None:
    path = tmp_path / "drill.png"
    plot.render(synthetic(), path)
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC)
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width == 11 * 110 and 300 < height < 1200, (width, height)


@pytest.mark.parametrize("double", [False, True])
def test_an_svg_names_every_worker_probe_and_event(tmp_path: Path, double: bool) -> None:
    path = tmp_path / "drill.SVG"  # the suffix, not its case, picks the format
    report = synthetic(double=double)
    assert (report.double_run_count == 1) is double
    plot.render(report, path)
    root = ET.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]
    text = " ".join(texts)
    for worker in (TARGET, DEST, IDLE):
        assert worker in text
    for event in plotdata.events(report):
        assert event.label in text
    assert "p1: drill-partition-abc123-1" in text and "p2: drill-partition-abc123-2" in text
    assert "kfed drill partition of worker-1" in text
    assert ("double run" in texts) is double, "the legend shows a double run's mark"
    assert ("FAIL (exit 4)" in text) is double


def test_a_drill_that_saw_nothing_after_the_break_still_draws(tmp_path: Path) -> None:
    """No phase reached, the cluster never restored: the cut and the finish only."""
    report = build(
        kind="maintenance",
        cluster=TARGET,
        run_id="0",
        started_at="2026-12-02T07:00:00Z",
        queue="q/q",
        flavor="f",
        breaking="drain",
        timeout=1,
        interval=0.25,
        probes=["p"],
        samples=[WorkerSample(-0.1, TARGET, frozenset({"p"}), frozenset({"p"}))],
        manager=[],
        clusters=[TARGET, DEST],
        end=1.0,
        restoration=Restoration(["restoring failed: 403"], None, None, None),
    )
    assert [e.label for e in plotdata.events(report)] == ["drain 0s", "finish 1.0s"]
    plot.render(report, tmp_path / "x.png")
    assert (tmp_path / "x.png").read_bytes().startswith(PNG_MAGIC)
    assert plotdata.unreadable(report, DEST) == [Interval(-0.1, 1.0, (DEST,))]


# -- the option ---------------------------------------------------------------------------------


def drill(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        main, ["drill", "partition", "--cluster", TARGET, *args, "--kubeconfig", "/nonexistent"]
    )
    return result.exit_code, result.output


def test_a_plot_that_is_neither_png_nor_svg_is_exit_2_before_anything_is_contacted(
    tmp_path: Path,
) -> None:
    code, output = drill("--plot", str(tmp_path / "drill.pdf"))
    assert code == 2, output
    assert output.strip().splitlines() == [
        f"error: --plot {tmp_path / 'drill.pdf'}: the picture's name must end in .png or .svg"
    ]
    code, output = drill("--plot", str(tmp_path / "missing" / "drill.png"))
    assert code == 2 and "does not exist" in output, output


def test_a_plot_without_matplotlib_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    assert "pip install 'kfed[plot]'" in (plot.unavailable() or "")
    code, output = drill("--plot", str(tmp_path / "drill.png"))
    assert code == 2, output
    assert "pip install 'kfed[plot]'" in output and "Traceback" not in output
    assert "/nonexistent" not in output, "refused before the kubeconfig is read"
