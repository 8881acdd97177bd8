"""Which of our objects on a worker are leftovers: pure. Facts about a remote copy (or one of
our Jobs there) and its manager workload in, a verdict out; ``collecting.Collector`` gathers
the facts and carries the verdicts out.

A copy is judged in one of two moments:

- ``RETURNING``: the worker was lost and is back, before anything else happens there. Only
  a copy the manager still places there is kept: everything else was moved, finished or
  given up while the worker could not be told;
- ``SWEEP``: the periodic garbage collection, while the worker is connected. Copies of
  workloads still being placed are the dispatcher's business (AllAtOnce keeps one on every
  worker); only a copy whose workload is gone, finished, or running on another worker is
  removed.

In both, a copy that finished while the manager did not see it is never removed: the run it
records is the job's result, and the reconcile copies it first (``RECORD``). And the copy
whose run ended on the worker a finished workload ran on stays, with our Job there, until
its retention is over (``retention.py``); every other copy of it goes at once.

Only a run that ended on its own is the job's result (``run_end``): one that kfed or Kueue
stopped (fenced by the worker's shim, deactivated, evicted or preempted there, or stopped by
the manager when it moved, drained or withdrew it) is a leftover whatever its job's
condition says: pods deleted under a Job count as failures, so such a Job can end
``Failed`` (``backoffLimit: 0``) although the job never failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from manager.api.constants import FENCED_ANNOTATION as FENCED_ANNOTATION  # re-exported


class RunEnd(StrEnum):
    RUNNING = "running"
    """Not ended (yet)."""
    RESULT = "result"
    """Ended on its own: the job's result (it never runs again)."""
    STOPPED = "stopped"
    """Ended because it was stopped: never the result; its objects are leftovers."""


@dataclass(frozen=True, slots=True)
class RunFacts:
    """One run of a workload on a worker: its copy and our job there made for it."""

    ended: bool = False
    """The copy says Finished, or our job there has an outcome."""
    succeeded: bool = False
    """That end is a success (Complete)."""
    fenced: bool = False
    """The fenced annotation on the copy or on the job."""
    deactivated: bool = False
    """The copy's ``spec.active`` is false."""
    evicted: bool = False
    """The copy is Evicted or Preempted there."""
    stopped_by_manager: bool = False
    """The manager deleted its job before it ended (moved, drained, withdrawn, evicted on
    the manager: ``Records.stopped``)."""


def run_end(run: RunFacts) -> RunEnd:
    """Whether a run is the job's result. A success counts whatever happened after: only the
    job's own pods running to the end make one (a stop deletes only pods that still run, and
    those never count as succeeded), and running it again would run it twice. A failure of a
    run that was stopped counts never: the stop may be what failed it."""
    if not run.ended:
        return RunEnd.RUNNING
    if run.succeeded:
        return RunEnd.RESULT
    if run.fenced or run.deactivated or run.evicted or run.stopped_by_manager:
        return RunEnd.STOPPED
    return RunEnd.RESULT


class Moment(StrEnum):
    RETURNING = "returning"
    SWEEP = "sweep"


@dataclass(frozen=True, slots=True)
class WorkloadFacts:
    """The manager workload a remote object was made for, as the manager sees it."""

    exists: bool = True
    finished: bool = False
    holds_quota: bool = True
    """Its quota is reserved on the manager (it is being placed or runs)."""
    runs_on: str = ""
    """The worker its MultiKueue check is Ready on ("" while it is being placed)."""
    placed_on: frozenset[str] = frozenset()
    """The workers it runs on or a copy was sent to (``status.clusterName``, the
    capacity-aware placement)."""
    ran_on: str = ""
    """Finished: the worker its run ended on (``retaining.ran_on``)."""
    retention_left: float = 0.0
    """Finished: seconds its run's objects on ``ran_on`` are still kept (0: none)."""


@dataclass(frozen=True, slots=True)
class CopyFacts:
    worker: str
    finished: bool = False
    """Its run ended there on its own (``run_end`` is ``RESULT``): the copy says so, or our
    job there made for it does (the shim writes it on the copy a moment later)."""
    active: bool = True


class Verdict(StrEnum):
    KEEP = "keep"
    DELETE = "delete"
    RECORD = "record"
    """It finished unseen: let the reconcile record the run (it never runs again)."""


def judge_copy(moment: Moment, copy: CopyFacts, workload: WorkloadFacts) -> Verdict:
    if copy.finished and workload.exists and not workload.finished:
        return Verdict.RECORD
    if workload.exists and workload.finished and retained(copy, workload):
        return Verdict.KEEP
    if not workload.exists or workload.finished:
        return Verdict.DELETE
    if moment is Moment.RETURNING:
        still_there = workload.holds_quota and copy.worker in workload.placed_on
        return Verdict.KEEP if still_there and copy.active else Verdict.DELETE
    moved = bool(workload.runs_on) and workload.runs_on != copy.worker
    return Verdict.DELETE if moved else Verdict.KEEP


def retained(copy: CopyFacts, workload: WorkloadFacts) -> bool:
    """The copy of a finished workload that ran and ended there, within its retention."""
    return copy.finished and copy.worker == workload.ran_on and workload.retention_left > 0


def job_is_orphan(*, deleting: bool, copy_exists: bool, workload: WorkloadFacts) -> bool:
    """One of our Jobs on a worker whose copy is gone there, and whose manager workload is
    gone or finished (left by a copy deleted while the worker was unreachable, or by an
    earlier registration): it would block a same-named Job submitted again."""
    if deleting or copy_exists:
        return False
    return not workload.exists or workload.finished


def template_is_orphan(
    worker: str, *, deleting: bool, copy_exists: bool, workload: WorkloadFacts
) -> bool:
    """One of our ResourceClaimTemplates on ``worker`` whose workload has no copy there and
    is not placed there (left by a copy deleted while the worker was unreachable, or whose
    deletion failed). Unlike a Job, it goes even while its workload lives elsewhere: no run
    of it can be there, and a same-named template would block the workload's return."""
    if deleting or copy_exists:
        return False
    return not (workload.exists and worker in workload.placed_on)
