"""The dispatcher's actions: what ``decide.py`` decides and ``applier.py`` carries out, as
values (the table tests compare lists of them)."""

from __future__ import annotations

from dataclasses import dataclass


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
class Place:
    """Place it (``placing.Placer``: choose a worker, send one copy, or wait)."""


@dataclass(frozen=True, slots=True)
class LookAgain:
    """Reconcile it again after ``after`` seconds."""

    after: float


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
    | Place
    | LookAgain
)
