"""The MultiKueue check's status writes: Ready and Admitted in one patch when no other check
waits (Kueue writes them in two)."""

from __future__ import annotations

from typing import Any

import pytest

from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.federation.decisions import checkstatus


def reserved(*checks: tuple[str, str], admitted: bool = False) -> dict[str, Any]:
    conditions = [{"type": C.QUOTA_RESERVED, "status": "True", "reason": "QuotaReserved"}]
    if admitted:
        conditions.append({"type": C.ADMITTED, "status": "True", "reason": "Admitted"})
    return {
        "metadata": {"name": "wl", "namespace": "ns"},
        "status": {
            "admission": {"clusterQueue": "cq"},
            "conditions": conditions,
            "admissionChecks": [{"name": n, "state": s, "message": ""} for n, s in checks],
        },
    }


def applied(obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "status": {**obj["status"], **patch["status"]}}


def test_the_only_check_ready_admits_in_the_same_write() -> None:
    obj = reserved(("multikueue", "Pending"))
    patch = checkstatus.ready_and_admitted(obj, "multikueue", "on w1", cluster_name="w1")
    assert patch is not None
    after = applied(obj, patch)
    assert ws.check_states(after) == {"multikueue": "Ready"}
    assert after["status"]["clusterName"] == "w1"
    assert ws.is_admitted(after)
    assert ws.has_reservation(after), "the reservation's condition is kept"


def test_another_check_still_pending_leaves_admission_to_the_workload_controller() -> None:
    obj = reserved(("multikueue", "Pending"), ("provisioning", "Pending"))
    patch = checkstatus.ready_and_admitted(obj, "multikueue", "on w1", cluster_name="w1")
    assert patch is not None
    after = applied(obj, patch)
    assert ws.check_states(after)["multikueue"] == "Ready"
    assert not ws.is_admitted(after)
    assert "conditions" not in patch["status"]


def test_nothing_to_write_when_already_ready_there() -> None:
    obj = reserved(("multikueue", "Ready"), admitted=True)
    obj["status"]["admissionChecks"][0]["message"] = "on w1"
    obj["status"]["clusterName"] = "w1"
    assert checkstatus.ready_and_admitted(obj, "multikueue", "on w1", cluster_name="w1") is None


def test_no_quota_no_write() -> None:
    obj = reserved(("multikueue", "Pending"))
    obj["status"]["conditions"] = []
    obj["status"].pop("admission")
    assert checkstatus.ready_and_admitted(obj, "multikueue", "on w1", cluster_name="w1") is None


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("", False, [], set(), set()), (False, "BadConfig", "MultiKueueConfig '' not found")),
        (
            ("workers", False, [], set(), set()),
            (False, "BadConfig", "MultiKueueConfig 'workers' not found"),
        ),
        (
            ("workers", True, ["w1", "w2"], {"w1", "w2"}, {"w1", "w2"}),
            (True, "Active", "The admission check is active"),
        ),
        (
            ("workers", True, ["w1", "w2"], {"w1"}, {"w1", "w2"}),
            (True, "SomeActiveClusters", "Inactive clusters: ['w2']"),
        ),
        (
            ("workers", True, ["w1", "w2"], {"w1"}, {"w1"}),
            (True, "SomeActiveClusters", "Missing clusters: ['w2']"),
        ),
        (
            ("workers", True, ["w1", "w2"], set(), {"w1"}),
            (False, "NoUsableClusters", "Missing clusters: ['w2'], Inactive clusters: ['w1']"),
        ),
    ],
    ids=["no config named", "config missing", "all up", "one down", "one missing", "none up"],
)
def test_the_admission_checks_active_condition_as_upstream_reports_it(
    args: tuple[str, bool, list[str], set[str], set[str]], expected: tuple[bool, str, str]
) -> None:
    assert checkstatus.check_active(*args) == expected
