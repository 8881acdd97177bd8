"""Following a placed workload, one row per situation (upstream MultiKueue's
``workload_test.go`` is the model): the worker's facts and its copy in, the action and the
check's message out."""

from __future__ import annotations

from typing import Any

import pytest

from manager.api import constants as C
from manager.federation.decisions.following import (
    STARTING_RECHECK,
    Connection,
    Do,
    FollowAction,
    WorkerFacts,
    decide,
)

W = "worker-1"


def copy_(*conditions: tuple[str, str, str], active: bool = True) -> dict[str, Any]:
    """A remote copy with these (type, status, message) conditions."""
    return {
        "metadata": {"name": "wl", "namespace": "ns"},
        "spec": {"active": active},
        "status": {
            "admission": {"clusterQueue": "gpu-cq", "podSetAssignments": []},
            "conditions": [
                {"type": t, "status": s, "reason": "r", "message": m} for t, s, m in conditions
            ],
        },
    }


ADMITTED = copy_((C.QUOTA_RESERVED, "True", ""), (C.ADMITTED, "True", ""))
PREEMPTED = copy_(
    (C.QUOTA_RESERVED, "True", ""),
    (C.EVICTED, "True", "Preempted to accommodate a workload (UID: x) due to prioritization"),
)
QUOTA_LOST = copy_((C.QUOTA_RESERVED, "False", ""))
DEACTIVATED = copy_((C.QUOTA_RESERVED, "True", ""), active=False)
CONNECTED = WorkerFacts(W, Connection.CONNECTED)

ROWS: list[tuple[str, WorkerFacts, dict[str, Any] | None, FollowAction]] = [
    ("admitted there: keep following", CONNECTED, ADMITTED, FollowAction(Do.SYNC)),
    (
        "worker deleted from the manager",
        WorkerFacts(W, Connection.UNREGISTERED),
        ADMITTED,
        FollowAction(Do.RETRY, "unregistered", f"worker {W} is no longer registered"),
    ),
    (
        "registered, connection being set up (manager restart)",
        WorkerFacts(W, Connection.STARTING),
        None,
        FollowAction(Do.WAIT, after=STARTING_RECHECK),
    ),
    (
        "lost, its copy may still run",
        WorkerFacts(W, Connection.LOST, may_move_in=7.5),
        ADMITTED,
        FollowAction(Do.WAIT, after=7.5),
    ),
    (
        "lost, wait never shorter than 0.1 s",
        WorkerFacts(W, Connection.LOST, may_move_in=0.01),
        ADMITTED,
        FollowAction(Do.WAIT, after=0.1),
    ),
    (
        "lost past the window, its shim fenced",
        WorkerFacts(W, Connection.LOST, may_move_in=0.0),
        ADMITTED,
        FollowAction(Do.RETRY, "lost", f"worker {W} lost (fenced itself); moving the workload"),
    ),
    (
        "lost past the outage timeout, no shim to fence",
        WorkerFacts(W, Connection.LOST, may_move_in=-3.0, could_fence=False),
        ADMITTED,
        FollowAction(Do.RETRY, "lost", f"worker {W} lost (timed out); moving the workload"),
    ),
    (
        "kubeconfig now refused, past the window: lost, saying why",
        WorkerFacts(W, Connection.RETIRED, may_move_in=0.0, lost_because="kubeconfig refused"),
        ADMITTED,
        FollowAction(
            Do.RETRY, "lost", f"worker {W} lost (kubeconfig refused); moving the workload"
        ),
    ),
    (
        "kubeconfig now refused, copy may still run",
        WorkerFacts(W, Connection.RETIRED, may_move_in=30.0, lost_because="kubeconfig refused"),
        ADMITTED,
        FollowAction(Do.WAIT, after=30.0),
    ),
    (
        "draining",
        WorkerFacts(W, Connection.CONNECTED, draining=True),
        ADMITTED,
        FollowAction(Do.RETRY, "drain", f"worker {W} is draining; moving the workload"),
    ),
    (
        "copy gone",
        CONNECTED,
        None,
        FollowAction(Do.RETRY, "vanished", f"the copy on worker {W} no longer exists"),
    ),
    (
        "copy preempted there",
        CONNECTED,
        PREEMPTED,
        FollowAction(
            Do.RETRY,
            "evicted",
            f"evicted on worker {W}: Preempted to accommodate a workload (UID: x) due to "
            "prioritization",
            evicted_reason="r",
        ),
    ),
    (
        "copy lost its quota there",
        CONNECTED,
        QUOTA_LOST,
        FollowAction(Do.RETRY, "evicted", f"evicted on worker {W}: lost its quota there"),
    ),
    (
        "copy deactivated there (fenced)",
        CONNECTED,
        DEACTIVATED,
        FollowAction(Do.RETRY, "evicted", f"evicted on worker {W}: lost its quota there"),
    ),
    (
        "draining wins over a vanished copy",
        WorkerFacts(W, Connection.CONNECTED, draining=True),
        None,
        FollowAction(Do.RETRY, "drain", f"worker {W} is draining; moving the workload"),
    ),
    (
        "lost wins over an evicted copy in a stale cache",
        WorkerFacts(W, Connection.LOST, may_move_in=4.0),
        PREEMPTED,
        FollowAction(Do.WAIT, after=4.0),
    ),
]


@pytest.mark.parametrize(
    ("worker", "copy", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_follow(worker: WorkerFacts, copy: dict[str, Any] | None, expected: FollowAction) -> None:
    assert decide(worker, copy) == expected
