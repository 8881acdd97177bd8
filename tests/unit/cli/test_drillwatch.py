"""The drill's live double-run notice judges as the report does: by overlapping runs of
samples, never by comparing one worker's fresh sample with another's older one."""

from __future__ import annotations

from typing import Any

from manager.cli.drills.intervals import WorkerSample, double_runs
from manager.cli.drills.watch import Watcher

P = "probe-1"


def watcher() -> Watcher:
    nothing: Any = None  # the live bookkeeping reads no cluster
    return Watcher(manager=nothing, workers={}, plan=nothing, workloads={P: "wl-1"})


def play(w: Watcher, samples: list[tuple[float, str, bool]]) -> list[WorkerSample]:
    taken = []
    for at, cluster, running in samples:
        on = frozenset({P}) if running else frozenset()
        w._track_runs(at, cluster, on)
        taken.append(WorkerSample(at, cluster, on, frozenset()))
    return taken


def test_a_fast_move_between_two_samples_is_not_a_double_run() -> None:
    w = watcher()
    # worker-3 last seen running at 0.01; worker-2 seen running at 0.26, before worker-3's
    # next sample (0.27) shows it stopped: nothing proves both ran at once.
    samples = play(w, [(0.01, "worker-3", True), (0.01, "worker-2", False)])
    samples += play(w, [(0.26, "worker-2", True)])
    assert w._running_at_once(P) == []
    samples += play(w, [(0.27, "worker-3", False)])
    assert w._running_at_once(P) == []
    assert double_runs(samples, P) == []


def test_a_probe_seen_running_on_two_workers_at_once_is_flagged_as_the_report_does() -> None:
    w = watcher()
    samples = play(w, [(0.0, "worker-3", True), (0.1, "worker-2", True)])
    assert w._running_at_once(P) == [], "not yet: worker-3 was last seen before 0.1"
    samples += play(w, [(0.25, "worker-3", True)])
    assert w._running_at_once(P) == ["worker-2", "worker-3"]
    assert [(i.start, i.end, i.clusters) for i in double_runs(samples, P)] == [
        (0.1, 0.1, ("worker-2", "worker-3"))
    ]
