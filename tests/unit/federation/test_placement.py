"""Placing a workload whose check is Pending (``placement.place``): the placement facts the
group read gathers in, the actions out, one row per situation (upstream MultiKueue's
``workload_test.go`` is the model). ``test_choosing.py`` and ``test_many.py`` cover the
verdicts themselves; these rows cover what each verdict becomes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from manager.federation.decisions import actions as do
from manager.federation.decisions.capacity import Candidate
from manager.federation.decisions.choosing import ChoosingFacts, CopyState, Placed
from manager.federation.decisions.many import ManyFacts
from manager.federation.decisions.placement import (
    MANY_RECHECK,
    SEND_FAILED_RETRY,
    PlacingFacts,
    Sent,
    needs_choice,
    place,
)
from manager.federation.decisions.winning import NameThere, WinFacts, win
from manager.federation.settings import DispatchMode

NOW = 1000.0
W1, W2, W3 = "worker-1", "worker-2", "worker-3"
FITS_W2 = Candidate(W2, True, "fits in gpu-cq", worker_cluster_queue="gpu-cq")
FULL_W1 = Candidate(W1, False, "no room in gpu-cq")
NEVER_W1 = Candidate(W1, False, "too small", never=True)
NEVER_W2 = Candidate(W2, False, "too small", never=True)
USAGE = {("a100", "nvidia.com/gpu"): 2}
WIN_W1 = WinFacts(W1, NOW, job=NameThere("Job", "ml/job-a"))
WIN_W2 = WinFacts(W2, NOW, others=(W1, W3), job=NameThere("Job", "ml/job-a"))
WINS = {W1: WIN_W1, W2: WIN_W2}


def sent(
    copy: CopyState,
    *,
    reachable: bool = True,
    deadline: float = NOW + 30,
    may_move_in: float = 0.0,
    recovered: bool = False,
    nominate_at: float | None = None,
) -> Sent:
    return Sent(
        Placed(W1, deadline, reachable, copy, may_move_in),
        recovered,
        nominate_at,
        "dispatched to worker-1: fits",
    )


def facts(
    sent_: Sent | None = None,
    *candidates: Candidate,
    tried: frozenset[str] = frozenset(),
    unplaceable_since: float | None = None,
    untold: tuple[tuple[str, str], ...] = (),
    taken: tuple[tuple[str, str], ...] = (),
) -> PlacingFacts:
    return PlacingFacts(
        NOW,
        sent=sent_,
        choosing=ChoosingFacts(NOW, candidates, tried, unplaceable_since, dispatch_deadline=60.0),
        usage=USAGE,
        untold_refusals=untold,
        copies_taken=taken,
        foreign_object_recheck=60.0,
        admission_timeout=30.0,
        nominate_after=1.0,
    )


def send_w2(tried_before: tuple[str, ...] = ()) -> do.Send:
    return do.Send(
        cluster=W2,
        worker_cluster_queue="gpu-cq",
        reason="fits in gpu-cq",
        message="dispatched to worker-2: fits in gpu-cq",
        usage={("gpu-cq", "a100", "nvidia.com/gpu"): 2},
        deadline=NOW + 30,
        nominate_at=NOW + 1,
        candidates=(FULL_W1.describe(), FITS_W2.describe()),
        tried_before=tried_before,
        then_after=1.0,
        retry_after=SEND_FAILED_RETRY,
    )


NO_ROOM = f"no worker can admit it now: {FULL_W1.describe()}"
NEVER = f"{NEVER_W1.describe()}; {NEVER_W2.describe()}"

ROWS: list[tuple[str, PlacingFacts, list[do.Action]]] = [
    (
        "nothing sent, one worker fits: send it one copy",
        facts(None, FULL_W1, FITS_W2),
        [do.NoteChoice(frozenset(), None, False), send_w2()],
    ),
    (
        "nothing sent, no worker fits now: wait for capacity",
        facts(None, FULL_W1),
        [do.NoteChoice(frozenset(), None, True), do.Wait(NO_ROOM)],
    ),
    (
        "every worker says never: keep the quota until the dispatch deadline",
        facts(None, NEVER_W1, NEVER_W2),
        [
            do.NoteChoice(frozenset(), NOW, True),
            do.Wait(
                f"no worker can ever admit it as configured: {NEVER}; its quota is released "
                "60s after this was first seen (dispatch deadline) unless one can"
            ),
            do.LookAgain(60.0),
        ],
    ),
    (
        "every worker says never, past the dispatch deadline: give the quota back",
        facts(None, NEVER_W1, NEVER_W2, unplaceable_since=NOW - 61),
        [
            do.NoteChoice(frozenset(), None, True),
            do.GiveBack(
                f"no worker could admit it within the dispatch deadline of 60s: {NEVER}; "
                "quota released, requeued"
            ),
        ],
    ),
    (
        "its copy admitted there: it won",
        facts(sent(CopyState.ADMITTED)),
        [*win(WIN_W1)],
    ),
    (
        "after a restart, a copy found admitted: follow it, it won",
        facts(sent(CopyState.ADMITTED, recovered=True)),
        [do.RecoverPlacement(W1, NOW + 30), *win(WIN_W1)],
    ),
    (
        "its copy waits for quota there: look again at the deadline",
        facts(sent(CopyState.WAITING)),
        [do.LookAgain(30.0)],
    ),
    (
        "its copy waits, the nomination due sooner: look again then",
        facts(sent(CopyState.WAITING, nominate_at=NOW + 1)),
        [do.LookAgain(1.0)],
    ),
    (
        "its copy has waited nominate_after: name the worker on the check, once",
        facts(sent(CopyState.WAITING, nominate_at=NOW - 0.1)),
        [do.Nominate((W1,), "dispatched to worker-1: fits", once=True), do.LookAgain(30.0)],
    ),
    (
        "not admitted by the deadline: withdraw it (deleted there) and send it elsewhere",
        facts(sent(CopyState.WAITING, deadline=NOW - 1), FULL_W1, FITS_W2),
        [
            do.Withdraw(W1, delete=True),
            do.NoteChoice(frozenset({W1}), None, False),
            send_w2(tried_before=(W1,)),
        ],
    ),
    (
        "its worker lost and it may still run there: wait until it surely cannot",
        facts(sent(CopyState.ADMITTED, reachable=False, may_move_in=7.0)),
        [do.LookAgain(7.0)],
    ),
    (
        "its worker lost long enough: withdraw it (nothing to delete), nothing fits now",
        facts(sent(CopyState.WAITING, reachable=False, may_move_in=-1.0), FULL_W1),
        [
            do.Withdraw(W1, delete=False),
            # Every candidate had its turn: a new round starts.
            do.NoteChoice(frozenset(), None, True),
            do.Wait(NO_ROOM),
        ],
    ),
    (
        "its copy's name was taken there, read afresh: ours after all; followed as sent",
        facts(sent(CopyState.WAITING), taken=((W1, ""),)),
        [do.ForgetNameTaken(W1, copy=True), do.LookAgain(30.0)],
    ),
    (
        "its copy's name was taken there by a Workload kfed did not create: never touched, "
        "the worker blocked, the copy given up, sent elsewhere",
        facts(
            replace(sent(CopyState.ABSENT), foreign="someone else's"),
            FULL_W1,
            FITS_W2,
            taken=((W1, "someone else's"),),
        ),
        [
            do.ForgetNameTaken(W1, copy=True),
            do.Block(W1, "someone else's", NOW + 60.0),
            do.Withdraw(W1, delete=False),
            do.NoteChoice(frozenset({W1}), None, False),
            send_w2(tried_before=(W1,)),
        ],
    ),
    (
        "a worker's allowed-references refuses it: told first, once",
        facts(None, FULL_W1, FITS_W2, untold=((W1, "Secret x is not allowed"),)),
        [
            do.TellRefusal(W1, "Secret x is not allowed"),
            do.NoteChoice(frozenset(), None, False),
            send_w2(),
        ],
    ),
]


@pytest.mark.parametrize(("situation", "the_facts", "actions"), ROWS, ids=[r[0] for r in ROWS])
def test_capacity_aware_placing(
    situation: str, the_facts: PlacingFacts, actions: list[do.Action]
) -> None:
    assert place(the_facts, WINS) == actions, situation


def many(
    mode: DispatchMode,
    reachable: frozenset[str] = frozenset(),
    *,
    has_copy: frozenset[str] = frozenset(),
    admitted: tuple[tuple[str, str], ...] = (),
) -> PlacingFacts:
    many_facts = ManyFacts(
        now=NOW,
        usable=(W1, W2, W3),
        has_copy=has_copy,
        admitted=admitted,
        incremental=mode is DispatchMode.INCREMENTAL,
        step=1,
    )
    return PlacingFacts(NOW, mode, many=many_facts, reachable=reachable, unblocked_in=None)


MANY_ROWS: list[tuple[str, PlacingFacts, list[do.Action]]] = [
    (
        "AllAtOnce: a copy on every usable worker",
        many(DispatchMode.ALL_AT_ONCE),
        [
            do.NoteRound(None),
            do.SendCopies((W1, W2, W3)),
            do.Nominate((W1, W2, W3), "dispatched to worker-1, worker-2, worker-3"),
        ],
    ),
    (
        "AllAtOnce: every worker holds one already: nothing sent, the check says where",
        many(DispatchMode.ALL_AT_ONCE, has_copy=frozenset({W1, W2, W3})),
        [
            do.NoteRound(None),
            do.Nominate((W1, W2, W3), "dispatched to worker-1, worker-2, worker-3"),
        ],
    ),
    (
        "Incremental: the first round's worker, looked at again for the round's timeout",
        many(DispatchMode.INCREMENTAL),
        [
            do.NoteRound((1, NOW)),
            do.SendCopies((W1,)),
            do.Nominate((W1,), "dispatched to worker-1"),
            do.LookAgain(MANY_RECHECK),
        ],
    ),
    (
        "a copy admitted on a connected worker: it won",
        many(DispatchMode.ALL_AT_ONCE, frozenset({W2}), admitted=(("t1", W2),)),
        win(WIN_W2),
    ),
    (
        "a copy admitted on a worker not connected now: look again shortly",
        many(DispatchMode.ALL_AT_ONCE, admitted=(("t1", W2),)),
        [do.LookAgain(MANY_RECHECK)],
    ),
]


@pytest.mark.parametrize(
    ("situation", "the_facts", "actions"), MANY_ROWS, ids=[r[0] for r in MANY_ROWS]
)
def test_all_at_once_and_incremental(
    situation: str, the_facts: PlacingFacts, actions: list[do.Action]
) -> None:
    assert place(the_facts, WINS) == actions, situation


def test_every_worker_is_evaluated_only_when_a_copy_is_to_be_sent() -> None:
    assert needs_choice(None, NOW)
    assert not needs_choice(sent(CopyState.WAITING), NOW)
    assert not needs_choice(sent(CopyState.ADMITTED), NOW)
    assert needs_choice(sent(CopyState.WAITING, deadline=NOW - 1), NOW)
    assert needs_choice(sent(CopyState.STOPPED), NOW)
    assert needs_choice(replace(sent(CopyState.WAITING), foreign="theirs"), NOW)
