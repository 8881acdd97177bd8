"""The manager quota that follows the workers (``quotaManagement: Automated``): the pure
decision. The ``test_upstream_*`` cases are upstream v0.19.2's ``TestCQReconcile`` cases
(pkg/controller/admissionchecks/multikueue/clusterqueue_test.go), one each, under their
names; the rest are kfed's (maintenance, idempotence, the property)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from manager.api.quantity import Quantity
from manager.federation.decisions import managerquota as mq
from manager.federation.decisions.managerquota import WorkerQueues
from manager.federation.engine.managerquota import _condition_changes

Obj = dict[str, Any]
NS = "ns"


def flavor(name: str, quota: dict[str, str | int] | None = None, **more: str | int) -> Obj:
    quota = {**(quota or {}), **more}
    return {"name": name, "resources": [{"name": r, "nominalQuota": q} for r, q in quota.items()]}


def cq(name: str, *groups: list[Obj], reserved: dict[str, str] | None = None) -> Obj:
    """A ClusterQueue with one resource group per argument (its flavors); each group covers
    the resources its flavors name."""
    resource_groups = []
    for flavors in groups:
        covered: list[str] = []
        for f in flavors:
            covered += [r["name"] for r in f["resources"] if r["name"] not in covered]
        resource_groups.append({"coveredResources": covered, "flavors": flavors})
    obj: Obj = {"metadata": {"name": name}, "spec": {"resourceGroups": resource_groups}}
    if reserved is not None:
        obj["status"] = {
            "flavorsReservation": [
                {
                    "name": "default",
                    "resources": [{"name": r, "total": q} for r, q in reserved.items()],
                }
            ]
        }
    return obj


def worker(
    name: str,
    lqs: dict[str, str],
    *cqs: Obj,
    connected: bool = True,
    maintenance: str = "",
) -> WorkerQueues:
    return WorkerQueues(
        name,
        connected=connected,
        maintenance=maintenance,
        local_queues={f"{NS}/{lq}": target for lq, target in lqs.items()},
        cluster_queues={c["metadata"]["name"]: c for c in cqs},
    )


AUTOMATED: Obj = {"spec": {"clusters": ["worker1", "worker2"], "quotaManagement": "Automated"}}


def decide(
    manager_cq: Obj,
    *workers: WorkerQueues,
    lqs: tuple[str, ...] = ("lq1",),
    config: Obj | None = AUTOMATED,
    federated: bool = True,
) -> mq.Decision:
    return mq.decide(
        manager_cq,
        federated=federated,
        config=config,
        local_queues=[f"{NS}/{lq}" for lq in lqs],
        workers=list(workers),
    )


def quotas(decision: mq.Decision) -> dict[str, str]:
    assert decision.resource_groups is not None
    (group,) = decision.resource_groups
    (only,) = group["flavors"]
    return {r["name"]: r["nominalQuota"] for r in only["resources"]}


AUTOMATED_TRUE = mq.Condition(True, "QuotaAutomated", mq.MESSAGE_AUTOMATED)


def test_upstream_multiple_resources_for_single_lqs_and_cqs() -> None:
    d = decide(
        cq("cq1", [flavor("default", cpu=0, memory=0)]),
        worker(
            "worker1", {"lq1": "w1-cq1"}, cq("w1-cq1", [flavor("default", cpu="10", memory="20Gi")])
        ),
        worker(
            "worker2", {"lq1": "w2-cq1"}, cq("w2-cq1", [flavor("default", cpu="5", memory="10Gi")])
        ),
    )
    assert quotas(d) == {"cpu": "15", "memory": "30Gi"}
    assert d.condition == AUTOMATED_TRUE
    assert mq.MESSAGE_AUTOMATED == (
        "ClusterQueue quota is automatically managed based on MultiKueue workers."
    )


def test_upstream_unrelated_cqs_and_inactive_workers_are_ignored() -> None:
    d = decide(
        cq("cq1", [flavor("default", cpu=0)]),
        worker(
            "worker1",
            {"lq1": "w1-cq1"},
            cq("w1-cq1", [flavor("default", cpu="10")]),
            cq("w1-cq-unrelated", [flavor("default", cpu="100")]),
        ),
        worker(
            "worker2",
            {"lq1": "w2-cq1"},
            cq("w2-cq1", [flavor("default", cpu="500")]),
            connected=False,
        ),
    )
    assert quotas(d) == {"cpu": "10"}
    assert d.counted == ("worker1",)
    assert d.condition == AUTOMATED_TRUE


def test_upstream_multiple_lqs_pointing_to_same_and_different_cqs_on_workers() -> None:
    d = decide(
        cq("cq1", [flavor("default", cpu=0)]),
        worker(
            "worker1",
            {"lq1": "w1-cq1", "lq2": "w1-cq1"},
            cq("w1-cq1", [flavor("default", cpu="10")]),
        ),
        worker(
            "worker2",
            {"lq1": "w2-cq1", "lq2": "w2-cq2"},
            cq("w2-cq1", [flavor("default", cpu="5")]),
            cq("w2-cq2", [flavor("default", cpu="8")]),
        ),
        lqs=("lq1", "lq2"),
    )
    assert quotas(d) == {"cpu": "23"}  # w1-cq1 counted once


def test_upstream_multiple_flavors_and_incompatible_resource_groups_across_workers() -> None:
    d = decide(
        cq("cq1", [flavor("default", cpu=0, gpu=0)]),
        worker(
            "worker1",
            {"lq1": "w1-cq1"},
            cq("w1-cq1", [flavor("default", cpu="10")], [flavor("gpu", gpu="1")]),
        ),
        worker(
            "worker2",
            {"lq1": "w2-cq1"},
            cq("w2-cq1", [flavor("default", cpu="5", gpu="2"), flavor("other", cpu="4", gpu="1")]),
        ),
    )
    assert quotas(d) == {"cpu": "19", "gpu": "4"}


def test_upstream_workers_with_a_subset_of_manager_resources() -> None:
    d = decide(
        cq("cq1", [flavor("default", cpu=0, memory=0, gpu=0)]),
        worker(
            "worker1", {"lq1": "w1-cq1"}, cq("w1-cq1", [flavor("default", cpu="10", memory="20Gi")])
        ),
        worker("worker2", {"lq1": "w2-cq1"}, cq("w2-cq1", [flavor("default", cpu="5")])),
    )
    assert quotas(d) == {"cpu": "15", "memory": "20Gi", "gpu": "0"}


def test_upstream_quota_automation_not_requested() -> None:
    manual = {"spec": {"clusters": ["worker1"], "quotaManagement": "Manual"}}
    d = decide(
        cq("cq1", [flavor("default", cpu="100")]),
        worker("worker1", {"lq1": "w1-cq1"}, cq("w1-cq1", [flavor("default", cpu="10")])),
        config=manual,
    )
    assert d.resource_groups is None
    assert d.condition == mq.Condition(
        False, "NotRequested", "MultiKueue manager quota automation has not been requested."
    )
    # Unset is Manual too.
    unset = decide(cq("cq1", [flavor("default", cpu="100")]), config={"spec": {"clusters": ["w"]}})
    assert unset.condition == d.condition and unset.resource_groups is None


def test_upstream_quota_automation_unsupported_for_multiple_manager_flavors() -> None:
    two_groups = cq("cq1", [flavor("default", cpu=0)], [flavor("gpu", gpu=0)])
    two_flavors = cq("cq1", [flavor("a", cpu=0), flavor("b", cpu=0)])
    for manager_cq in (two_groups, two_flavors, {"metadata": {"name": "cq1"}, "spec": {}}):
        d = decide(manager_cq)
        assert d.resource_groups is None
        assert d.condition == mq.Condition(
            False,
            "UnsupportedConfiguration",
            "Quota automation requires that the manager-side ClusterQueue has exactly one "
            "ResourceFlavor",
        )


def test_upstream_quota_automation_unsupported_for_missing_manager_covered_resources() -> None:
    d = decide(
        cq("cq1", [flavor("default", cpu=0)]),
        worker(
            "worker1", {"lq1": "w1-cq1"}, cq("w1-cq1", [flavor("default", memory="10Gi", gpu="2")])
        ),
    )
    assert d.resource_groups is None
    assert d.condition == mq.Condition(
        False,
        "UnsupportedConfiguration",
        "manager-side coveredResources is missing resources configured on workers: [gpu memory]",
    )


def test_upstream_not_a_multikueue_manager_cluster_queue() -> None:
    d = decide(cq("cq1", [flavor("default", cpu="100")]), federated=False)
    assert d == mq.Decision(None)  # the condition is removed, nothing else changes


def test_upstream_referenced_multikueue_config_not_found() -> None:
    d = decide(cq("cq1", [flavor("default", cpu="100")]), config=None)
    assert d.resource_groups is None
    assert d.condition == mq.Condition(
        False, "UnsupportedConfiguration", "The referenced MultiKueueConfig was not found."
    )


def test_a_worker_the_registry_does_not_know_gives_nothing() -> None:
    d = decide(
        cq("cq1", [flavor("default", cpu=0)]),
        worker("worker1", {"lq1": "w1-cq1"}, cq("w1-cq1", [flavor("default", cpu="4")])),
        WorkerQueues("worker2", connected=False),
    )
    assert quotas(d) == {"cpu": "4"}
    # No worker at all: every covered resource goes to zero.
    assert quotas(decide(cq("cq1", [flavor("default", cpu="7")]))) == {"cpu": "0"}


def test_a_worker_without_the_local_queue_gives_nothing() -> None:
    d = decide(
        cq("cq1", [flavor("default", cpu=9)]),
        worker("worker1", {"other": "w1-cq1"}, cq("w1-cq1", [flavor("default", cpu="4")])),
        worker("worker2", {"lq1": "missing-cq"}),
    )
    assert quotas(d) == {"cpu": "0"}


def test_a_cordoned_or_draining_worker_gives_what_it_has_reserved_never_more_than_its_quota() -> (
    None
):
    busy = cq(
        "w1-cq1",
        [flavor("default", cpu="8", memory="16Gi")],
        reserved={"cpu": "3", "memory": "40Gi"},
    )
    manager_cq = cq("cq1", [flavor("default", cpu=0, memory=0)])
    other = worker(
        "worker2", {"lq1": "w2-cq1"}, cq("w2-cq1", [flavor("default", cpu="4", memory="8Gi")])
    )
    for mode in ("cordon", "drain"):
        d = decide(manager_cq, worker("worker1", {"lq1": "w1-cq1"}, busy, maintenance=mode), other)
        assert quotas(d) == {"cpu": "7", "memory": "24Gi"}, mode
        assert d.condition == AUTOMATED_TRUE
    idle = cq("w1-cq1", [flavor("default", cpu="8", memory="16Gi")])
    d = decide(manager_cq, worker("worker1", {"lq1": "w1-cq1"}, idle, maintenance="cordon"), other)
    assert quotas(d) == {"cpu": "4", "memory": "8Gi"}
    d = decide(manager_cq, worker("worker1", {"lq1": "w1-cq1"}, idle), other)
    assert quotas(d) == {"cpu": "12", "memory": "24Gi"}


def test_quantities_add_up_exactly_in_kubernetes_form() -> None:
    d = decide(
        cq("cq1", [flavor("default", cpu=0, memory=0)]),
        worker("worker1", {"lq1": "a"}, cq("a", [flavor("default", cpu="1500m", memory="2G")])),
        worker("worker2", {"lq1": "b"}, cq("b", [flavor("default", cpu="1.7", memory="3G")])),
    )
    assert quotas(d) == {"cpu": "3200m", "memory": "5G"}


def test_nothing_to_write_when_the_quota_already_is_the_sum() -> None:
    workers = (
        worker("worker1", {"lq1": "a"}, cq("a", [flavor("default", cpu="10")])),
        worker("worker2", {"lq1": "b"}, cq("b", [flavor("default", cpu="5")])),
    )
    assert decide(cq("cq1", [flavor("default", cpu=15)]), *workers).resource_groups is None
    assert decide(cq("cq1", [flavor("default", cpu="15000m")]), *workers).resource_groups is None


def test_limits_are_replaced_and_the_rest_of_the_spec_kept() -> None:
    manager_cq = cq("cq1", [flavor("default", cpu="15")])
    group = manager_cq["spec"]["resourceGroups"][0]
    group["flavors"][0]["resources"][0]["borrowingLimit"] = "2"
    group["flavors"][0]["topologyName"] = "t"
    d = decide(
        manager_cq,
        worker("worker1", {"lq1": "a"}, cq("a", [flavor("default", cpu="15")])),
    )
    assert d.resource_groups == [
        {
            "coveredResources": ["cpu"],
            "flavors": [
                {
                    "name": "default",
                    "topologyName": "t",
                    "resources": [{"name": "cpu", "nominalQuota": "15"}],
                }
            ],
        }
    ]
    assert "borrowingLimit" in group["flavors"][0]["resources"][0], "the input is not edited"


# -- the property: the manager quota is the sum of the counted workers' ----------------

amounts = st.integers(min_value=0, max_value=10_000)
RESOURCES = ("cpu", "memory", "nvidia.com/gpu")


@st.composite
def fleets(draw: st.DrawFn) -> list[WorkerQueues]:
    fleet = []
    for i in range(draw(st.integers(min_value=0, max_value=5))):
        cqs = []
        for j in range(draw(st.integers(min_value=1, max_value=3))):
            quota = {r: draw(amounts) for r in draw(st.sets(st.sampled_from(RESOURCES)))}
            reserved = {r: str(draw(amounts)) for r in quota}
            cqs.append(cq(f"w{i}-cq{j}", [flavor("default", dict(quota))], reserved=reserved))
        lqs = {"lq1": draw(st.sampled_from([c["metadata"]["name"] for c in cqs]))}
        fleet.append(
            worker(
                f"worker{i}",
                lqs,
                *cqs,
                connected=draw(st.booleans()),
                maintenance=draw(st.sampled_from(["", "", "cordon", "drain"])),
            )
        )
    return fleet


@settings(max_examples=200, deadline=None)
@given(fleets(), st.randoms(use_true_random=False))
def test_the_quota_is_the_sum_of_the_counted_workers_and_deciding_again_changes_nothing(
    fleet: list[WorkerQueues], rng: Any
) -> None:
    manager_cq = cq("cq1", [flavor("default", dict.fromkeys(RESOURCES, 0))])
    d = decide(manager_cq, *fleet)
    expected: dict[str, int] = dict.fromkeys(RESOURCES, 0)
    for w in fleet:
        if not w.connected:
            continue
        (target,) = w.local_queues.values()
        target_cq = w.cluster_queues[target]
        for r in target_cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]:
            amount = int(r["nominalQuota"])
            if w.maintenance:
                reserved = target_cq["status"]["flavorsReservation"][0]["resources"]
                amount = min(
                    amount, next(int(x["total"]) for x in reserved if x["name"] == r["name"])
                )
            expected[r["name"]] += amount
    got = {r: Quantity.parse(q) for r, q in quotas(d).items()} if d.resource_groups else None
    if got is None:
        assert all(v == 0 for v in expected.values())  # already all zero
    else:
        assert got == {r: Quantity.parse(v) for r, v in expected.items()}
        assert d.counted == tuple(w.name for w in fleet if w.connected)
        after = {**manager_cq, "spec": {"resourceGroups": d.resource_groups}}
        assert decide(after, *fleet).resource_groups is None
    # The order of the workers does not matter.
    shuffled = list(fleet)
    rng.shuffle(shuffled)
    again = decide(manager_cq, *shuffled)
    assert again.resource_groups == d.resource_groups


# -- the condition as the loop writes it (engine/managerquota.py) ----------------------


def test_the_condition_is_rewritten_only_when_its_state_changes() -> None:
    obj: Obj = {"metadata": {"name": "cq1", "generation": 3}}
    conds: list[dict[str, Any]] = [{"type": "Active", "status": "True", "reason": "Ready"}]
    assert _condition_changes(conds, AUTOMATED_TRUE, obj)
    (written,) = [c for c in conds if c["type"] == mq.CONDITION]
    assert written["observedGeneration"] == 3
    assert (written["status"], written["reason"]) == ("True", "QuotaAutomated")
    # As upstream: the same status, reason and message is left as it is, whatever the
    # generation now (a quota written bumps it).
    assert not _condition_changes(conds, AUTOMATED_TRUE, {"metadata": {"generation": 4}})
    refused = mq.Condition(False, mq.REASON_UNSUPPORTED, mq.MESSAGE_ONE_FLAVOR)
    assert _condition_changes(conds, refused, obj)
    assert [c["type"] for c in conds] == ["Active", mq.CONDITION]
    assert _condition_changes(conds, None, obj)
    assert [c["type"] for c in conds] == ["Active"]
    assert not _condition_changes(conds, None, obj)
