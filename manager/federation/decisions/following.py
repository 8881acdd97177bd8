"""Following a placed workload: what to do about a workload whose MultiKueue check is Ready
on one worker. Pure: facts about that worker and its copy in, one action out; the dispatcher
gathers the facts and performs the action (``Dispatcher._follow``).

The rules, in order (upstream MultiKueue's, plus kfed's failover policies):

1. the worker is not known to the manager any more: ``unregistered``, move it at once
   (nothing of it can be reached, and upstream does the same);
2. registered, its connection not set up yet (a manager restart): look again shortly;
3. lost (its connection failed, or its kubeconfig is now refused or gone): wait until its
   copy has surely stopped (``failover.may_move_at``), then move it (``lost``);
4. draining: move it (``drain``);
5. the copy is gone: move it (``vanished``);
6. the copy was evicted there, or lost its quota, or was deactivated: move it (``evicted``);
7. else keep following: copy the remote Job's status to the manager's Job (``sync``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from manager.api import constants as C
from manager.controllers import conditions
from manager.controllers import workloadstatus as ws

Obj = dict[str, Any]
STARTING_RECHECK = 1.0
"""Seconds before looking again at a workload whose worker's connection is being set up."""


class Connection(StrEnum):
    CONNECTED = "connected"
    STARTING = "starting"
    """Registered, its connection not set up yet."""
    LOST = "lost"
    """Its connection failed."""
    RETIRED = "retired"
    """Its kubeconfig is now refused or gone, or its MultiKueueCluster was deleted."""
    UNREGISTERED = "unregistered"


@dataclass(frozen=True, slots=True)
class WorkerFacts:
    name: str
    connection: Connection
    may_move_in: float = 0.0
    """Lost or retired: seconds until its copy has surely stopped (0 or less: already)."""
    could_fence: bool = True
    lost_because: str = ""
    """Lost or retired: why, in a few words."""
    draining: bool = False


class Do(StrEnum):
    SYNC = "sync"
    WAIT = "wait"
    RETRY = "retry"


@dataclass(frozen=True, slots=True)
class FollowAction:
    do: Do
    reason: str = ""
    """For RETRY: lost | unregistered | drain | vanished | evicted (the failover reason)."""
    message: str = ""
    """For RETRY: the check's message."""
    after: float | None = None
    """For WAIT: seconds before looking again."""
    evicted_reason: str = ""
    """For RETRY of a copy evicted on its worker: its Evicted condition's reason there."""


def _wait(seconds: float) -> FollowAction:
    return FollowAction(Do.WAIT, after=max(0.1, seconds))


def _retry(reason: str, message: str) -> FollowAction:
    return FollowAction(Do.RETRY, reason=reason, message=message)


def decide(worker: WorkerFacts, copy_: Obj | None) -> FollowAction:
    """What to do about a workload placed on ``worker`` whose copy there is ``copy_``."""
    name = worker.name
    match worker.connection:
        case Connection.UNREGISTERED:
            return _retry("unregistered", f"worker {name} is no longer registered")
        case Connection.STARTING:
            return _wait(STARTING_RECHECK)
        case Connection.LOST | Connection.RETIRED:
            if worker.may_move_in > 0:
                return _wait(worker.may_move_in)
            how = worker.lost_because or ("fenced itself" if worker.could_fence else "timed out")
            return _retry("lost", f"worker {name} lost ({how}); moving the workload")
    if worker.draining:
        return _retry("drain", f"worker {name} is draining; moving the workload")
    if copy_ is None:
        return _retry("vanished", f"the copy on worker {name} no longer exists")
    if ws.is_evicted(copy_) or not ws.has_reservation(copy_) or not ws.is_active(copy_):
        evicted = conditions.find(ws.status_of(copy_).get("conditions"), C.EVICTED) or {}
        why = evicted.get("message") or "lost its quota there"
        return FollowAction(
            Do.RETRY,
            reason="evicted",
            message=f"evicted on worker {name}: {why}",
            evicted_reason=str(evicted.get("reason") or ""),
        )
    return FollowAction(Do.SYNC)
