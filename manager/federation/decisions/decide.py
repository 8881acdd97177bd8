"""What the dispatcher does about one workload: pure. A ``WorkloadGroup`` (``group.py``) in,
a list of typed actions out, carried out in order by ``applier.py``.

The steps are ``routing.route``'s (clean up, retain, record a finished run, reject, win,
stop, follow, place: ``placement.place``) and, for a workload placed on a worker,
``following.decide``'s (sync its status: ``jobsync.py``, wait, or give it back to be placed
again); a copy that won becomes the one run by ``winning.win``. Each action is a value: the
table tests compare lists of them (``tests/unit/federation/test_decide.py``).
"""

from __future__ import annotations

from manager.federation.decisions import following, jobsync, placement, routing, winning
from manager.federation.decisions.actions import (
    Action,
    DeleteCopies,
    ForgetRecord,
    KeepEndedCopy,
    LookAgain,
    NoteReserved,
    RecordRanOn,
    Reject,
    ResetJob,
    Retry,
)
from manager.federation.decisions.group import WorkloadGroup


def decide(group: WorkloadGroup) -> list[Action]:
    """The actions for this workload now, in the order they are to be carried out."""
    route = routing.route(group.facts)
    match route.step:
        case routing.Step.CLEAN_UP:
            return [*delete_copies(group), ForgetRecord()]
        case routing.Step.RETAIN:
            return [*delete_copies(group, keep=group.ran_on), LookAgain(route.after or 0.0)]
        case routing.Step.NONE:
            return []
        case routing.Step.REJECT:
            return [Reject(route.message)]
        case routing.Step.RECORD_FINISHED:
            cluster = group.finished_copy[0] if group.finished_copy else ""
            unreachable = not group.facts.holds_quota
            return [RecordRanOn(cluster, unreachable), *jobsync.finish(group.sync, group.run_end)]
        case routing.Step.WIN:
            assert group.finished_copy is not None  # routed on a finished copy
            return [NoteReserved(), *winning.win(group.wins[group.finished_copy[0]])]
        case routing.Step.STOP:
            return [NoteReserved(), *delete_copies(group), ResetJob(), ForgetRecord()]
        case routing.Step.FOLLOW:
            return [NoteReserved(), *_follow(group)]
        case routing.Step.PLACE:
            assert group.placing is not None  # the group read gathers it at this step
            return [NoteReserved(), *placement.place(group.placing, group.wins)]


def delete_copies(group: WorkloadGroup, keep: str = "") -> list[Action]:
    """Every copy goes but ``keep``'s (a finished run's, retained) and, never-twice, those
    whose run ended unseen (read afresh): that run is recorded as the job's result."""
    kept = [KeepEndedCopy(c) for c in group.holders if c != keep and c in group.ended_unseen]
    going = tuple(c for c in group.holders if c != keep and c not in group.ended_unseen)
    return [*kept, DeleteCopies(going)]


def _follow(group: WorkloadGroup) -> list[Action]:
    worker = group.placed_on or following.WorkerFacts("", following.Connection.UNREGISTERED)
    action = following.decide(worker, group.placed_copy)
    match action.do:
        case following.Do.RETRY:
            return [Retry(action.reason, action.message, action.evicted_reason)]
        case following.Do.WAIT:
            return [LookAgain(action.after)] if action.after is not None else []
        case following.Do.SYNC:
            return jobsync.sync(group.sync)
