"""Upstream fields kfed stores but does not act on, where ignoring them changes what a user
gets: each is told once, as a Warning Event on the object, when kfed first sees it
(docs/api.md, "Stored, not acted on").

A field that only carries bookkeeping (a pod index label in a topology request, which
upstream's MultiKueue manager puts on every Job's pod set) asks for nothing and is not told.
"""

from __future__ import annotations

from manager.kube.api import Obj

_TOPOLOGY_ASKS = ("required", "preferred", "unconstrained", "podSetSliceRequiredTopology")


def workload_notes(wl: Obj) -> list[tuple[str, str]]:
    """(reason, message) for each ignored field of a Workload that asks for something."""
    spec = wl.get("spec") or {}
    notes = []
    for pod_set in spec.get("podSets") or []:
        request = pod_set.get("topologyRequest") or {}
        asked = [f"{k}={request[k]}" for k in _TOPOLOGY_ASKS if request.get(k) not in (None, "")]
        if asked:
            notes.append(
                (
                    "TopologyRequestIgnored",
                    f"pod set {pod_set.get('name', 'main')} asks for a topology "
                    f"({', '.join(asked)}); kfed does not place pods by topology: they go "
                    "wherever the ClusterQueue's flavors allow",
                )
            )
    seconds = spec.get("maximumExecutionTimeSeconds")
    if seconds:
        notes.append(
            (
                "MaximumExecutionTimeIgnored",
                f"spec.maximumExecutionTimeSeconds ({seconds}) is not enforced by kfed: the "
                "workload runs until its job ends",
            )
        )
    if spec.get("preemptionGates"):
        notes.append(
            (
                "PreemptionGatesIgnored",
                "spec.preemptionGates are not honoured by kfed: it may preempt without "
                "waiting for them",
            )
        )
    return notes


def cluster_queue_notes(cq: Obj) -> list[tuple[str, str]]:
    spec = cq.get("spec") or {}
    notes = []
    mode = (spec.get("admissionScope") or {}).get("admissionMode")
    if mode == "UsageBasedAdmissionFairSharing":
        notes.append(
            (
                "AdmissionScopeIgnored",
                "spec.admissionScope asks for admission fair sharing, which kfed does not "
                "implement: its LocalQueues' workloads are admitted in queue order",
            )
        )
    if spec.get("concurrentAdmissionPolicy"):
        notes.append(
            (
                "ConcurrentAdmissionIgnored",
                "spec.concurrentAdmissionPolicy is not implemented by kfed: an admitted "
                "workload keeps its flavors",
            )
        )
    return notes


def flavor_notes(flavor: Obj) -> list[tuple[str, str]]:
    topology = (flavor.get("spec") or {}).get("topologyName")
    if not topology:
        return []
    return [
        (
            "TopologyIgnored",
            f"spec.topologyName ({topology}) asks for topology-aware scheduling, which kfed "
            "does not do: workloads given this flavor go wherever its node labels allow",
        )
    ]
