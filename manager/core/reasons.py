"""Why a workload is still pending, in words a person can act on.

Every pending workload carries a ``PendingReason``: a machine-readable kind (so
controllers and tests need not parse text) and a message for the Workload's
QuotaReserved=False condition, e.g. ``insufficient unused quota for nvidia.com/gpu in
flavor rtx-a1000: 1 requested, 0 available``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum

from manager.api import constants as C
from manager.core.model import ClusterQueueName, FlavorName, LocalQueueKey, Namespace, ResourceName


class PendingKind(StrEnum):
    """What keeps a workload pending. Values are stable identifiers, not prose."""

    QUEUED = "Queued"
    """Not evaluated yet: waiting for its turn at the head of its ClusterQueue."""
    LOCAL_QUEUE_MISSING = "LocalQueueMissing"
    LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
    CLUSTER_QUEUE_MISSING = "ClusterQueueMissing"
    CLUSTER_QUEUE_INACTIVE = "ClusterQueueInactive"
    CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
    NAMESPACE_NOT_SELECTED = "NamespaceNotSelected"
    CHECK_CONTROLLER_MISSING = "CheckControllerMissing"
    """Its job is left to an admission check controller its ClusterQueue does not use."""
    NOT_CHARGEABLE = "NotChargeable"
    """Its requests cannot be charged as submitted (device claims kfed cannot count)."""
    """Its job is left to an admission check controller its ClusterQueue does not use."""
    NO_MATCHING_FLAVOR = "NoMatchingFlavor"
    """No flavor is compatible (selectors, affinity, taints, uncovered resource)."""
    EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
    """More than the ClusterQueue could ever get, even with the whole cohort free."""
    WAITING_FOR_QUOTA = "WaitingForQuota"
    WAITING_FOR_PREEMPTION = "WaitingForPreemption"
    """Victims were chosen; waiting for them to release their quota."""
    TOPOLOGY_PLACEMENT_FAILED = "TopologyPlacementFailed"
    """Quota is there, but no domain of the flavor's topology holds the pods as asked."""
    BLOCKED_BY_HEAD = "BlockedByHead"
    """StrictFIFO: an older or higher-priority workload ahead of it doesn't fit yet."""
    BACKOFF = "Backoff"
    """Evicted; waiting until its requeue time."""
    RETRY = "Retry"
    """Lost a race within one scheduling cycle; tried again in the next."""


_INADMISSIBLE = frozenset(
    {
        PendingKind.LOCAL_QUEUE_MISSING,
        PendingKind.LOCAL_QUEUE_STOPPED,
        PendingKind.CLUSTER_QUEUE_MISSING,
        PendingKind.CLUSTER_QUEUE_INACTIVE,
        PendingKind.CLUSTER_QUEUE_STOPPED,
        PendingKind.NAMESPACE_NOT_SELECTED,
        PendingKind.CHECK_CONTROLLER_MISSING,
        PendingKind.NOT_CHARGEABLE,
    }
)


_FINE: dict[PendingKind, str] = {
    PendingKind.QUEUED: C.REASON_PENDING_EVALUATION,
    PendingKind.LOCAL_QUEUE_MISSING: C.REASON_MISCONFIGURED,
    PendingKind.LOCAL_QUEUE_STOPPED: C.REASON_SUSPENDED,
    PendingKind.CLUSTER_QUEUE_MISSING: C.REASON_MISCONFIGURED,
    PendingKind.CLUSTER_QUEUE_INACTIVE: C.REASON_SUSPENDED,
    PendingKind.CLUSTER_QUEUE_STOPPED: C.REASON_SUSPENDED,
    PendingKind.NAMESPACE_NOT_SELECTED: C.REASON_MISCONFIGURED,
    PendingKind.CHECK_CONTROLLER_MISSING: C.REASON_MISCONFIGURED,
    PendingKind.NOT_CHARGEABLE: C.REASON_MISCONFIGURED,
    PendingKind.NO_MATCHING_FLAVOR: C.REASON_NO_MATCHING_FLAVOR,
    PendingKind.EXCEEDS_MAX_QUOTA: C.REASON_EXCEEDS_MAX_QUOTA,
    PendingKind.WAITING_FOR_QUOTA: C.REASON_WAITING_FOR_QUOTA,
    PendingKind.WAITING_FOR_PREEMPTION: C.REASON_WAITING_FOR_PREEMPTED_WORKLOADS,
    PendingKind.TOPOLOGY_PLACEMENT_FAILED: C.REASON_TOPOLOGY_PLACEMENT_FAILED,
    PendingKind.BLOCKED_BY_HEAD: C.REASON_PENDING_EVALUATION,
    PendingKind.BACKOFF: C.REASON_PENDING_EVALUATION,
    PendingKind.RETRY: C.REASON_WAITING_FOR_QUOTA,
}
"""Upstream v0.19's reason for each kind, as its scheduler and workload controller write them
with UnadmittedWorkloadsObservability on:

- not evaluated yet, behind a StrictFIFO head that does not fit, or back from an eviction
  (its backoff included): ``PendingEvaluation``, upstream's reason on a workload's creation
  and when an evicted one gives its quota back;
- a missing LocalQueue or ClusterQueue, a namespace the ClusterQueue does not select, requests
  that cannot be charged (upstream: DRA errors), a job left to a controller its queue lacks
  (kfed's own check): ``Misconfigured``; a stopped or inactive queue: ``Suspended``;
- lost a race within a cycle (another workload took the quota, or overlapping preemption
  targets): ``WaitingForQuota``, as upstream's scheduler writes for a skipped entry;
- waiting for its victims: ``WaitingForPreemptedWorkloads``; the flavor assigner's own
  outcomes keep their names (``NoMatchingFlavor``, ``ExceedsMaxQuota``, ``WaitingForQuota``,
  ``TopologyPlacementFailed``)."""


@dataclass(frozen=True, slots=True)
class PendingReason:
    kind: PendingKind
    message: str

    @property
    def condition_reason(self) -> str:
        """The QuotaReserved=False condition reason Kueue writes by default (v0.19 still, with
        UnadmittedWorkloadsObservability off): Inadmissible or Pending."""
        return C.REASON_INADMISSIBLE if self.kind in _INADMISSIBLE else C.REASON_PENDING

    @property
    def fine_reason(self) -> str:
        """The reason upstream v0.19 writes instead with UnadmittedWorkloadsObservability on:
        WaitingForQuota, NoMatchingFlavor, Misconfigured, ... (see ``_FINE``)."""
        return _FINE[self.kind]

    def quota_reserved_reason(self, fine: bool) -> str:
        """The QuotaReserved=False reason to write: ``fine_reason`` when asked for
        (``--unadmitted-workloads-observability``), else ``condition_reason``."""
        return self.fine_reason if fine else self.condition_reason


_BINARY_SUFFIXES = (
    ("Ei", 2**60),
    ("Pi", 2**50),
    ("Ti", 2**40),
    ("Gi", 2**30),
    ("Mi", 2**20),
    ("Ki", 2**10),
)
_BYTE_RESOURCES = ("memory", "ephemeral-storage", "storage")


def format_quantity(resource: ResourceName, value: int) -> str:
    """Render a core int the way a person wrote it: cpu from milli-units, bytes as Gi/Mi."""
    if resource == "cpu":
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if resource in _BYTE_RESOURCES or resource.startswith("hugepages-"):
        for suffix, size in _BINARY_SUFFIXES:
            if value != 0 and value % size == 0:
                return f"{value // size}{suffix}"
    return str(value)


def queued() -> PendingReason:
    return PendingReason(PendingKind.QUEUED, "waiting for the scheduler to evaluate the workload")


def local_queue_missing(lq: LocalQueueKey) -> PendingReason:
    return PendingReason(PendingKind.LOCAL_QUEUE_MISSING, f"LocalQueue {lq} doesn't exist")


def local_queue_stopped(lq: LocalQueueKey) -> PendingReason:
    return PendingReason(PendingKind.LOCAL_QUEUE_STOPPED, f"LocalQueue {lq} is stopped")


def cluster_queue_missing(cq: ClusterQueueName) -> PendingReason:
    return PendingReason(PendingKind.CLUSTER_QUEUE_MISSING, f"ClusterQueue {cq} doesn't exist")


def cluster_queue_inactive(cq: ClusterQueueName, why: str) -> PendingReason:
    return PendingReason(
        PendingKind.CLUSTER_QUEUE_INACTIVE, f"ClusterQueue {cq} is inactive: {why}"
    )


def cluster_queue_stopped(cq: ClusterQueueName) -> PendingReason:
    return PendingReason(PendingKind.CLUSTER_QUEUE_STOPPED, f"ClusterQueue {cq} is stopped")


def namespace_not_selected(namespace: Namespace, cq: ClusterQueueName) -> PendingReason:
    return PendingReason(
        PendingKind.NAMESPACE_NOT_SELECTED,
        f"namespace {namespace} is not selected by ClusterQueue {cq}'s namespaceSelector",
    )


def check_controller_missing(controller: str, cq: ClusterQueueName) -> PendingReason:
    return PendingReason(
        PendingKind.CHECK_CONTROLLER_MISSING,
        f"its job is managed by {controller} (spec.managedBy), but ClusterQueue {cq} has no "
        f"admission check of that controller, so nothing would ever run it there: move it to a "
        "queue that has one, or resubmit it without spec.managedBy",
    )


def no_single_place(cq: ClusterQueueName, notes: list[str]) -> PendingReason:
    return PendingReason(
        PendingKind.NO_MATCHING_FLAVOR,
        f"couldn't assign flavors that one worker of ClusterQueue {cq} offers together: "
        + "; ".join(notes),
    )


def topology_placement_failed(pod_set: str, why: str) -> PendingReason:
    return PendingReason(
        PendingKind.TOPOLOGY_PLACEMENT_FAILED,
        f"couldn't assign flavors to pod set {pod_set}: {why}",
    )


def blocked_by_head(cq: ClusterQueueName, head: str) -> PendingReason:
    return PendingReason(
        PendingKind.BLOCKED_BY_HEAD,
        f"ClusterQueue {cq} is StrictFIFO and its head {head} can't be admitted yet",
    )


def backoff(until: float) -> PendingReason:
    """``until``: the Unix time of the requeue, written as a time people read (it shows in
    the Pending Event and on the dashboard)."""
    when = dt.datetime.fromtimestamp(until, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return PendingReason(PendingKind.BACKOFF, f"requeued after eviction; eligible again at {when}")


def waiting_for_preemption(count: int) -> PendingReason:
    return PendingReason(
        PendingKind.WAITING_FOR_PREEMPTION,
        f"waiting for {count} preempted workload(s) to release their quota",
    )


def retry(why: str) -> PendingReason:
    return PendingReason(PendingKind.RETRY, why)


# Fragments produced while assigning flavors; flavorassigner joins them into one reason.


def insufficient_unused_quota(
    resource: ResourceName, flavor: FlavorName, requested: int, available: int
) -> str:
    return (
        f"insufficient unused quota for {resource} in flavor {flavor}: "
        f"{format_quantity(resource, requested)} requested, "
        f"{format_quantity(resource, max(0, available))} available"
    )


def exceeds_max_quota(
    resource: ResourceName, flavor: FlavorName, requested: int, maximum: int, cq: ClusterQueueName
) -> str:
    return (
        f"insufficient quota for {resource} in flavor {flavor}: "
        f"{format_quantity(resource, requested)} requested, but ClusterQueue {cq} can get "
        f"at most {format_quantity(resource, max(0, maximum))} even when its cohort is idle"
    )


def resource_not_covered(resource: ResourceName, cq: ClusterQueueName) -> str:
    return f"resource {resource} unavailable in ClusterQueue {cq}"


def flavor_not_found(flavor: FlavorName) -> str:
    return f"flavor {flavor} not found"


def flavor_mismatch(flavor: FlavorName, why: str) -> str:
    return f"flavor {flavor} {why}"


def untolerated_taint(flavor: FlavorName, taint: str) -> str:
    return f"untolerated taint {taint} in flavor {flavor}"
