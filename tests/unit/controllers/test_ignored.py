"""Upstream fields kfed stores but ignores are told when they ask for something, and only
then (upstream's MultiKueue manager puts a bare pod index label on every pod set)."""

from __future__ import annotations

from typing import Any

from manager.api.clusterqueue import ClusterQueue
from manager.api.workload import Workload
from manager.controllers import ignored
from tests import builders as b


def workload(**spec: Any) -> dict[str, Any]:
    pod_set = {**b.pod_set(), **spec.pop("pod_set", {})}
    return b.workload("w", namespace="ns", queue="q", pod_sets=[pod_set], **spec)


def test_upstream_multikueue_s_bare_topology_request_is_kept_and_not_told() -> None:
    wl = workload(
        pod_set={"topologyRequest": {"podIndexLabel": "batch.kubernetes.io/job-completion-index"}}
    )
    model = Workload.model_validate(wl)
    assert model.spec.pod_sets[0].topology_request is not None
    assert ignored.workload_notes(wl) == []


def test_an_execution_limit_and_gates_are_told_and_a_topology_request_is_acted_on() -> None:
    wl = workload(
        pod_set={"topologyRequest": {"required": "cloud.example.com/rack"}},
        maximumExecutionTimeSeconds=600,
        preemptionGates=[{"name": "g"}],
    )
    Workload.model_validate(wl)  # stored as upstream writes them
    assert [reason for reason, _ in ignored.workload_notes(wl)] == [
        "MaximumExecutionTimeIgnored",
        "PreemptionGatesIgnored",
    ]


def test_a_cluster_queue_s_admission_fair_sharing_and_concurrent_admission_are_told() -> None:
    cq: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"},
            "concurrentAdmissionPolicy": {"migration": {"mode": "TryPreferredFlavors"}},
        },
    }
    ClusterQueue.model_validate(cq)
    assert [r for r, _ in ignored.cluster_queue_notes(cq)] == [
        "AdmissionScopeIgnored",
        "ConcurrentAdmissionIgnored",
    ]
    cq["spec"]["admissionScope"]["admissionMode"] = "NoAdmissionFairSharing"
    del cq["spec"]["concurrentAdmissionPolicy"]
    assert ignored.cluster_queue_notes(cq) == []


def test_a_flavor_s_topology_is_acted_on_not_told() -> None:
    flavor = {"metadata": {"name": "h100"}, "spec": {"topologyName": "default"}}
    assert ignored.flavor_notes(flavor) == []
