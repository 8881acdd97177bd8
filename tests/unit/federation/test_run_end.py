"""Which run of a workload is the job's result, one row per situation (issue 30, item 3): only
a run that ended on its own. A run stopped by fencing, deactivation, eviction, preemption or
by the manager (drain, move, withdrawal) is never the result, whatever its Job's condition
says: pods deleted under a Job count as failures, so with ``backoffLimit: 0`` a fenced Job
can end ``Failed``. A success counts however the run was stopped afterwards: only the job's
own pods running to the end make one, and running it again would run it twice."""

from __future__ import annotations

from typing import Any

import pytest

from manager.api import constants as C
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.federation.decisions.leftovers import (
    FENCED_ANNOTATION,
    CopyFacts,
    Moment,
    RunEnd,
    RunFacts,
    Verdict,
    WorkloadFacts,
    judge_copy,
    run_end,
)
from manager.federation.engine.lookups import kind_of_job, run_facts
from manager.federation.engine.records import STOPPED_MEMORY, Records

Obj = dict[str, Any]

FAILED = RunFacts(ended=True)
COMPLETE = RunFacts(ended=True, succeeded=True)

ROWS: list[tuple[str, RunFacts, RunEnd]] = [
    ("still running", RunFacts(), RunEnd.RUNNING),
    (
        "fenced, not ended (suspended: its pods removed uncounted)",
        RunFacts(fenced=True),
        RunEnd.RUNNING,
    ),
    ("ended on its own: Failed", FAILED, RunEnd.RESULT),
    ("ended on its own: Complete", COMPLETE, RunEnd.RESULT),
    (
        "fenced, then Failed (its running pods deleted)",
        RunFacts(ended=True, fenced=True),
        RunEnd.STOPPED,
    ),
    (
        "fenced, then Complete (its pods had all succeeded before the fence)",
        RunFacts(ended=True, succeeded=True, fenced=True),
        RunEnd.RESULT,
    ),
    ("deactivated there, then Failed", RunFacts(ended=True, deactivated=True), RunEnd.STOPPED),
    ("evicted there, then Failed", RunFacts(ended=True, evicted=True), RunEnd.STOPPED),
    (
        "preempted there (evicted, deactivated), then Failed",
        RunFacts(ended=True, evicted=True, deactivated=True),
        RunEnd.STOPPED,
    ),
    (
        "drained or moved by the manager, then Failed while deleted",
        RunFacts(ended=True, stopped_by_manager=True),
        RunEnd.STOPPED,
    ),
    (
        "withdrawn by the manager, then Complete",
        RunFacts(ended=True, succeeded=True, stopped_by_manager=True),
        RunEnd.RESULT,
    ),
]


@pytest.mark.parametrize(("situation", "run", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_which_run_is_the_jobs_result(situation: str, run: RunFacts, expected: RunEnd) -> None:
    assert run_end(run) is expected, situation


# -- the facts, read from the objects -----------------------------------------------------


def copy_(*, active: bool = True, annotations: dict[str, str] | None = None, **conds: str) -> Obj:
    """A remote Workload copy; ``conds``: condition type -> reason (all True)."""
    return {
        "metadata": {"name": "wl", "namespace": "ns", "annotations": annotations or {}},
        "spec": {"active": active},
        "status": {
            "conditions": [
                {"type": t, "status": "True", "reason": reason} for t, reason in conds.items()
            ]
        },
    }


STOPPED_UID = "uid-of-a-job-the-manager-deleted"


def job(outcome: str | None, *, annotations: dict[str, str] | None = None, uid: str = "uid") -> Obj:
    conditions = [{"type": outcome, "status": "True"}] if outcome else []
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "j",
            "namespace": "ns",
            "uid": uid,
            "annotations": annotations or {},
        },
        "status": {"conditions": conditions},
    }


FENCE = {FENCED_ANNOTATION: "manager lease of origin o expired"}

OBJECT_ROWS: list[tuple[str, Obj | None, list[Obj], RunEnd]] = [
    ("a running copy and job", copy_(Admitted="Admitted"), [job(None)], RunEnd.RUNNING),
    ("its Job Failed on its own", copy_(), [job("Failed")], RunEnd.RESULT),
    ("its Job Complete, the copy not told yet", copy_(), [job("Complete")], RunEnd.RESULT),
    ("the copy Finished Failed, its Job gone", copy_(Finished=C.REASON_FAILED), [], RunEnd.RESULT),
    (
        "fenced copy (annotated, deactivated, evicted), its Job Failed",
        copy_(active=False, annotations=FENCE, Evicted="Deactivated"),
        [job("Failed", annotations=FENCE)],
        RunEnd.STOPPED,
    ),
    (
        "fenced, the shim wrote Finished Failed on the copy from its Job",
        copy_(active=False, annotations=FENCE, Finished=C.REASON_FAILED),
        [job("Failed", annotations=FENCE)],
        RunEnd.STOPPED,
    ),
    (
        "fenced, its copy gone: the kept Job still says so",
        None,
        [job("Failed", annotations=FENCE)],
        RunEnd.STOPPED,
    ),
    (
        "fenced, its Job Complete",
        copy_(active=False, annotations=FENCE),
        [job("Complete", annotations=FENCE)],
        RunEnd.RESULT,
    ),
    (
        "preempted on its worker, its Job Failed",
        copy_(Preempted="InClusterQueue"),
        [job("Failed")],
        RunEnd.STOPPED,
    ),
    (
        "drained: the manager stopped it, Failed",
        None,
        [job("Failed", uid=STOPPED_UID)],
        RunEnd.STOPPED,
    ),
]


@pytest.mark.parametrize(
    ("situation", "copy", "jobs", "expected"), OBJECT_ROWS, ids=[r[0] for r in OBJECT_ROWS]
)
def test_the_facts_of_a_run_are_read_from_its_copy_and_jobs(
    situation: str, copy: Obj | None, jobs: list[Obj], expected: RunEnd
) -> None:
    pairs: list[tuple[JobKind, Obj]] = [(kind_of_job(j), j) for j in jobs]
    facts = run_facts(copy, pairs, stopped=lambda uid: uid == STOPPED_UID)
    assert run_end(facts) is expected, situation


def test_a_kept_job_is_judged_as_its_own_kind() -> None:
    assert kind_of_job(job("Failed")) is BATCH_JOB
    assert kind_of_job({"metadata": {}}) is BATCH_JOB  # list items carry no kind


def test_a_fenced_failed_copy_of_a_moved_workload_is_collected_when_its_worker_returns() -> None:
    """The finding: the fenced run was kept (``RECORD``) as the job's result."""
    stopped = run_end(RunFacts(ended=True, fenced=True)) is RunEnd.RESULT
    moved = WorkloadFacts(runs_on="worker-2", placed_on=frozenset({"worker-2"}))
    fenced_copy = CopyFacts("worker-1", finished=stopped, active=False)
    assert judge_copy(Moment.RETURNING, fenced_copy, moved) is Verdict.DELETE
    assert judge_copy(Moment.SWEEP, fenced_copy, moved) is Verdict.DELETE


def test_the_manager_remembers_the_jobs_it_stopped_for_a_while_only() -> None:
    """Apart from the workload's record (forgotten as the job is stopped), and bounded."""
    records = Records()
    records.stopped("a", now=0.0)
    records.stopped("b", now=10.0)
    assert records.was_stopped("a") and records.was_stopped("b")
    records.forget("ns/wl")
    assert records.was_stopped("a"), "kept past the workload's record"
    records.stopped("c", now=STOPPED_MEMORY + 5.0)
    assert not records.was_stopped("a"), "forgotten after STOPPED_MEMORY"
    assert records.was_stopped("b") and records.was_stopped("c")
