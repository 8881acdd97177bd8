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
from manager.federation.decisions.placement import PlacingFacts, Sent
from manager.federation.decisions.routing import WorkloadFacts

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
    )


CONNECTED = WorkerFacts(W1, Connection.CONNECTED)
SENT_ADMITTED = Sent(Placed(W1, 30.0, True, CopyState.ADMITTED))
READY = WorkloadFacts(check_state="Ready")

ROWS: list[tuple[str, WorkloadGroup, list[do.Action]]] = [
    ("gone", WorkloadGroup("ml/job-a"), [do.DeleteCopies(), do.ForgetRecord()]),
    ("not federated", WorkloadGroup("ml/job-a", WL, facts=WorkloadFacts(federated=False)), []),
    (
        "finished, its run's objects kept for 20 s",
        group(WorkloadFacts(finished=True, holds_quota=False, retention_left=20.0), ran_on=W1),
        [do.DeleteCopies(keep=W1), do.LookAgain(20.0)],
    ),
    (
        "finished, nothing kept",
        group(WorkloadFacts(finished=True, holds_quota=False)),
        [do.DeleteCopies(), do.ForgetRecord()],
    ),
    (
        "quota given back",
        group(WorkloadFacts(holds_quota=False)),
        [do.DeleteCopies(), do.ForgetRecord()],
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
        group(WorkloadFacts(holds_quota=False, finished_copy=True), finished_copy=W1),
        [do.RecordFinished(W1)],
    ),
    (
        "ran to its end, the check Ready",
        group(WorkloadFacts(check_state="Ready", finished_copy=True), finished_copy=W1),
        [do.RecordFinished(W1)],
    ),
    (
        "ran to its end unrecorded (a manager restart in between): it won",
        group(WorkloadFacts(finished_copy=True), finished_copy=W2),
        [do.NoteReserved(), do.Win(W2)],
    ),
    (
        "evicted by the manager",
        group(WorkloadFacts(check_state="Ready", evicted=True)),
        [do.NoteReserved(), do.DeleteCopies(), do.ResetJob(), do.ForgetRecord()],
    ),
    (
        "placed, its copy admitted there: follow it",
        group(READY, placed_on=CONNECTED, copies={W1: ADMITTED_COPY}),
        [do.NoteReserved(), do.SyncStatus(W1)],
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
        [do.NoteReserved(), do.Win(W1)],
    ),
]


@pytest.mark.parametrize(("situation", "the_group", "actions"), ROWS, ids=[r[0] for r in ROWS])
def test_what_the_dispatcher_does(
    situation: str, the_group: WorkloadGroup, actions: list[do.Action]
) -> None:
    assert decide(the_group) == actions, situation
