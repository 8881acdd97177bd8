"""Capacity-aware placing, one row per situation (upstream MultiKueue's ``workload_test.go``
is the model): facts in, verdict or choice out, with the check's message."""

from __future__ import annotations

import pytest

from manager.federation.decisions.capacity import Candidate
from manager.federation.decisions.choosing import (
    MIN_WAIT,
    UNSEEN_RECHECK,
    Choice,
    Choose,
    ChoosingFacts,
    CopyState,
    Placed,
    PlacementVerdict,
    Verdict,
    choose,
    judge_placement,
)

NOW = 1000.0
W1, W2, W3 = "worker-1", "worker-2", "worker-3"


def placed(
    copy: CopyState, *, reachable: bool = True, deadline: float = NOW + 30, may_move_in: float = 0.0
) -> Placed:
    return Placed(W1, deadline, reachable, copy, may_move_in)


PLACEMENT_ROWS: list[tuple[str, Placed, PlacementVerdict]] = [
    ("admitted there: it won", placed(CopyState.ADMITTED), PlacementVerdict(Verdict.WIN)),
    (
        "admitted there even after the deadline: it still won (never delete an admitted copy)",
        placed(CopyState.ADMITTED, deadline=NOW - 1),
        PlacementVerdict(Verdict.WIN),
    ),
    (
        "waiting for quota there, before the deadline: wait until the deadline",
        placed(CopyState.WAITING, deadline=NOW + 12),
        PlacementVerdict(Verdict.WAIT, after=12),
    ),
    (
        "waiting, deadline about to pass: wait at least the minimum",
        placed(CopyState.WAITING, deadline=NOW + 0.001),
        PlacementVerdict(Verdict.WAIT, after=MIN_WAIT),
    ),
    (
        "our own create not seen yet: look again shortly",
        placed(CopyState.ABSENT),
        PlacementVerdict(Verdict.WAIT, after=UNSEEN_RECHECK),
    ),
    (
        "not admitted in time: withdraw and delete the copy",
        placed(CopyState.WAITING, deadline=NOW),
        PlacementVerdict(Verdict.WITHDRAW, delete_copy=True),
    ),
    (
        "copy never seen and the deadline passed: withdraw (delete whatever may be there)",
        placed(CopyState.ABSENT, deadline=NOW - 1),
        PlacementVerdict(Verdict.WITHDRAW, delete_copy=True),
    ),
    (
        "evicted there (preempted) before the deadline: withdraw at once",
        placed(CopyState.STOPPED),
        PlacementVerdict(Verdict.WITHDRAW, delete_copy=True),
    ),
    (
        "worker lost, its copy might still be admitted and run: wait until it surely cannot",
        placed(CopyState.WAITING, reachable=False, may_move_in=7),
        PlacementVerdict(Verdict.WAIT, after=7),
    ),
    (
        "worker lost and surely stopped: withdraw without deleting (it cannot be reached)",
        placed(CopyState.WAITING, reachable=False, may_move_in=0),
        PlacementVerdict(Verdict.WITHDRAW),
    ),
    (
        "worker lost, even an admitted copy is not a win (we cannot create the Job there)",
        placed(CopyState.ADMITTED, reachable=False, may_move_in=3),
        PlacementVerdict(Verdict.WAIT, after=3),
    ),
]


@pytest.mark.parametrize(
    ("situation", "facts", "expected"), PLACEMENT_ROWS, ids=[r[0] for r in PLACEMENT_ROWS]
)
def test_judge_placement(situation: str, facts: Placed, expected: PlacementVerdict) -> None:
    assert judge_placement(facts, NOW) == expected


def fits(cluster: str, score: float = 0.5) -> Candidate:
    return Candidate(
        cluster, True, "fits in gpu-cq (4 nvidia.com/gpu free)", "gpu-cq", score=(score, 0, 0)
    )


def full(cluster: str) -> Candidate:
    return Candidate(
        cluster, False, "insufficient nvidia.com/gpu in flavor h100: 2 requested, 0 free"
    )


def never(cluster: str) -> Candidate:
    return Candidate(cluster, False, "no LocalQueue ns/q", never=True)


def facts(*candidates: Candidate, **kw: object) -> ChoosingFacts:
    return ChoosingFacts(now=NOW, candidates=tuple(candidates), dispatch_deadline=60, **kw)  # type: ignore[arg-type]


CHOICE_ROWS: list[tuple[str, ChoosingFacts, Choose, str | None, frozenset[str], str]] = [
    (
        "the tightest fit wins",
        facts(fits(W1, 0.8), fits(W2, 0.2)),
        Choose.PLACE,
        W2,
        frozenset(),
        "dispatched to worker-2: fits in gpu-cq",
    ),
    (
        "a worker withdrawn from this round is skipped while another fits",
        facts(fits(W1, 0.1), fits(W2, 0.9), tried=frozenset({W1})),
        Choose.PLACE,
        W2,
        frozenset({W1}),
        "dispatched to worker-2",
    ),
    (
        "every fitting worker tried: a new round starts with all of them",
        facts(fits(W1, 0.1), full(W2), tried=frozenset({W1})),
        Choose.PLACE,
        W1,
        frozenset(),
        "dispatched to worker-1",
    ),
    (
        "none fits now, one might later: pending with every worker's reason",
        facts(full(W1), never(W2), unblocked_in=4.0),
        Choose.PENDING,
        None,
        frozenset(),
        "no worker can admit it now: worker-1: insufficient",
    ),
    (
        "no worker configured: never placeable",
        facts(),
        Choose.PENDING,
        None,
        frozenset(),
        "no worker can ever admit it as configured: no worker clusters configured",
    ),
    (
        "every worker says never, first seen now: keep the quota for the dispatch deadline",
        facts(never(W1), never(W2)),
        Choose.PENDING,
        None,
        frozenset(),
        "its quota is released 60s after this was first seen",
    ),
    (
        "every worker says never, past the dispatch deadline: give the quota back",
        facts(never(W1), never(W2), unplaceable_since=NOW - 61),
        Choose.GIVE_BACK,
        None,
        frozenset(),
        "no worker could admit it within the dispatch deadline of 60s",
    ),
]


@pytest.mark.parametrize(
    ("situation", "given", "do", "cluster", "tried", "message"),
    CHOICE_ROWS,
    ids=[r[0] for r in CHOICE_ROWS],
)
def test_choose(
    situation: str,
    given: ChoosingFacts,
    do: Choose,
    cluster: str | None,
    tried: frozenset[str],
    message: str,
) -> None:
    choice = choose(given)
    assert choice.do is do
    assert (choice.best.cluster if choice.best else None) == cluster
    assert choice.tried == tried
    assert message in choice.message


def test_pending_for_capacity_looks_again_when_a_block_ends_and_forgets_never() -> None:
    choice = choose(facts(full(W1), unblocked_in=4.0, unplaceable_since=NOW - 5))
    assert choice == Choice(Choose.PENDING, choice.message, frozenset(), after=4.0)
    assert choice.unplaceable_since is None  # one worker may admit it later: the clock resets


def test_never_placeable_keeps_counting_from_when_it_was_first_seen() -> None:
    choice = choose(facts(never(W1), unplaceable_since=NOW - 45))
    assert choice.do is Choose.PENDING
    assert choice.unplaceable_since == NOW - 45
    assert choice.after == pytest.approx(15)


def test_a_lost_worker_does_not_count_as_never() -> None:
    lost = Candidate(W2, False, "not connected")
    choice = choose(facts(never(W1), lost, unplaceable_since=NOW - 100))
    assert choice.do is Choose.PENDING and choice.unplaceable_since is None
