"""Why a workload waits, in upstream v0.19's words (its UnadmittedWorkloadsObservability
gate; kfed's --unadmitted-workloads-observability): each situation the core reports gets the
QuotaReserved=False reason upstream's scheduler or workload controller writes for the same
situation, and the default reasons (Pending, Inadmissible) stay what they were."""

from __future__ import annotations

import pytest

from manager.api import constants as C
from manager.core import AdmissionCore, PendingKind, PendingReason, PreemptionPolicy, StopPolicy

from .builders import (
    key,
    make_cluster_queue,
    make_flavor,
    make_flavor_quotas,
    make_local_queue,
    make_workload,
    run_until_quiet,
)

UPSTREAM_V019 = {
    C.REASON_PENDING_EVALUATION,
    C.REASON_WAITING_FOR_QUOTA,
    C.REASON_NO_MATCHING_FLAVOR,
    C.REASON_EXCEEDS_MAX_QUOTA,
    C.REASON_TOPOLOGY_PLACEMENT_FAILED,
    C.REASON_WAITING_FOR_PREEMPTED_WORKLOADS,
    C.REASON_MISCONFIGURED,
    C.REASON_SUSPENDED,
}
"""upstream v0.19.2's WorkloadQuotaReservedReason* values kfed can be in the situation of
(not WaitingForPodsReady: kfed has no waitForPodsReady)."""


@pytest.mark.parametrize("kind", list(PendingKind))
def test_every_kind_has_one_of_upstreams_reasons_and_keeps_its_default(kind: PendingKind) -> None:
    reason = PendingReason(kind, "why")
    assert reason.fine_reason in UPSTREAM_V019
    assert reason.condition_reason in (C.REASON_PENDING, C.REASON_INADMISSIBLE)
    assert reason.quota_reserved_reason(False) == reason.condition_reason
    assert reason.quota_reserved_reason(True) == reason.fine_reason
    # What upstream files under Inadmissible by default, it calls Misconfigured or Suspended.
    inadmissible = reason.condition_reason == C.REASON_INADMISSIBLE
    assert inadmissible == (reason.fine_reason in (C.REASON_MISCONFIGURED, C.REASON_SUSPENDED))


def gpu_core(gpus: int = 2, *, preempt: bool = False, stopped: bool = False) -> AdmissionCore:
    core = AdmissionCore()
    core.upsert_flavor(make_flavor("a100", labels={"gpu": "a100"}))
    cq = make_cluster_queue("cq").resource_group(
        make_flavor_quotas("a100").resource("nvidia.com/gpu", gpus).obj()
    )
    if preempt:
        cq = cq.preemption(within=PreemptionPolicy.LOWER_PRIORITY)
    if stopped:
        cq = cq.stop_policy(StopPolicy.HOLD)
    core.upsert_cluster_queue(cq.obj())
    core.upsert_local_queue(make_local_queue("lq", "default", "cq"))
    return core


def fine(core: AdmissionCore, name: str) -> str:
    reason = core.pending_reason(key(name))
    assert reason is not None, name
    return reason.fine_reason


def test_not_evaluated_yet_is_pending_evaluation() -> None:
    core = gpu_core()
    core.add_workload(make_workload("fresh").queue("lq").request("nvidia.com/gpu", 1).obj())
    assert fine(core, "fresh") == C.REASON_PENDING_EVALUATION


def test_too_little_quota_now_is_waiting_for_quota_and_never_enough_exceeds_max_quota() -> None:
    core = gpu_core()
    core.add_workload(make_workload("running").queue("lq").request("nvidia.com/gpu", 2).obj())
    run_until_quiet(core, now=1)
    core.add_workload(
        make_workload("waiting").queue("lq").request("nvidia.com/gpu", 1).created(2).obj()
    )
    core.add_workload(
        make_workload("big").queue("lq").request("nvidia.com/gpu", 3).created(3).obj()
    )
    run_until_quiet(core, now=4)
    assert fine(core, "waiting") == C.REASON_WAITING_FOR_QUOTA
    assert fine(core, "big") == C.REASON_EXCEEDS_MAX_QUOTA
    # the reasons Kueue writes by default, unchanged
    for name in ("waiting", "big"):
        reason = core.pending_reason(key(name))
        assert reason is not None and reason.condition_reason == C.REASON_PENDING


def test_no_flavor_for_its_node_selector_is_no_matching_flavor() -> None:
    core = gpu_core()
    core.add_workload(
        make_workload("elsewhere")
        .queue("lq")
        .node_selector("gpu", "h100")
        .request("nvidia.com/gpu", 1)
        .obj()
    )
    run_until_quiet(core, now=1)
    assert fine(core, "elsewhere") == C.REASON_NO_MATCHING_FLAVOR


def test_a_missing_local_queue_is_misconfigured_and_a_stopped_queue_suspended() -> None:
    core = gpu_core(stopped=True)
    core.add_workload(make_workload("lost").queue("nope").request("nvidia.com/gpu", 1).obj())
    core.add_workload(make_workload("held").queue("lq").request("nvidia.com/gpu", 1).obj())
    run_until_quiet(core, now=1)
    assert fine(core, "lost") == C.REASON_MISCONFIGURED
    assert fine(core, "held") == C.REASON_SUSPENDED


def test_a_preemptor_waits_for_its_victims_as_waiting_for_preempted_workloads() -> None:
    core = gpu_core(gpus=1, preempt=True)
    core.add_workload(
        make_workload("victim").queue("lq").priority(1).request("nvidia.com/gpu", 1).obj()
    )
    run_until_quiet(core, now=1)
    core.add_workload(
        make_workload("urgent")
        .queue("lq")
        .priority(10)
        .created(2)
        .request("nvidia.com/gpu", 1)
        .obj()
    )
    results = run_until_quiet(core, now=3)
    assert any(r.preempted for r in results)
    assert fine(core, "urgent") == C.REASON_WAITING_FOR_PREEMPTED_WORKLOADS
