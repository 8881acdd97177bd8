"""Which of our objects on a worker are leftovers, one row per situation: the copy and its
manager workload in, the verdict out, when a lost worker returns and in the periodic sweep."""

from __future__ import annotations

import pytest

from manager.federation.decisions.leftovers import (
    CopyFacts,
    Moment,
    Verdict,
    WorkloadFacts,
    job_is_orphan,
    judge_copy,
    template_is_orphan,
)

W1, W2 = "worker-1", "worker-2"
RETURNING, SWEEP = Moment.RETURNING, Moment.SWEEP

GONE = WorkloadFacts(exists=False)
FINISHED = WorkloadFacts(finished=True, holds_quota=False)
RUNS_HERE = WorkloadFacts(runs_on=W1, placed_on=frozenset({W1}))
RUNS_THERE = WorkloadFacts(runs_on=W2, placed_on=frozenset({W2}))
SENT_HERE = WorkloadFacts(placed_on=frozenset({W1}))
SENT_THERE = WorkloadFacts(placed_on=frozenset({W2}))
BEING_PLACED = WorkloadFacts()
REQUEUED = WorkloadFacts(holds_quota=False)

COPY = CopyFacts(W1)
DONE = CopyFacts(W1, finished=True)
STOPPED = CopyFacts(W1, active=False)

ROWS: list[tuple[str, Moment, CopyFacts, WorkloadFacts, Verdict]] = [
    ("returning: it still runs here", RETURNING, COPY, RUNS_HERE, Verdict.KEEP),
    ("returning: a copy sent here, waiting", RETURNING, COPY, SENT_HERE, Verdict.KEEP),
    ("returning: moved to another worker meanwhile", RETURNING, COPY, RUNS_THERE, Verdict.DELETE),
    ("returning: sent elsewhere meanwhile", RETURNING, COPY, SENT_THERE, Verdict.DELETE),
    ("returning: being placed again (withdrawn)", RETURNING, COPY, BEING_PLACED, Verdict.DELETE),
    ("returning: requeued, quota given back", RETURNING, COPY, REQUEUED, Verdict.DELETE),
    (
        "returning: deactivated copy of a workload placed here",
        RETURNING,
        STOPPED,
        SENT_HERE,
        Verdict.DELETE,
    ),
    ("returning: the workload was deleted", RETURNING, COPY, GONE, Verdict.DELETE),
    ("returning: the workload finished", RETURNING, COPY, FINISHED, Verdict.DELETE),
    (
        "returning: finished here unseen, moved meanwhile: record it, never run it again",
        RETURNING,
        DONE,
        RUNS_THERE,
        Verdict.RECORD,
    ),
    ("returning: finished here and recorded already", RETURNING, DONE, FINISHED, Verdict.DELETE),
    ("sweep: it runs here", SWEEP, COPY, RUNS_HERE, Verdict.KEEP),
    ("sweep: AllAtOnce copy of a workload being placed", SWEEP, COPY, BEING_PLACED, Verdict.KEEP),
    ("sweep: it runs on another worker", SWEEP, COPY, RUNS_THERE, Verdict.DELETE),
    ("sweep: the workload was deleted", SWEEP, COPY, GONE, Verdict.DELETE),
    ("sweep: the workload finished", SWEEP, COPY, FINISHED, Verdict.DELETE),
    ("sweep: finished unseen", SWEEP, DONE, RUNS_THERE, Verdict.RECORD),
    ("sweep: a finished copy of a deleted workload", SWEEP, DONE, GONE, Verdict.DELETE),
]


@pytest.mark.parametrize(
    ("situation", "moment", "copy", "workload", "expected"), ROWS, ids=[r[0] for r in ROWS]
)
def test_judge_copy(
    situation: str, moment: Moment, copy: CopyFacts, workload: WorkloadFacts, expected: Verdict
) -> None:
    assert judge_copy(moment, copy, workload) is expected


@pytest.mark.parametrize(
    ("deleting", "copy_exists", "workload", "orphan"),
    [
        (False, False, GONE, True),
        (False, False, FINISHED, True),
        (False, False, RUNS_HERE, False),  # its copy is being recreated: not ours to judge
        (False, True, GONE, False),  # the copy is collected first, the Job goes with it
        (True, False, GONE, False),  # already being deleted
    ],
)
def test_job_is_orphan(
    deleting: bool, copy_exists: bool, workload: WorkloadFacts, orphan: bool
) -> None:
    assert job_is_orphan(deleting=deleting, copy_exists=copy_exists, workload=workload) is orphan


@pytest.mark.parametrize(
    ("deleting", "copy_exists", "workload", "orphan"),
    [
        (False, False, GONE, True),
        (False, False, FINISHED, True),
        (False, False, RUNS_THERE, True),  # moved: no run of it can be here
        (False, False, REQUEUED, True),  # waiting to be placed again: not here
        (False, False, RUNS_HERE, False),  # its copy is being recreated here
        (False, False, SENT_HERE, False),  # sent here, the copy not seen yet
        (False, True, GONE, False),  # the copy is collected first, its templates with it
        (True, False, GONE, False),  # already being deleted
    ],
)
def test_template_is_orphan(
    deleting: bool, copy_exists: bool, workload: WorkloadFacts, orphan: bool
) -> None:
    verdict = template_is_orphan(W1, deleting=deleting, copy_exists=copy_exists, workload=workload)
    assert verdict is orphan
