"""The step a manager workload is at, one row per situation: the facts in, the step out."""

from __future__ import annotations

import pytest

from manager.federation.decisions.routing import Route, Step, WorkloadFacts, route

F = WorkloadFacts
NO_ADAPTER = 'No multikueue adapter found for owner kind "jobset.x-k8s.io/v1alpha2, Kind=JobSet"'

ROWS: list[tuple[str, WorkloadFacts, Route]] = [
    ("deleted from the manager: its copies go", F(exists=False), Route(Step.CLEAN_UP)),
    ("its queue is not federated", F(federated=False), Route(Step.NONE)),
    ("quota reserved, check Pending: place it", F(), Route(Step.PLACE)),
    ("check Ready: follow its copy", F(check_state="Ready"), Route(Step.FOLLOW)),
    (
        "check Retry: the manager evicts it, nothing to do yet",
        F(check_state="Retry"),
        Route(Step.NONE),
    ),
    ("finished: its copies go", F(finished=True, holds_quota=False), Route(Step.CLEAN_UP)),
    ("quota given back (requeued): its copies go", F(holds_quota=False), Route(Step.CLEAN_UP)),
    ("being deleted: its copies go", F(deleting=True), Route(Step.CLEAN_UP)),
    (
        "finished unseen on a worker and requeued meanwhile: record that run, never run again",
        F(holds_quota=False, finished_copy=True),
        Route(Step.RECORD_FINISHED),
    ),
    (
        "finished there, placement recorded: copy the result",
        F(check_state="Ready", finished_copy=True),
        Route(Step.RECORD_FINISHED),
    ),
    (
        "finished there, never recorded (a manager restart): record the placement first",
        F(check_state="Pending", finished_copy=True),
        Route(Step.WIN),
    ),
    (
        "finished on a worker since unregistered: copy the result",
        F(check_state="Pending", finished_copy=True, finished_copy_worker_known=False),
        Route(Step.RECORD_FINISHED),
    ),
    (
        "finished there after the manager evicted it: the run counts",
        F(evicted=True, finished_copy=True),
        Route(Step.RECORD_FINISHED),
    ),
    (
        "evicted by the manager: stop every copy",
        F(evicted=True, check_state="Ready"),
        Route(Step.STOP),
    ),
    (
        "upstream: an owner kind without an adapter is rejected",
        F(rejection=NO_ADAPTER),
        Route(Step.REJECT, NO_ADAPTER),
    ),
    (
        "already rejected: not rejected again",
        F(rejection=NO_ADAPTER, check_state="Rejected"),
        Route(Step.NONE),
    ),
    (
        "a finished workload that may not be federated: its copies still go",
        F(rejection=NO_ADAPTER, finished=True),
        Route(Step.CLEAN_UP),
    ),
]


@pytest.mark.parametrize(("situation", "facts", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_route(situation: str, facts: WorkloadFacts, expected: Route) -> None:
    assert route(facts) == expected
