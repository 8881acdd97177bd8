"""What the dispatcher does about one workload (``decide.decide``): a group in, the actions
out, one row per situation. The groups are built as ``GroupReader.read`` builds them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from manager.api import constants as C
from manager.federation.decisions import actions as do
from manager.federation.decisions.choosing import CopyState, Placed
from manager.federation.decisions.decide import decide
from manager.federation.decisions.following import Connection, WorkerFacts
from manager.federation.decisions.group import WorkloadGroup
from manager.federation.decisions.jobsync import RunEnd, SyncFacts
from manager.federation.decisions.placement import PlacingFacts, Sent
from manager.federation.decisions.routing import WorkloadFacts
from manager.federation.decisions.winning import NameThere, WinFacts, win

W1, W2 = "worker-1", "worker-2"
WL: dict[str, Any] = {"metadata": {"name": "job-a", "namespace": "ml"}, "status": {}}
ADMITTED_COPY: dict[str, Any] = {
    "metadata": {"name": "job-a", "namespace": "ml"},
    "spec": {"active": True},
    "status": {
        "admission": {"clusterQueue": "gpu-cq"},
        "conditions": [{"type": C.QUOTA_RESERVED, "status": "True"}],
    },
}


def group(
    facts: WorkloadFacts,
    *,
    placed_on: WorkerFacts | None = None,
    copies: dict[str, Any] | None = None,
    finished_copy: str | None = None,
    ran_on: str = "",
    holders: tuple[str, ...] = (),
    ended_unseen: frozenset[str] = frozenset(),
    sync: SyncFacts | None = None,
    run_end: RunEnd | None = None,
) -> WorkloadGroup:
    return WorkloadGroup(
        "ml/job-a",
        WL,
        "multikueue",
        (W1, W2),
        copies or {},
        (finished_copy, ADMITTED_COPY) if finished_copy else None,
        facts,
        placed_on,
        ran_on,
        wins={W1: WIN_W1, W2: WIN_W2},
        holders=holders,
        ended_unseen=ended_unseen,
        sync=sync,
        run_end=run_end,
    )


WIN_W1 = WinFacts(W1, 0.0, job=NameThere("Job", "ml/job-a"))
WIN_W2 = WinFacts(W2, 0.0, others=(W1,), job=NameThere("Job", "ml/job-a"))
RUNNING = SyncFacts(W1, {}, {"active": 1})
SUCCEEDED = SyncFacts(W1, {"active": 1}, {"succeeded": 1}, remote_ended=True, counters=("active",))
CONNECTED = WorkerFacts(W1, Connection.CONNECTED)
SENT_ADMITTED = Sent(Placed(W1, 30.0, True, CopyState.ADMITTED))
READY = WorkloadFacts(check_state="Ready")

ROWS: list[tuple[str, WorkloadGroup, list[do.Action]]] = [
    ("gone", WorkloadGroup("ml/job-a"), [do.DeleteCopies(), do.ForgetRecord()]),
    (
        "gone, copies on two workers: both go",
        WorkloadGroup("ml/job-a", holders=(W1, W2)),
        [do.DeleteCopies((W1, W2)), do.ForgetRecord()],
    ),
    ("not federated", WorkloadGroup("ml/job-a", WL, facts=WorkloadFacts(federated=False)), []),
    (
        "finished, its run's objects kept for 20 s",
        group(
            WorkloadFacts(finished=True, holds_quota=False, retention_left=20.0),
            ran_on=W1,
            holders=(W1, W2),
        ),
        [do.DeleteCopies((W2,)), do.LookAgain(20.0)],
    ),
    (
        "finished, nothing kept",
        group(WorkloadFacts(finished=True, holds_quota=False)),
        [do.DeleteCopies(), do.ForgetRecord()],
    ),
    (
        "quota given back",
        group(WorkloadFacts(holds_quota=False), holders=(W1,)),
        [do.DeleteCopies((W1,)), do.ForgetRecord()],
    ),
    (
        "quota given back, its run on worker-2 ended unseen (read afresh): that copy stays",
        group(WorkloadFacts(holds_quota=False), holders=(W1, W2), ended_unseen=frozenset({W2})),
        [do.KeepEndedCopy(W2), do.DeleteCopies((W1,)), do.ForgetRecord()],
    ),
    (
        "not managed by MultiKueue",
        group(WorkloadFacts(rejection="The owner is not managed by Kueue: x")),
        [do.Reject("The owner is not managed by Kueue: x")],
    ),
    (
        "already rejected",
        group(WorkloadFacts(check_state="Rejected", rejection="x")),
        [],
    ),
    (
        "ran to its end on a worker while taken off it (requeued)",
        group(
            WorkloadFacts(holds_quota=False, finished_copy=True),
            finished_copy=W1,
            sync=SUCCEEDED,
        ),
        [do.RecordRanOn(W1, True), do.PatchJobStatus({"active": None, "succeeded": 1})],
    ),
    (
        "ran to its end, the check Ready",
        group(
            WorkloadFacts(check_state="Ready", finished_copy=True),
            finished_copy=W1,
            sync=SyncFacts(W1, {}, None),
            run_end=RunEnd(True, "done"),
        ),
        [do.RecordRanOn(W1), do.FinishWorkload(True, "done")],
    ),
    (
        "ran to its end unrecorded (a manager restart in between): it won",
        group(WorkloadFacts(finished_copy=True), finished_copy=W2),
        [do.NoteReserved(), *win(WIN_W2)],
    ),
    (
        "evicted by the manager",
        group(WorkloadFacts(check_state="Ready", evicted=True), holders=(W1,)),
        [do.NoteReserved(), do.DeleteCopies((W1,)), do.ResetJob(), do.ForgetRecord()],
    ),
    (
        "placed, its copy admitted there: follow it",
        group(READY, placed_on=CONNECTED, copies={W1: ADMITTED_COPY}, sync=RUNNING),
        [do.NoteReserved(), do.PatchJobStatus({"active": 1})],
    ),
    (
        "placed, its job's status already copied: nothing to write",
        group(
            READY,
            placed_on=CONNECTED,
            copies={W1: ADMITTED_COPY},
            sync=SyncFacts(W1, {"active": 1}, {"active": 1}),
        ),
        [do.NoteReserved()],
    ),
    (
        "placed, its copy gone",
        group(READY, placed_on=CONNECTED),
        [do.NoteReserved(), do.Retry("vanished", "the copy on worker worker-1 no longer exists")],
    ),
    (
        "placed on a draining worker",
        group(
            READY,
            placed_on=WorkerFacts(W1, Connection.CONNECTED, draining=True),
            copies={W1: ADMITTED_COPY},
        ),
        [do.NoteReserved(), do.Retry("drain", "worker worker-1 is draining; moving the workload")],
    ),
    (
        "placed on a lost worker, its copy not surely stopped yet",
        group(READY, placed_on=WorkerFacts(W1, Connection.LOST, may_move_in=7.0)),
        [do.NoteReserved(), do.LookAgain(7.0)],
    ),
    (
        "placed on a lost worker that surely fenced it",
        group(READY, placed_on=WorkerFacts(W1, Connection.LOST, may_move_in=-1.0)),
        [
            do.NoteReserved(),
            do.Retry("lost", "worker worker-1 lost (fenced itself); moving the workload"),
        ],
    ),
    (
        "pending: place it (``placement.place``, after the reservation is noted)",
        replace(group(WorkloadFacts()), placing=PlacingFacts(0.0, sent=SENT_ADMITTED)),
        [do.NoteReserved(), *win(WIN_W1)],
    ),
]


@pytest.mark.parametrize(("situation", "the_group", "actions"), ROWS, ids=[r[0] for r in ROWS])
def test_what_the_dispatcher_does(
    situation: str, the_group: WorkloadGroup, actions: list[do.Action]
) -> None:
    assert decide(the_group) == actions, situation
