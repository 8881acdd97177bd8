"""Device claims charged to quota (docs/dra.md) are ordinary requests to the admission core:
a workload whose Workload records ``example.com/gpu: 2`` per pod is admitted, queued,
borrows and preempts exactly as one whose containers request it."""

from __future__ import annotations

import json
from typing import Any

from manager import core
from manager.api import draannotations
from manager.api.workload import Workload
from manager.controllers import convert

from .builders import (
    admitted_keys,
    key,
    make_cluster_queue,
    make_flavor,
    make_flavor_quotas,
    make_local_queue,
    run_until_quiet,
)

GPU = "example.com/gpu"


def dra_workload(
    name: str,
    gpus_per_pod: int,
    *,
    pods: int = 1,
    queue: str = "lq",
    priority: int = 0,
    created: float = 0.0,
    refused: str | None = None,
) -> core.Workload:
    """A Workload as the job controller creates it for pods claiming ``gpus_per_pod``
    devices of a mapped class, converted as the Workload controller converts it."""
    body: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "annotations": {
                draannotations.CHARGE_ANNOTATION: json.dumps({"main": {GPU: str(gpus_per_pod)}})
            },
        },
        "spec": {
            "queueName": queue,
            "podSets": [
                {
                    "name": "main",
                    "count": pods,
                    "template": {
                        "spec": {
                            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "busybox",
                                    "resources": {
                                        "requests": {"cpu": "1"},
                                        "claims": [{"name": "gpu"}],
                                    },
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }
    if refused is not None:
        body["metadata"]["annotations"] = {draannotations.REFUSED_ANNOTATION: refused}
    return convert.workload(Workload.model_validate(body), priority=priority, creation_time=created)


def dra_core(
    gpus: int,
    *,
    peer_gpus: int | None = None,
    within: core.PreemptionPolicy = core.PreemptionPolicy.NEVER,
) -> core.AdmissionCore:
    """ClusterQueue ``cq`` (LocalQueue ``lq``) with ``gpus`` of the mapped resource, and
    optionally ``peer`` (LocalQueue ``peer``) beside it in cohort ``co``."""
    admission = core.AdmissionCore()
    admission.upsert_flavor(make_flavor("dev"))
    quotas = make_flavor_quotas("dev").resource("cpu", 100).resource(GPU, gpus).obj()
    cq = make_cluster_queue("cq").resource_group(quotas).preemption(within=within)
    if peer_gpus is not None:
        cq = cq.cohort("co")
        peer = make_flavor_quotas("dev").resource("cpu", 100).resource(GPU, peer_gpus).obj()
        admission.upsert_cluster_queue(
            make_cluster_queue("peer").cohort("co").resource_group(peer).obj()
        )
        admission.upsert_local_queue(make_local_queue("peer", "default", "peer"))
    admission.upsert_cluster_queue(cq.obj())
    admission.upsert_local_queue(make_local_queue("lq", "default", "cq"))
    return admission


def test_the_device_charge_is_admitted_and_shows_in_resource_usage() -> None:
    admission = dra_core(8)
    admission.add_workload(dra_workload("three-pods", 2, pods=3))

    (result,) = run_until_quiet(admission, now=1)

    (admit,) = result.admitted
    (psa,) = convert.admission_to_status(admit.admission)["podSetAssignments"]
    assert psa["resourceUsage"] == {"cpu": "3", GPU: "6"}
    assert psa["flavors"] == {"cpu": "dev", GPU: "dev"}


def test_a_second_workload_waits_for_the_devices_with_the_reason() -> None:
    admission = dra_core(2)
    admission.add_workload(dra_workload("first", 2))
    admission.add_workload(dra_workload("second", 2, created=1))

    admitted = [a for r in run_until_quiet(admission, now=2) for a in admitted_keys(r)]

    assert admitted == ["default/first"]
    reason = admission.pending_reason(key("second"))
    assert reason is not None and reason.kind is core.PendingKind.WAITING_FOR_QUOTA
    assert f"insufficient unused quota for {GPU} in flavor dev: 2 requested, 0 available" in (
        reason.message
    )

    admission.finish(key("first"))
    assert admitted_keys(admission.schedule(now=3)) == ["default/second"]


def test_devices_are_borrowed_from_the_cohort() -> None:
    admission = dra_core(2, peer_gpus=4)
    admission.add_workload(dra_workload("big", 2, pods=2))

    (result,) = run_until_quiet(admission, now=1)

    (admit,) = result.admitted
    assert admit.borrowing
    assert admit.usage[(core.FlavorName("dev"), core.ResourceName(GPU))] == 4


def test_a_higher_priority_workload_preempts_for_devices() -> None:
    admission = dra_core(2, within=core.PreemptionPolicy.LOWER_PRIORITY)
    admission.add_workload(dra_workload("low", 2))
    assert admitted_keys(admission.schedule(now=1)) == ["default/low"]

    admission.add_workload(dra_workload("high", 2, priority=10, created=2))
    result = admission.schedule(now=3)

    (preempt,) = result.preempted
    assert preempt.preemptor == "default/high"
    assert [v.workload for v in preempt.victims] == ["default/low"]
    admission.evict(key("low"), now=4)
    assert admitted_keys(admission.schedule(now=4)) == ["default/high"]


def test_fair_sharing_counts_the_devices_in_the_dominant_share() -> None:
    """Two queues of one cohort with no devices of their own: the one already holding
    devices gets none of what is freed before the other has its share."""
    admission = core.AdmissionCore(fair_sharing=core.FairSharingConfig())
    admission.upsert_flavor(make_flavor("dev"))
    for name in ("a", "b"):
        quotas = make_flavor_quotas("dev").resource("cpu", 100).resource(GPU, 0).obj()
        admission.upsert_cluster_queue(
            make_cluster_queue(name).cohort("co").resource_group(quotas).obj()
        )
        admission.upsert_local_queue(make_local_queue(name, "default", name))
    pool = make_flavor_quotas("dev").resource("cpu", 0).resource(GPU, 4).obj()
    admission.upsert_cluster_queue(
        make_cluster_queue("pool").cohort("co").resource_group(pool).obj()
    )
    admission.add_workload(dra_workload("a-1", 2, queue="a"))
    assert admitted_keys(admission.schedule(now=1)) == ["default/a-1"]

    admission.add_workload(dra_workload("a-2", 2, queue="a", created=2))
    admission.add_workload(dra_workload("b-1", 2, queue="b", created=3))
    admitted = [a for r in run_until_quiet(admission, now=4) for a in admitted_keys(r)]

    assert admitted[0] == "default/b-1"


def test_a_workload_whose_claims_could_not_be_charged_is_never_admitted() -> None:
    """Pending, Inadmissible, with the reason recorded when it was created (jobs.py)."""
    admission = dra_core(8)
    admission.add_workload(dra_workload("refused", 2, refused="DeviceClass x is not mapped"))

    assert [a for r in run_until_quiet(admission, now=1) for a in admitted_keys(r)] == []
    reason = admission.pending_reason(key("refused"))
    assert reason is not None and reason.kind is core.PendingKind.NOT_CHARGEABLE
    assert reason.message == "DeviceClass x is not mapped"
    assert reason.condition_reason == "Inadmissible"
