"""What kfed writes while a workload waits, with and without upstream v0.19's finer reasons
(its UnadmittedWorkloadsObservability gate, kfed's --unadmitted-workloads-observability): the
QuotaReserved=False condition, the one an eviction leaves when the quota goes back, and the
Pending Warning's reason. Off, everything reads as upstream writes by default."""

from __future__ import annotations

from typing import Any

import pytest

from manager import core
from manager.api import constants as C
from manager.controllers import conditions
from manager.controllers import eventreasons as told
from manager.controllers import workloadstatus as ws
from manager.kube.api import Obj
from manager.kube.events import EventRecorder, EventSettings, EventType
from tests import builders as b

WAITING = core.PendingReason(
    core.PendingKind.WAITING_FOR_QUOTA,
    "insufficient unused quota for nvidia.com/gpu in flavor h100: 1 requested, 0 available",
)
MISSING = core.PendingReason(core.PendingKind.LOCAL_QUEUE_MISSING, "LocalQueue ns/lq doesn't exist")


class Capture(EventRecorder):
    def __init__(self) -> None:
        super().__init__(None, component="test")
        self.told: list[tuple[EventType, str, str]] = []

    def record(self, obj: Obj, type_: EventType, reason: str, message: str) -> None:
        self.told.append((type_, reason, message))


def quota_reserved(patch: Obj | None) -> dict[str, Any]:
    assert patch is not None
    found = conditions.find(patch["status"]["conditions"], C.QUOTA_RESERVED)
    assert found is not None
    return found


@pytest.mark.parametrize(
    ("reason", "fine", "written"),
    [
        (WAITING, False, C.REASON_PENDING),
        (WAITING, True, C.REASON_WAITING_FOR_QUOTA),
        (MISSING, False, C.REASON_INADMISSIBLE),
        (MISSING, True, C.REASON_MISCONFIGURED),
    ],
)
def test_a_pending_workload_gets_upstreams_reason_default_or_fine(
    reason: core.PendingReason, fine: bool, written: str
) -> None:
    found = quota_reserved(ws.pending(b.workload("w", namespace="ns"), reason, fine=fine))
    assert (found["status"], found["reason"], found["message"]) == (
        "False",
        written,
        reason.message,
    )


def test_the_same_reason_is_not_written_twice_and_a_finer_one_is() -> None:
    wl = b.workload("w", namespace="ns")
    wl["status"] = ws.pending(wl, WAITING)["status"]  # type: ignore[index]
    assert ws.pending(wl, WAITING) is None
    assert quota_reserved(ws.pending(wl, WAITING, fine=True))["reason"] == "WaitingForQuota"


def evicted_workload() -> Obj:
    status = {
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 1}]},
        "conditions": [
            {"type": C.QUOTA_RESERVED, "status": "True", "reason": "QuotaReserved"},
            {"type": C.ADMITTED, "status": "True", "reason": "Admitted"},
            {
                "type": C.EVICTED,
                "status": "True",
                "reason": C.REASON_EVICTED_BY_PREEMPTION,
                "message": "Preempted to accommodate a workload",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            },
        ],
    }
    return b.workload("w", namespace="ns", status=status)


@pytest.mark.parametrize(
    ("fine", "written"), [(False, C.REASON_PENDING), (True, C.REASON_PENDING_EVALUATION)]
)
def test_quota_given_back_after_an_eviction_is_pending_or_pending_evaluation(
    fine: bool, written: str
) -> None:
    patch = ws.release(evicted_workload(), requeue_at=None, now=1_767_225_660.0, fine=fine)
    found = quota_reserved(patch)
    assert (found["reason"], found["message"]) == (written, "Preempted to accommodate a workload")
    assert patch is not None
    admitted = conditions.find(patch["status"]["conditions"], C.ADMITTED)
    assert admitted is not None and admitted["reason"] == C.REASON_NO_RESERVATION


def test_the_pending_warning_says_pending_or_the_finer_reason() -> None:
    rec = Capture()
    told.pending(rec, b.workload("w"), WAITING.message)
    told.pending(rec, b.workload("w"), WAITING.message, WAITING.fine_reason)
    assert rec.told == [
        ("Warning", "Pending", WAITING.message),
        ("Warning", "WaitingForQuota", WAITING.message),
    ]


def test_every_pending_reason_is_a_routine_warning() -> None:
    """A backlog's why-it-waits Warnings share the routine Events' budget whichever reason
    they carry, never the alerts' (a Failover, a lost worker)."""
    routine = EventSettings().routine_warnings
    for kind in core.PendingKind:
        reason = core.PendingReason(kind, "")
        assert {reason.condition_reason, reason.fine_reason, C.REASON_PENDING} <= routine
    assert "Failover" not in routine
