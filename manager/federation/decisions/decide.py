"""What the dispatcher does about one workload: pure. A ``WorkloadGroup`` (``group.py``) in,
a list of typed actions out, carried out in order by ``applier.py``.

The steps are ``routing.route``'s (clean up, retain, record a finished run, reject, win,
stop, follow, place: ``placement.place``) and, for a workload placed on a worker,
``following.decide``'s (sync its status, wait, or give it back to be placed again). Each
action is a value: the table tests compare lists of them (``tests/unit/federation/test_decide.py``).
"""

from __future__ import annotations

from manager.federation.decisions import following, placement, routing
from manager.federation.decisions.actions import (
    Action,
    DeleteCopies,
    ForgetRecord,
    LookAgain,
    NoteReserved,
    RecordFinished,
    Reject,
    ResetJob,
    Retry,
    SyncStatus,
    Win,
)
from manager.federation.decisions.group import WorkloadGroup


def decide(group: WorkloadGroup) -> list[Action]:
    """The actions for this workload now, in the order they are to be carried out."""
    route = routing.route(group.facts)
    match route.step:
        case routing.Step.CLEAN_UP:
            return [DeleteCopies(), ForgetRecord()]
        case routing.Step.RETAIN:
            return [DeleteCopies(keep=group.ran_on or None), LookAgain(route.after or 0.0)]
        case routing.Step.NONE:
            return []
        case routing.Step.REJECT:
            return [Reject(route.message)]
        case routing.Step.RECORD_FINISHED:
            return [RecordFinished(group.finished_copy[0] if group.finished_copy else "")]
        case routing.Step.WIN:
            assert group.finished_copy is not None  # routed on a finished copy
            return [NoteReserved(), Win(group.finished_copy[0])]
        case routing.Step.STOP:
            return [NoteReserved(), DeleteCopies(), ResetJob(), ForgetRecord()]
        case routing.Step.FOLLOW:
            return [NoteReserved(), *_follow(group)]
        case routing.Step.PLACE:
            assert group.placing is not None  # the group read gathers it at this step
            return [NoteReserved(), *placement.place(group.placing)]


def _follow(group: WorkloadGroup) -> list[Action]:
    worker = group.placed_on or following.WorkerFacts("", following.Connection.UNREGISTERED)
    action = following.decide(worker, group.placed_copy)
    match action.do:
        case following.Do.RETRY:
            return [Retry(action.reason, action.message, action.evicted_reason)]
        case following.Do.WAIT:
            return [LookAgain(action.after)] if action.after is not None else []
        case following.Do.SYNC:
            return [SyncStatus(worker.name)]
