"""Upstream's dispatchers, AllAtOnce and Incremental: which workers get a copy now, and which
admitted copy wins (pure). The group read (``placing.PlacingReader``) gathers the facts;
``placement.place`` turns the choice into actions.

- A winner, once chosen, stays chosen: a later reconcile may see another copy admitted as
  early (admission timestamps have 1 s resolution) before it sees the check Ready; choosing
  again would stop the job on the first winner and start it on a second one. Otherwise the
  copy admitted first wins (ties: the worker's name).
- AllAtOnce: a copy on every usable worker (eligible, ``eligibility.py``) that has none.
- Incremental: rounds of ``step`` workers, in MultiKueueConfig order; a round that has not
  produced a winner within ``round_timeout`` seconds adds the next ``step`` workers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ManyFacts:
    now: float
    usable: tuple[str, ...]
    """Eligible workers, in MultiKueueConfig order."""
    has_copy: frozenset[str] = frozenset()
    admitted: tuple[tuple[str, str], ...] = ()
    """(admitted at, worker) of each copy admitted and not evicted there."""
    winner: str | None = None
    """The winner chosen earlier, if any."""
    incremental: bool = False
    round: tuple[int, float] | None = None
    """Incremental: the current round (its number, from 1; when it started)."""
    step: int = 3
    round_timeout: float = 300.0


@dataclass(frozen=True, slots=True)
class ManyChoice:
    winner: str | None = None
    """A copy won: record it there (nothing else is sent)."""
    send_to: tuple[str, ...] = ()
    """Workers that get a copy now."""
    nominated: tuple[str, ...] = ()
    """Workers the check names as dispatched to, in MultiKueueConfig order."""
    round: tuple[int, float] | None = None
    """Incremental: the round to remember."""


def choose_many(facts: ManyFacts) -> ManyChoice:
    if facts.admitted:
        return ManyChoice(winner=facts.winner or min(facts.admitted)[1])
    usable = facts.usable
    round_ = None
    if facts.incremental:
        number, started = facts.round or (1, facts.now)
        if facts.now - started >= facts.round_timeout:
            number, started = number + 1, facts.now
        round_ = (number, started)
        usable = usable[: number * facts.step]
    return ManyChoice(
        send_to=tuple(n for n in usable if n not in facts.has_copy),
        nominated=usable,
        round=round_,
    )
