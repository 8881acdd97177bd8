"""Upstream's AllAtOnce and Incremental dispatchers (``many.choose_many``), one row each."""

from __future__ import annotations

import pytest

from manager.federation.decisions.many import ManyChoice, ManyFacts, choose_many

W = ("w1", "w2", "w3", "w4", "w5")
ROWS: list[tuple[str, ManyFacts, ManyChoice]] = [
    (
        "all at once: a copy on every usable worker",
        ManyFacts(now=0.0, usable=W[:3]),
        ManyChoice(send_to=W[:3], nominated=W[:3]),
    ),
    (
        "all at once: workers that have a copy get none again",
        ManyFacts(now=0.0, usable=W[:3], has_copy=frozenset({"w2"})),
        ManyChoice(send_to=("w1", "w3"), nominated=W[:3]),
    ),
    (
        "the copy admitted first wins",
        ManyFacts(
            now=0.0,
            usable=W,
            admitted=(("2026-12-03T10:00:02Z", "w1"), ("2026-12-03T10:00:01Z", "w3")),
        ),
        ManyChoice(winner="w3"),
    ),
    (
        "a winner once chosen stays chosen, however the timestamps read later",
        ManyFacts(now=0.0, usable=W, admitted=(("2026-12-03T10:00:01Z", "w1"),), winner="w3"),
        ManyChoice(winner="w3"),
    ),
    (
        "incremental: the first round is the first step of workers",
        ManyFacts(now=5.0, usable=W, incremental=True, step=2),
        ManyChoice(send_to=("w1", "w2"), nominated=("w1", "w2"), round=(1, 5.0)),
    ),
    (
        "incremental: a round within its timeout adds nobody",
        ManyFacts(
            now=100.0,
            usable=W,
            incremental=True,
            step=2,
            round=(1, 5.0),
            round_timeout=300.0,
            has_copy=frozenset({"w1", "w2"}),
        ),
        ManyChoice(send_to=(), nominated=("w1", "w2"), round=(1, 5.0)),
    ),
    (
        "incremental: a round past its timeout adds the next step",
        ManyFacts(
            now=305.0,
            usable=W,
            incremental=True,
            step=2,
            round=(1, 5.0),
            round_timeout=300.0,
            has_copy=frozenset({"w1", "w2"}),
        ),
        ManyChoice(send_to=("w3", "w4"), nominated=("w1", "w2", "w3", "w4"), round=(2, 305.0)),
    ),
    ("no usable worker", ManyFacts(now=0.0, usable=()), ManyChoice()),
]


@pytest.mark.parametrize(("situation", "facts", "choice"), ROWS, ids=[r[0] for r in ROWS])
def test_which_workers_get_a_copy_and_who_wins(
    situation: str, facts: ManyFacts, choice: ManyChoice
) -> None:
    assert choose_many(facts) == choice, situation
