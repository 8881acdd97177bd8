"""Placing a workload whose MultiKueue check is Pending: pure. The facts the group read
gathered (``PlacingFacts``) in, the actions out (``actions.py``), carried out by the applier.

Capacity-aware (kfed's default): the copy already sent is judged first
(``choosing.judge_placement``: won, wait, or withdraw it); with none, or once withdrawn,
``choosing.choose`` says where to send it now (one copy to the best-fitting worker, wait for
capacity, or give the quota back after the dispatch deadline). A copy still waiting after
``nominate_after`` is named on the check once.

AllAtOnce / Incremental (upstream's modes): ``many.choose_many`` says which admitted copy
won, or which workers get a copy now; the check names every worker holding one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from manager.federation.decisions import actions as do
from manager.federation.decisions import capacity, choosing, many, topology, winning
from manager.federation.settings import DispatchMode

SEND_FAILED_RETRY = 1.0
"""Seconds before placing again when a copy could not be created on the chosen worker."""
MANY_RECHECK = 1.0
"""Seconds between looks at an Incremental placement (its round may time out), and before
looking again at a winner whose worker is not connected."""


@dataclass(frozen=True, slots=True)
class Sent:
    """The copy already sent to one worker (capacity-aware), as the record and the worker's
    informers show it."""

    placed: choosing.Placed
    recovered: bool = False
    """The record had none (a manager restart): a copy was found on ``placed.cluster``."""
    nominate_at: float | None = None
    """When to name the worker on the check if the copy still waits (None: not to)."""
    waiting_message: str = ""
    foreign: str = ""
    """Creating it met a same-named Workload kfed did not create there (read afresh): who
    made it. The copy is given up without touching that object."""


@dataclass(frozen=True, slots=True)
class PlacingFacts:
    now: float
    mode: DispatchMode = DispatchMode.CAPACITY_AWARE
    sent: Sent | None = None
    choosing: choosing.ChoosingFacts | None = None
    """Every worker evaluated: read only when a copy is to be sent (``needs_choice``)."""
    usage: Mapping[tuple[str, str], int] | None = None
    """What it takes of the manager's quota, (flavor, resource) -> amount."""
    many: many.ManyFacts | None = None
    """AllAtOnce / Incremental."""
    reachable: frozenset[str] = frozenset()
    """AllAtOnce / Incremental: the workers connected now, of those holding a copy."""
    untold_refusals: tuple[tuple[str, str], ...] = ()
    """(worker, why) its ``kfed.io/allowed-references`` refuses it, not told yet."""
    copies_taken: tuple[tuple[str, str], ...] = ()
    """(worker, who made it: "" when ours or gone) where creating its copy met AlreadyExists,
    the name read afresh. A foreign one blocks the worker (the read counted it blocked)."""
    foreign_object_recheck: float = 60.0
    unblocked_in: float | None = None
    """Seconds until a worker it is blocked from opens again (None: none is blocked)."""
    admission_timeout: float = 30.0
    nominate_after: float = 1.0
    expected_topology: Mapping[str, topology.Held] = field(default_factory=dict)
    """TAS: per worker that fits, what a copy sent there is expected to take of its
    domains (``topology.expected``)."""


def needs_choice(sent: Sent | None, now: float) -> bool:
    """Whether the group read must evaluate every worker: no copy sent, or the one sent is
    to be withdrawn (evaluating every worker is the costly read)."""
    if sent is None or sent.foreign:
        return True
    return choosing.judge_placement(sent.placed, now).do is choosing.Verdict.WITHDRAW


def place(facts: PlacingFacts, wins: Mapping[str, winning.WinFacts]) -> list[do.Action]:
    """The actions that place the workload now, in order; a copy that won becomes the one
    run by ``winning.win`` (``wins``: the facts of each worker whose copy could win)."""
    told: list[do.Action] = [do.TellRefusal(w, why) for w, why in facts.untold_refusals]
    for cluster, foreign in facts.copies_taken:
        told.append(do.ForgetNameTaken(cluster, copy=True))
        if foreign:
            # Never touched; the worker is looked at again after the recheck time.
            told.append(do.Block(cluster, foreign, facts.now + facts.foreign_object_recheck))
    if facts.mode is DispatchMode.CAPACITY_AWARE:
        return told + _capacity_aware(facts, wins)
    return told + _many(facts, wins)


def _capacity_aware(facts: PlacingFacts, wins: Mapping[str, winning.WinFacts]) -> list[do.Action]:
    result: list[do.Action] = []
    tried: frozenset[str] = frozenset()
    sent = facts.sent
    if sent is not None:
        cluster = sent.placed.cluster
        if sent.recovered:
            result.append(do.RecoverPlacement(cluster, sent.placed.deadline))
        verdict = choosing.judge_placement(sent.placed, facts.now)
        if sent.foreign:
            verdict = choosing.PlacementVerdict(choosing.Verdict.WITHDRAW)
        match verdict.do:
            case choosing.Verdict.WIN:
                return result + winning.win(wins[cluster])
            case choosing.Verdict.WAIT:
                return result + _nominate_if_waiting(facts, sent, verdict.after)
        result.append(do.Withdraw(cluster, delete=verdict.delete_copy))
        tried = frozenset({cluster})
    assert facts.choosing is not None, "the group read evaluates every worker (needs_choice)"
    chosen = replace(facts.choosing, tried=facts.choosing.tried | tried)
    choice = choosing.choose(chosen)
    waiting = choice.do is not choosing.Choose.PLACE
    result.append(do.NoteChoice(choice.tried, choice.unplaceable_since, waiting))
    match choice.do:
        case choosing.Choose.PENDING:
            result.append(do.Wait(choice.message))
            if choice.after is not None:
                result.append(do.LookAgain(choice.after))
            return result
        case choosing.Choose.GIVE_BACK:
            return [*result, do.GiveBack(choice.message)]
    best = choice.best
    assert best is not None  # PLACE names its worker
    return [*result, _send(facts, chosen, best, choice.message)]


def _send(
    facts: PlacingFacts,
    chosen: choosing.ChoosingFacts,
    best: capacity.Candidate,
    message: str,
) -> do.Send:
    usage = {
        (best.worker_cluster_queue, best.flavors.get(flavor, flavor), resource): amount
        for (flavor, resource), amount in (facts.usage or {}).items()
    }
    return do.Send(
        cluster=best.cluster,
        worker_cluster_queue=best.worker_cluster_queue,
        reason=best.reason,
        message=message,
        usage=usage,
        deadline=facts.now + facts.admission_timeout,
        nominate_at=facts.now + facts.nominate_after,
        candidates=tuple(c.describe() for c in chosen.candidates),
        tried_before=tuple(sorted(chosen.tried)),
        then_after=facts.nominate_after,
        retry_after=SEND_FAILED_RETRY,
        topology=facts.expected_topology.get(best.cluster, {}),
    )


def _nominate_if_waiting(facts: PlacingFacts, sent: Sent, after: float | None) -> list[do.Action]:
    """A copy not admitted yet: once it has waited ``nominate_after``, name its worker on
    the check (its message, ``nominatedClusterNames``), once."""
    again: list[do.Action] = [do.LookAgain(after)] if after is not None else []
    if sent.nominate_at is None:
        return again
    remaining = sent.nominate_at - facts.now
    if remaining > 0:
        return [do.LookAgain(remaining if after is None else min(after, remaining))]
    nominate = do.Nominate((sent.placed.cluster,), sent.waiting_message, once=True)
    return [nominate, *again]


def _many(facts: PlacingFacts, wins: Mapping[str, winning.WinFacts]) -> list[do.Action]:
    assert facts.many is not None, "the group read gathers ManyFacts in these modes"
    choice = many.choose_many(facts.many)
    if choice.winner is not None:
        if choice.winner not in facts.reachable or choice.winner not in wins:
            return [do.LookAgain(MANY_RECHECK)]
        return winning.win(wins[choice.winner])
    result: list[do.Action] = [do.NoteRound(choice.round)]
    if choice.send_to:
        result.append(do.SendCopies(choice.send_to))
    nominated = ", ".join(choice.nominated) or "no worker"
    result.append(do.Nominate(tuple(sorted(choice.nominated)), f"dispatched to {nominated}"))
    if facts.many.incremental:
        result.append(do.LookAgain(MANY_RECHECK))
    elif facts.unblocked_in is not None:
        result.append(do.LookAgain(facts.unblocked_in))
    return result
