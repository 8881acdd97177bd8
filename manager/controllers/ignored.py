"""Upstream fields kfed stores but does not act on, where ignoring them changes what a user
gets: each is told once, as a Warning Event on the object, when kfed first sees it
(docs/api.md, "Stored, not acted on").

Topology fields (a flavor's ``topologyName``, a pod set's ``topologyRequest``) are acted on
(docs/tas.md) and not told.
"""

from __future__ import annotations

from manager.api.view import at
from manager.kube.api import Obj


def workload_notes(wl: Obj) -> list[tuple[str, str]]:
    """(reason, message) for each ignored field of a Workload that asks for something."""
    spec = at(wl, "spec")
    notes = []
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
    spec = at(cq, "spec")
    notes = []
    mode = at(cq, "spec", "admissionScope").get("admissionMode")
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
    """Nothing of a flavor is ignored any more (its ``topologyName`` is acted on)."""
    return []
