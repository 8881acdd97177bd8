"""The dispatcher's actions: what ``decide.py`` decides and ``applier.py`` carries out, as
values (the table tests compare lists of them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class DeleteCopies:
    """Delete the workload's copies and our jobs on every worker, but ``keep``'s."""

    keep: str | None = None


@dataclass(frozen=True, slots=True)
class ForgetRecord:
    """The dispatcher's record of the workload is no longer needed."""


@dataclass(frozen=True, slots=True)
class Reject:
    """Set the check Rejected with ``message`` (and tell it by an Event)."""

    message: str


@dataclass(frozen=True, slots=True)
class RecordFinished:
    """The run on ``cluster`` is the job's result: record where it ran and copy its end to the
    manager's job."""

    cluster: str


@dataclass(frozen=True, slots=True)
class NoteReserved:
    """Start the dispatch latency clock if it is not running (quota held on the manager)."""


@dataclass(frozen=True, slots=True)
class Win:
    """The copy on ``cluster`` won (it ran, maybe while nobody recorded it): record it."""

    cluster: str


@dataclass(frozen=True, slots=True)
class ResetJob:
    """Put the manager's job back as it was before it was placed (its status cleared)."""


@dataclass(frozen=True, slots=True)
class Retry:
    """Give the workload back to be placed again (check Retry), for ``reason``."""

    reason: str
    message: str
    evicted_reason: str = ""
    """A copy evicted on its worker: the Evicted condition's reason there."""


@dataclass(frozen=True, slots=True)
class SyncStatus:
    """Copy the remote job's status on ``cluster`` to the manager's job."""

    cluster: str


@dataclass(frozen=True, slots=True)
class LookAgain:
    """Reconcile it again after ``after`` seconds."""

    after: float


# -- placing (``placement.py``) -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TellRefusal:
    """Tell by a Warning Event, once, why ``cluster``'s ``kfed.io/allowed-references`` keeps
    the workload away."""

    cluster: str
    refusal: str


@dataclass(frozen=True, slots=True)
class RecoverPlacement:
    """After a restart a copy exists on ``cluster`` and the record has none: follow it, as
    a copy sent then with ``deadline`` (monotonic) to be admitted."""

    cluster: str
    deadline: float


@dataclass(frozen=True, slots=True)
class Withdraw:
    """Give up the copy sent to ``cluster`` (not admitted in time, stopped, worker gone);
    ``delete``: the worker can be reached, so the copy is deleted there."""

    cluster: str
    delete: bool


@dataclass(frozen=True, slots=True)
class NoteChoice:
    """Remember what choosing found: the workers tried this round, since when no worker can
    ever hold it, and whether it waits for capacity (placed again on a rescan)."""

    tried: frozenset[str]
    unplaceable_since: float | None
    waiting: bool


@dataclass(frozen=True, slots=True)
class Wait:
    """Wait for capacity: the check Pending with ``message``."""

    message: str


@dataclass(frozen=True, slots=True)
class GiveBack:
    """No worker could hold it within the dispatch deadline: the check Retry with
    ``message`` (the manager evicts it, which releases its quota, and requeues it)."""

    message: str


@dataclass(frozen=True, slots=True)
class Send:
    """Send one copy to ``cluster`` (capacity-aware) and note where and why; look again
    after ``then_after`` seconds, or ``retry_after`` when the copy could not be made."""

    cluster: str
    worker_cluster_queue: str
    reason: str
    message: str
    """The check's Pending message, written only if the copy waits (``nominate_at``)."""
    usage: Mapping[tuple[str, str, str], int]
    """(worker ClusterQueue, worker flavor, resource) -> amount it takes there."""
    deadline: float
    """Monotonic time by which the worker must admit it."""
    nominate_at: float
    candidates: tuple[str, ...]
    """Every worker as evaluated, for the placement annotation and the span."""
    tried_before: tuple[str, ...]
    then_after: float
    retry_after: float


@dataclass(frozen=True, slots=True)
class SendCopies:
    """AllAtOnce / Incremental: a copy to each of ``clusters`` (at once)."""

    clusters: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NoteRound:
    """Incremental: the round to remember (None: no round)."""

    round: tuple[int, float] | None


@dataclass(frozen=True, slots=True)
class Nominate:
    """The check Pending with ``message`` and ``nominatedClusterNames``; ``once``: the copy
    waited ``nominate_after`` (capacity-aware), so this is written once for it."""

    clusters: tuple[str, ...]
    message: str
    once: bool = field(default=False)


Action = (
    DeleteCopies
    | ForgetRecord
    | Reject
    | RecordFinished
    | NoteReserved
    | Win
    | ResetJob
    | Retry
    | SyncStatus
    | LookAgain
    | TellRefusal
    | RecoverPlacement
    | Withdraw
    | NoteChoice
    | Wait
    | GiveBack
    | Send
    | SendCopies
    | NoteRound
    | Nominate
)
