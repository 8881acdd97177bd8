"""Placing a workload, capacity-aware: pure. Two decisions, each with facts in and one verdict
out; the group read (``placing.PlacingReader``) gathers the facts and ``placement.place``
turns the verdicts into actions.

``judge_placement``: what about the copy already sent to one worker?

1. reachable, and its copy there is admitted (not evicted): it won (``WIN``);
2. reachable, the copy waits for quota there, the admission deadline has not passed: wait
   until the deadline (``WAIT``);
3. reachable, the copy not seen yet (our informer lags our own create), before the deadline:
   look again shortly (``WAIT``);
4. unreachable, and it might still admit and run the copy: wait until it surely cannot
   (``failover.may_move_at``; ``WAIT``);
5. otherwise (deadline passed, copy evicted, deactivated or gone, worker gone): give the
   worker up (``WITHDRAW``), deleting the copy when the worker can be reached, and choose
   again.

``choose``: where to send it now?

1. candidates not tried since the last full round; when none of them fits and some were
   tried, a new round starts with every candidate;
2. the best fitting one (``capacity.choose``: growing workers last, then best fit, then
   fewest waiting, then config order) gets the copy (``PLACE``);
3. none fits now, and some worker might later: wait for capacity (``PENDING``);
4. every worker says it can never hold it as configured: keep the manager quota for
   ``dispatch_deadline`` from when this was first seen (``PENDING``), then give the quota
   back with the reason (``GIVE_BACK``: the check goes Retry).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from manager.federation.decisions import capacity

MIN_WAIT = 0.1
"""Seconds: the shortest wait before looking again (a deadline just about to pass)."""
UNSEEN_RECHECK = 0.5
"""Seconds before looking again for a copy we created and our informer has not shown yet."""


class CopyState(StrEnum):
    ADMITTED = "admitted"
    """Admitted there, not evicted."""
    WAITING = "waiting"
    """Active, not evicted, not admitted yet."""
    STOPPED = "stopped"
    """Evicted or deactivated there."""
    ABSENT = "absent"
    """Not in our view of the worker."""


@dataclass(frozen=True, slots=True)
class Placed:
    """The worker a copy was sent to, and that copy, as seen now."""

    cluster: str
    deadline: float
    """Monotonic time by which the copy must be admitted."""
    reachable: bool
    copy: CopyState
    may_move_in: float = 0.0
    """Unreachable: seconds until its copy has surely stopped there (0 or less: already)."""


class Verdict(StrEnum):
    WIN = "win"
    WAIT = "wait"
    WITHDRAW = "withdraw"


@dataclass(frozen=True, slots=True)
class PlacementVerdict:
    do: Verdict
    after: float | None = None
    """WAIT: seconds before looking again."""
    delete_copy: bool = False
    """WITHDRAW: the worker can be reached, so its copy is deleted there."""


def judge_placement(placed: Placed, now: float) -> PlacementVerdict:
    if placed.reachable:
        if placed.copy is CopyState.ADMITTED:
            return PlacementVerdict(Verdict.WIN)
        if now < placed.deadline:
            if placed.copy is CopyState.WAITING:
                return PlacementVerdict(Verdict.WAIT, after=max(MIN_WAIT, placed.deadline - now))
            if placed.copy is CopyState.ABSENT:
                return PlacementVerdict(Verdict.WAIT, after=UNSEEN_RECHECK)
        return PlacementVerdict(Verdict.WITHDRAW, delete_copy=True)
    if placed.may_move_in > 0:
        return PlacementVerdict(Verdict.WAIT, after=max(MIN_WAIT, placed.may_move_in))
    return PlacementVerdict(Verdict.WITHDRAW)


@dataclass(frozen=True, slots=True)
class ChoosingFacts:
    now: float
    candidates: tuple[capacity.Candidate, ...]
    """Every worker of the config, evaluated for this workload, in config order."""
    tried: frozenset[str] = frozenset()
    """Workers withdrawn from since the last full round."""
    unplaceable_since: float | None = None
    """When every worker first said never (monotonic)."""
    dispatch_deadline: float = 0.0
    unblocked_in: float | None = None
    """Seconds until a worker it is blocked from opens again (None: none is blocked)."""


class Choose(StrEnum):
    PLACE = "place"
    PENDING = "pending"
    GIVE_BACK = "give-back"


@dataclass(frozen=True, slots=True)
class Choice:
    do: Choose
    message: str
    """The MultiKueue check's message (PENDING: Pending; GIVE_BACK: Retry)."""
    tried: frozenset[str]
    """The record's tried set from now on."""
    best: capacity.Candidate | None = None
    """PLACE: the worker that gets the copy."""
    unplaceable_since: float | None = None
    after: float | None = None
    """PENDING: seconds before looking again (None: when capacity changes)."""


def choose(facts: ChoosingFacts) -> Choice:
    candidates = list(facts.candidates)
    tried = facts.tried
    fresh = [c for c in candidates if c.cluster not in tried]
    if tried and not any(c.fits for c in fresh):
        tried, fresh = frozenset(), candidates  # every candidate had its turn: start over
    best = capacity.choose(fresh)
    if best is not None:
        return Choice(
            Choose.PLACE, f"dispatched to {best.cluster}: {best.reason}", tried, best=best
        )
    reasons = "; ".join(c.describe() for c in candidates) or "no worker clusters configured"
    if not capacity.never_placeable(candidates):
        return Choice(
            Choose.PENDING,
            f"no worker can admit it now: {reasons}",
            tried,
            after=facts.unblocked_in,
        )
    deadline = facts.dispatch_deadline
    since = facts.now if facts.unplaceable_since is None else facts.unplaceable_since
    left = deadline - (facts.now - since)
    if left > 0:
        return Choice(
            Choose.PENDING,
            f"no worker can ever admit it as configured: {reasons}; its quota is released "
            f"{deadline:g}s after this was first seen (dispatch deadline) unless one can",
            tried,
            unplaceable_since=since,
            after=left,
        )
    return Choice(
        Choose.GIVE_BACK,
        f"no worker could admit it within the dispatch deadline of {deadline:g}s: {reasons}; "
        "quota released, requeued",
        tried,
    )
