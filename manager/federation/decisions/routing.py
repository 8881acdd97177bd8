"""What step a manager workload is at: pure. The facts the dispatcher reads about one workload
in, the step to take out (``Dispatcher._reconcile`` carries it out). The rules, in order:

1. the workload is gone: delete its copies everywhere (``CLEAN_UP``);
2. its queue is not federated: nothing to do (``NONE``);
3. a copy finished on a worker the manager could not see, and the workload was taken off
   it meanwhile (moved, requeued): that run counts, record it; it never runs again
   (``RECORD_FINISHED``). "Finished" always means ended on its own: a run that was stopped
   (fenced, evicted, moved) is never the result, whatever its job's condition says
   (``leftovers.run_end``, asked through ``Lookups.ended_there``);
4. it finished and its run's objects are kept a while (``retention.py``): delete every
   other copy, keep those on the worker it ran on until then (``RETAIN``); it finished, gave
   its quota back or is being deleted: delete its copies (``CLEAN_UP``);
5. it may not be federated (its owner's kind has no MultiKueue adapter, or its Job is not
   ``managedBy`` MultiKueue): the check rejects it, once (``REJECT``);
6. a copy finished: if the check is not Ready yet, the worker won and ran it while nobody
   recorded it (a manager restart in between): record the placement first (``WIN``); else
   copy the result (``RECORD_FINISHED``);
7. the manager evicted it (preempted, or a Retry): stop every copy (``STOP``);
8. the check is Ready: follow the copy (``FOLLOW``); Pending: place it (``PLACE``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Step(StrEnum):
    NONE = "none"
    CLEAN_UP = "clean-up"
    RETAIN = "retain"
    RECORD_FINISHED = "record-finished"
    REJECT = "reject"
    WIN = "win"
    STOP = "stop"
    FOLLOW = "follow"
    PLACE = "place"


@dataclass(frozen=True, slots=True)
class WorkloadFacts:
    exists: bool = True
    federated: bool = True
    check_state: str = "Pending"
    """Its MultiKueue check's state: Pending, Ready, Retry or Rejected."""
    holds_quota: bool = True
    finished: bool = False
    deleting: bool = False
    evicted: bool = False
    finished_copy: bool = False
    """A copy of it finished on a worker."""
    finished_copy_worker_known: bool = True
    """That worker is still registered."""
    rejection: str | None = None
    """Why it may not be federated (None: it may)."""
    retention_left: float = 0.0
    """Finished: seconds its run's objects stay on the worker it ran on (0: none kept)."""


@dataclass(frozen=True, slots=True)
class Route:
    step: Step
    message: str = ""
    """REJECT: the check's message."""
    after: float | None = None
    """RETAIN: seconds until the kept objects are due (look again then)."""


def route(facts: WorkloadFacts) -> Route:
    if not facts.exists:
        return Route(Step.CLEAN_UP)
    if not facts.federated:
        return Route(Step.NONE)
    taken_off = not (facts.holds_quota or facts.finished or facts.deleting)
    if facts.finished_copy and taken_off:
        return Route(Step.RECORD_FINISHED)
    if facts.finished and not facts.deleting and facts.retention_left > 0:
        return Route(Step.RETAIN, after=facts.retention_left)
    if facts.finished or not facts.holds_quota or facts.deleting:
        return Route(Step.CLEAN_UP)
    if facts.rejection is not None:
        if facts.check_state == "Rejected":
            return Route(Step.NONE)
        return Route(Step.REJECT, facts.rejection)
    if facts.finished_copy:
        unrecorded = facts.check_state != "Ready" and not facts.evicted
        if unrecorded and facts.finished_copy_worker_known:
            return Route(Step.WIN)
        return Route(Step.RECORD_FINISHED)
    if facts.evicted:
        return Route(Step.STOP)
    if facts.check_state == "Ready":
        return Route(Step.FOLLOW)
    if facts.check_state == "Pending":
        return Route(Step.PLACE)
    return Route(Step.NONE)
