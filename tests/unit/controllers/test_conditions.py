"""Condition lists edited as Kubernetes controllers edit them, without touching the dicts
of the list they were copied from (an informer cache's own objects)."""

from __future__ import annotations

import copy

from manager.controllers import conditions


def test_a_changed_condition_is_replaced_never_edited_in_place() -> None:
    """The defect this guards: the queue status writer copied a cached ClusterQueue's
    condition list with ``list(...)``, set ``Active`` in it, and compared the result with
    the cached status: the same dicts, so a change of only ``Active`` was never written."""
    cached = {
        "conditions": [
            {
                "type": "Active",
                "status": "True",
                "reason": "Ready",
                "message": "Can admit new workloads",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    before = copy.deepcopy(cached)
    conds = list(cached["conditions"])
    changed = conditions.set_condition(
        conds, "Active", False, "FlavorNotFound", "Can't admit new workloads: flavor h100 missing"
    )
    assert changed
    assert cached == before, "the cached object is untouched"
    assert conds[0]["status"] == "False" and conds[0]["reason"] == "FlavorNotFound"
    assert conds[0]["lastTransitionTime"] != "2026-01-01T00:00:00Z", "it flipped: time moves"


def test_the_same_condition_is_not_a_change_and_a_new_one_is_appended() -> None:
    conds: conditions.Conditions = []
    assert conditions.set_condition(conds, "Active", True, "Ready", "ok", now="t1")
    assert not conditions.set_condition(conds, "Active", True, "Ready", "ok", now="t2")
    assert conditions.set_condition(conds, "Active", True, "Ready", "still ok", now="t3")
    assert conds == [
        {
            "type": "Active",
            "status": "True",
            "reason": "Ready",
            "message": "still ok",
            "lastTransitionTime": "t1",
        }
    ], "a message change keeps the transition time"
