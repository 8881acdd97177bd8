"""Status back to the manager (``jobsync.py``): what of the remote job's status the
manager's job takes, one row per situation."""

from __future__ import annotations

from typing import Any

import pytest

from manager.federation.decisions import actions as do
from manager.federation.decisions.jobsync import RunEnd, SyncFacts, finish, status_patch, sync

W1 = "worker-1"
COUNTERS = ("active", "ready")

ROWS: list[tuple[str, SyncFacts, dict[str, Any] | None]] = [
    ("no remote job that counts", SyncFacts(W1, {}, None), None),
    ("running there: copied", SyncFacts(W1, {}, {"active": 2}), {"active": 2}),
    ("nothing new", SyncFacts(W1, {"active": 2}, {"active": 2}), None),
    ("the worker reports nothing yet", SyncFacts(W1, {"active": 2}, {}), None),
    (
        "finished: the counters the worker omits now are removed",
        SyncFacts(W1, {"active": 2, "ready": 2}, {"succeeded": 1}, counters=COUNTERS),
        {"active": None, "ready": None, "succeeded": 1},
    ),
    (
        "moved to another worker: the manager's Job keeps its first startTime",
        SyncFacts(W1, {"startTime": "t0", "active": 0}, {"startTime": "t1", "active": 1}),
        {"active": 1},
    ),
    (
        "only startTime differs: nothing to write",
        SyncFacts(W1, {"startTime": "t0", "active": 1}, {"startTime": "t1", "active": 1}),
        None,
    ),
    (
        "requeued (the manager's job suspended), running there: not copied",
        SyncFacts(W1, {}, {"active": 1}, suspended=True),
        None,
    ),
    (
        "requeued, but it finished there unseen: its final state is copied",
        SyncFacts(W1, {}, {"succeeded": 1}, suspended=True, remote_ended=True),
        {"succeeded": 1},
    ),
]


@pytest.mark.parametrize(("situation", "facts", "patch"), ROWS, ids=[r[0] for r in ROWS])
def test_the_status_the_manager_job_takes(
    situation: str, facts: SyncFacts, patch: dict[str, Any] | None
) -> None:
    assert status_patch(facts) == patch, situation


def test_a_finished_run_is_recorded_from_its_job_else_from_its_end() -> None:
    ended = SyncFacts(W1, {}, {"succeeded": 1}, remote_ended=True)
    assert finish(ended, RunEnd(True, "x")) == [do.PatchJobStatus({"succeeded": 1})]
    no_job = SyncFacts(W1, {}, None)
    assert finish(no_job, RunEnd(False, "failed there")) == [
        do.FinishWorkload(False, "failed there")
    ]
    assert finish(no_job, None) == []
    assert finish(None, None) == [], "the worker not connected: nothing yet"


def test_where_the_pods_went_is_brought_back_before_the_jobs_status() -> None:
    """TAS: the copy's topology assignment goes to the manager's Workload first (assigned,
    then running), also for a run recorded from its end."""
    assigned = {"main": {"levels": ["kubernetes.io/hostname"], "slices": []}}
    back = do.CopyTopologyBack(W1, assigned, '{"cluster":"worker-1"}')
    running = SyncFacts(
        W1, {}, {"active": 2}, topology=assigned, topology_text='{"cluster":"worker-1"}'
    )
    assert sync(running) == [back, do.PatchJobStatus({"active": 2})]
    shown = SyncFacts(W1, {"active": 2}, {"active": 2})
    assert sync(shown) == [], "already shown and nothing new: no write"
    no_job = SyncFacts(W1, {}, None, topology=assigned, topology_text='{"cluster":"worker-1"}')
    assert finish(no_job, RunEnd(True, "done")) == [back, do.FinishWorkload(True, "done")]
