"""A copy won (``winning.win``): the facts about the winner in, the actions out, one row per
situation. Never-twice's guards on names are rows too: an object kfed did not create is
never touched (the worker is refused), an earlier workload's is waited for, ours is used."""

from __future__ import annotations

from typing import Any

import pytest

from manager.federation.decisions import actions as do
from manager.federation.decisions.samename import SameName
from manager.federation.decisions.winning import (
    EARLIER_RECHECK,
    REFUSED_RECHECK,
    SOURCE_GONE_RECHECK,
    NameThere,
    WinFacts,
    win,
)

NOW = 100.0
W1, W2 = "worker-1", "worker-2"
RCT = "ResourceClaimTemplate"
SOURCE: dict[str, Any] = {"metadata": {"name": "gpus", "namespace": "ml"}}
FREE = NameThere("Job", "ml/train")
FOREIGN_WHY = "a Job ml/train that kfed did not create already exists there (made by someone else)"


def facts(
    job: NameThere = FREE,
    *,
    others: tuple[str, ...] = (),
    has_job: bool = True,
    afresh: bool = False,
    templates: tuple[NameThere, ...] = (),
) -> WinFacts:
    return WinFacts(
        W1,
        NOW,
        others=others,
        has_job=has_job,
        job=job,
        job_read_afresh=afresh,
        templates=templates,
        foreign_object_recheck=60.0,
    )


MADE: list[do.Action] = [do.CreateJob(W1), do.SetReady(W1)]

ROWS: list[tuple[str, WinFacts, list[do.Action]]] = [
    (
        "the only copy: the Job is created there, the check set Ready",
        facts(),
        [do.NoteWinner(W1), *MADE],
    ),
    (
        "copies elsewhere too (AllAtOnce): every other copy goes first",
        facts(others=(W2,)),
        [do.NoteWinner(W1), do.DeleteOtherCopies((W2,)), *MADE],
    ),
    (
        "our Job for this very workload is there already (a retried win): used as it is",
        facts(NameThere("Job", "ml/train", SameName.OURS)),
        [do.NoteWinner(W1), do.SetReady(W1)],
    ),
    (
        "no manager job (deleted meanwhile): nothing to create, the check Ready",
        facts(has_job=False),
        [do.NoteWinner(W1), do.SetReady(W1)],
    ),
    (
        "an earlier workload's Job of that name is being deleted there: wait for it",
        facts(NameThere("Job", "ml/train", SameName.EARLIER, deleting=True)),
        [
            do.NoteWinner(W1),
            do.Wait(
                "admitted on worker-1; waiting for the Job ml/train of an earlier workload "
                "to be removed there (being deleted)"
            ),
            do.LookAgain(EARLIER_RECHECK),
        ],
    ),
    (
        "creating met AlreadyExists, read afresh: someone else's Job; the worker is refused",
        facts(
            NameThere("Job", "ml/train", SameName.FOREIGN, foreign_reason=FOREIGN_WHY), afresh=True
        ),
        [
            do.NoteWinner(W1),
            do.ForgetNameTaken(W1),
            do.Block(W1, FOREIGN_WHY, NOW + 60.0),
            do.Refuse(W1),
            do.Wait(f"not placed on worker-1: {FOREIGN_WHY}"),
            do.LookAgain(REFUSED_RECHECK),
        ],
    ),
    (
        "creating met AlreadyExists, read afresh: gone meanwhile; created now",
        facts(afresh=True),
        [do.NoteWinner(W1), do.ForgetNameTaken(W1), *MADE],
    ),
    (
        "creating met AlreadyExists, read afresh: an earlier workload's; still waited for",
        facts(NameThere("Job", "ml/train", SameName.EARLIER), afresh=True),
        [
            do.NoteWinner(W1),
            do.Wait(
                "admitted on worker-1; waiting for the Job ml/train of an earlier workload "
                "to be removed there (not yet collected)"
            ),
            do.LookAgain(EARLIER_RECHECK),
        ],
    ),
    (
        "its pods claim devices: the template first, then the Job",
        facts(templates=(NameThere(RCT, "ml/gpus", source=SOURCE),)),
        [do.NoteWinner(W1), do.CreateClaimTemplate(W1, SOURCE), *MADE],
    ),
    (
        "its template there already, ours: only the Job",
        facts(templates=(NameThere(RCT, "ml/gpus", SameName.OURS, source=SOURCE),)),
        [do.NoteWinner(W1), *MADE],
    ),
    (
        "its template gone from the manager: wait, nothing created",
        facts(templates=(NameThere(RCT, "ml/gpus"),)),
        [
            do.NoteWinner(W1),
            do.Wait(
                "admitted on worker-1; its ResourceClaimTemplate ml/gpus is gone from the "
                "manager: its pods could not claim their devices there (create it again)"
            ),
            do.LookAgain(SOURCE_GONE_RECHECK),
        ],
    ),
    (
        "a template of that name someone else made: the worker is refused",
        facts(
            templates=(
                NameThere(RCT, "ml/gpus", SameName.FOREIGN, foreign_reason="theirs", source=SOURCE),
            )
        ),
        [
            do.NoteWinner(W1),
            do.Block(W1, "theirs", NOW + 60.0),
            do.Refuse(W1),
            do.Wait("not placed on worker-1: theirs"),
            do.LookAgain(REFUSED_RECHECK),
        ],
    ),
]


@pytest.mark.parametrize(("situation", "the_facts", "actions"), ROWS, ids=[r[0] for r in ROWS])
def test_what_a_win_does(situation: str, the_facts: WinFacts, actions: list[do.Action]) -> None:
    assert win(the_facts) == actions, situation
