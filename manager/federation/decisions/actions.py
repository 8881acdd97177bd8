"""The dispatcher's actions: what ``decide.py`` decides and ``applier.py`` carries out, as
values (the table tests compare lists of them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from manager.kube.resources import Resource


@dataclass(frozen=True, slots=True)
class DeleteCopies:
    """Delete the workload's copies and our jobs on ``clusters`` (at once), then tell the
    manager's workload controller (its eviction may be waiting for this)."""

    clusters: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class KeepEndedCopy:
    """The copy on ``cluster`` is kept: its run ended there unseen (read afresh)."""

    cluster: str


@dataclass(frozen=True, slots=True)
class ForgetRecord:
    """The dispatcher's record of the workload is no longer needed."""


@dataclass(frozen=True, slots=True)
class Reject:
    """Set the check Rejected with ``message`` (and tell it by an Event)."""

    message: str


@dataclass(frozen=True, slots=True)
class RecordRanOn:
    """The run on ``cluster`` is the job's result: record where it ran on the Workload (its
    end is copied by the actions that follow)."""

    cluster: str
    unreachable: bool = False
    """It finished while the workload was taken off it (no quota held): say so in the log."""


@dataclass(frozen=True, slots=True)
class NoteReserved:
    """Start the dispatch latency clock if it is not running (quota held on the manager)."""


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
class PatchJobStatus:
    """Patch the manager's job's status with ``patch`` (the remote job's, ``jobsync.py``)."""

    patch: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class CopyTopologyBack:
    """TAS: bring where the worker placed the pods (``found``: pod set -> its
    ``topologyAssignment``) to the manager's Workload, and the annotation ``text`` that names
    every level (``engine/topologyback.py``)."""

    cluster: str
    found: Mapping[str, Any]
    text: str


@dataclass(frozen=True, slots=True)
class FinishWorkload:
    """Finish the manager's Workload with the run's end (its job's status said nothing)."""

    succeeded: bool
    message: str


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
    topology: Mapping[str, Mapping[tuple[str, ...], Mapping[str, int]]] = field(
        default_factory=dict
    )
    """TAS: what the copy is expected to take there until the worker admits it, per worker
    flavor and leaf domain (``decisions/topology.py``); counted for the next placements."""


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


# -- winning (``winning.py``) ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NoteWinner:
    """Remember ``cluster`` as the winner (a later reconcile never chooses another)."""

    cluster: str


@dataclass(frozen=True, slots=True)
class DeleteOtherCopies:
    """Delete the copies (and our jobs) on ``clusters``, at once, before the winner runs."""

    clusters: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ForgetNameTaken:
    """The Job's (``copy``: the copy's) name on ``cluster`` was read afresh and judged:
    forget the conflict."""

    cluster: str
    copy: bool = False


@dataclass(frozen=True, slots=True)
class CreateClaimTemplate:
    """Copy the manager's ResourceClaimTemplate ``source`` to ``cluster``."""

    cluster: str
    source: Any


@dataclass(frozen=True, slots=True)
class CreateJob:
    """Create the job on ``cluster``; when its name is taken there, note it (the next read
    looks at it afresh) and stop here."""

    cluster: str


@dataclass(frozen=True, slots=True)
class SetReady:
    """The check Ready on ``cluster`` (and the Workload Admitted when no other check
    waits); count and trace the placement."""

    cluster: str


@dataclass(frozen=True, slots=True)
class Block:
    """Do not place it on ``cluster`` until ``until`` (monotonic): an object kfed did not
    create holds the name there."""

    cluster: str
    reason: str
    until: float


@dataclass(frozen=True, slots=True)
class Refuse:
    """Take back the copy on ``cluster`` and forget it as the winner or the placement."""

    cluster: str


# -- the garbage collection's verdicts (collecting.py), on leftovers of a workload ----------


@dataclass(frozen=True, slots=True)
class CollectCopy:
    """Delete the workload's leftover copy on the worker and our jobs made for it
    (``leftovers.judge_copy`` said DELETE at ``moment``); ``workload``: the manager's, if it
    is still there (a live run's job is remembered as stopped)."""

    moment: str
    workload: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class CollectOrphan:
    """Delete ``obj``, one of our objects on the worker whose workload has no copy there
    (``leftovers.job_is_orphan``, ``leftovers.template_is_orphan``); ``foreground``: a job
    stays until its pods are gone."""

    resource: Resource
    obj: Mapping[str, Any]
    foreground: bool = False


Collect = CollectCopy | CollectOrphan


Action = (
    DeleteCopies
    | ForgetRecord
    | Reject
    | KeepEndedCopy
    | RecordRanOn
    | PatchJobStatus
    | CopyTopologyBack
    | FinishWorkload
    | NoteReserved
    | ResetJob
    | Retry
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
    | NoteWinner
    | DeleteOtherCopies
    | ForgetNameTaken
    | CreateClaimTemplate
    | CreateJob
    | SetReady
    | Block
    | Refuse
)
