"""Well-known names shared with upstream Kueue, and kfed's own annotation keys.

Names under ``kueue.x-k8s.io`` carry the same meaning as in upstream Kueue, so that a
worker running upstream Kueue and a kfed manager understand each other. kfed's own
extensions are labels and annotations under ``kfed.io/``; kfed never adds fields to the
Kueue schemas. This module has no dependencies: the admission core imports it.
"""

from __future__ import annotations

from typing import Final

# --- API group ---------------------------------------------------------------------------

GROUP: Final = "kueue.x-k8s.io"
VERSION: Final = "v1beta2"
"""The only version kfed serves and stores (upstream also serves the deprecated v1beta1)."""
API_VERSION: Final = "kueue.x-k8s.io/v1beta2"

# --- labels and annotations (upstream Kueue) ----------------------------------------------

QUEUE_NAME_LABEL: Final = "kueue.x-k8s.io/queue-name"
"""On a Job: the LocalQueue (in the Job's namespace) it is submitted to."""
PRIORITY_CLASS_LABEL: Final = "kueue.x-k8s.io/priority-class"
"""On a Job: the WorkloadPriorityClass of its Workload."""
JOB_UID_LABEL: Final = "kueue.x-k8s.io/job-uid"
"""On a Workload: the UID of the Job that owns it."""
PREBUILT_WORKLOAD_LABEL: Final = "kueue.x-k8s.io/prebuilt-workload-name"
"""On a Job: use this existing Workload instead of creating one (set on remote Jobs)."""
MULTIKUEUE_ORIGIN_LABEL: Final = "kueue.x-k8s.io/multikueue-origin"
"""On remote objects: which manager created them (garbage collection filters on it)."""

# --- MultiKueue ----------------------------------------------------------------------------

MULTIKUEUE_CONTROLLER_NAME: Final = "kueue.x-k8s.io/multikueue"
"""AdmissionCheck ``spec.controllerName`` handled by the MultiKueue (kfed) controller."""
MULTIKUEUE_MANAGED_BY: Final = "kueue.x-k8s.io/multikueue"
"""Job ``spec.managedBy`` on the manager: the built-in Job controller leaves it alone."""
MULTIKUEUE_KUBECONFIG_SECRET_KEY: Final = "kubeconfig"
"""The key of a MultiKueueCluster's Secret that holds the worker's kubeconfig."""
MULTIKUEUE_DISPATCHER_ALL_AT_ONCE: Final = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
MULTIKUEUE_DISPATCHER_INCREMENTAL: Final = "kueue.x-k8s.io/multikueue-dispatcher-incremental"

# --- condition types -----------------------------------------------------------------------

# Workload
QUOTA_RESERVED: Final = "QuotaReserved"
"""The workload holds quota in a ClusterQueue (admission checks may still be pending)."""
ADMITTED: Final = "Admitted"
"""Quota is reserved and every admission check is Ready: the job may run."""
EVICTED: Final = "Evicted"
"""The workload lost its admission (preempted, deactivated, check failed...)."""
PREEMPTED: Final = "Preempted"
"""The eviction was a preemption; the reason says where (InClusterQueue, InCohort...)."""
REQUEUED: Final = "Requeued"
"""The evicted workload is (or is not yet) back in its queue."""
FINISHED: Final = "Finished"
"""The job finished, successfully or not."""
PODS_READY: Final = "PodsReady"
DEACTIVATION_TARGET: Final = "DeactivationTarget"
"""A temporary marker asking the workload controller to set ``spec.active=false``."""

# ClusterQueue, LocalQueue, AdmissionCheck, MultiKueueCluster
ACTIVE: Final = "Active"
"""The object is usable (for a MultiKueueCluster: the worker is connected)."""
CREDENTIALS_EXPIRING: Final = "kfed.io/CredentialsExpiring"
"""MultiKueueCluster condition: its kubeconfig's token or certificate runs out soon (or did)."""
REASON_CREDENTIALS_EXPIRING: Final = "CredentialsExpiring"
REASON_CREDENTIALS_EXPIRED: Final = "CredentialsExpired"
REASON_CREDENTIALS_VALID: Final = "CredentialsValid"

# --- condition reasons ---------------------------------------------------------------------

# QuotaReserved / Admitted / Pending
REASON_QUOTA_RESERVED: Final = "QuotaReserved"
REASON_ADMITTED: Final = "Admitted"
REASON_PENDING: Final = "Pending"
REASON_INADMISSIBLE: Final = "Inadmissible"
# Upstream v0.19's finer QuotaReserved=False reasons, written instead of the two above with
# its UnadmittedWorkloadsObservability feature gate (kfed: --unadmitted-workloads-observability).
REASON_PENDING_EVALUATION: Final = "PendingEvaluation"
REASON_WAITING_FOR_QUOTA: Final = "WaitingForQuota"
REASON_NO_MATCHING_FLAVOR: Final = "NoMatchingFlavor"
REASON_EXCEEDS_MAX_QUOTA: Final = "ExceedsMaxQuota"
REASON_TOPOLOGY_PLACEMENT_FAILED: Final = "TopologyPlacementFailed"
REASON_WAITING_FOR_PREEMPTED_WORKLOADS: Final = "WaitingForPreemptedWorkloads"
REASON_MISCONFIGURED: Final = "Misconfigured"
REASON_SUSPENDED: Final = "Suspended"
PENDING_REASONS: Final = frozenset(
    {
        REASON_PENDING,
        REASON_INADMISSIBLE,
        REASON_PENDING_EVALUATION,
        REASON_WAITING_FOR_QUOTA,
        REASON_NO_MATCHING_FLAVOR,
        REASON_EXCEEDS_MAX_QUOTA,
        REASON_TOPOLOGY_PLACEMENT_FAILED,
        REASON_WAITING_FOR_PREEMPTED_WORKLOADS,
        REASON_MISCONFIGURED,
        REASON_SUSPENDED,
    }
)
"""Every QuotaReserved=False reason kfed writes for a pending workload, legacy and fine: the
reasons of its Warning Events too."""
REASON_NO_RESERVATION: Final = "NoReservation"
"""Admitted=False while the workload holds no quota."""
REASON_UNSATISFIED_ADMISSION_CHECKS: Final = "UnsatisfiedAdmissionChecks"
"""Admitted=False while quota is held and an admission check is not Ready (upstream v0.19's,
with UnadmittedWorkloadsObservability; kfed uses it in ``kueue_unadmitted_workloads``)."""

# Evicted
REASON_EVICTED_BY_PREEMPTION: Final = "Preempted"
REASON_EVICTED_BY_PODS_READY_TIMEOUT: Final = "PodsReadyTimeout"
REASON_EVICTED_BY_ADMISSION_CHECK: Final = "AdmissionCheck"
REASON_EVICTED_BY_CLUSTER_QUEUE_STOPPED: Final = "ClusterQueueStopped"
REASON_EVICTED_BY_LOCAL_QUEUE_STOPPED: Final = "LocalQueueStopped"
REASON_DEACTIVATED: Final = "Deactivated"

# Preempted
REASON_IN_CLUSTER_QUEUE: Final = "InClusterQueue"
REASON_IN_COHORT_RECLAMATION: Final = "InCohortReclamation"
REASON_IN_COHORT_FAIR_SHARING: Final = "InCohortFairSharing"
REASON_IN_COHORT_RECLAIM_WHILE_BORROWING: Final = "InCohortReclaimWhileBorrowing"

# Requeued
REASON_BACKOFF_FINISHED: Final = "BackoffFinished"
REASON_REACTIVATED: Final = "Reactivated"
REASON_REQUEUING_LIMIT_EXCEEDED: Final = "RequeuingLimitExceeded"

# Finished
REASON_SUCCEEDED: Final = "Succeeded"
REASON_FAILED: Final = "Failed"

# Active (ClusterQueue)
REASON_READY: Final = "Ready"
REASON_STOPPED: Final = "Stopped"
REASON_FLAVOR_NOT_FOUND: Final = "FlavorNotFound"
REASON_ADMISSION_CHECK_NOT_FOUND: Final = "AdmissionCheckNotFound"
REASON_MULTIPLE_MULTIKUEUE_CHECKS: Final = "MultipleMultiKueueAdmissionChecks"
REASON_MULTIKUEUE_CHECK_PER_FLAVOR: Final = "MultiKueueAdmissionCheckAppliedPerFlavor"
REASON_ADMISSION_CHECK_INACTIVE: Final = "AdmissionCheckInactive"
REASON_MULTIPLE_MULTIKUEUE_ADMISSION_CHECKS: Final = "MultipleMultiKueueAdmissionChecks"
REASON_MULTIKUEUE_ADMISSION_CHECK_PER_FLAVOR: Final = "MultiKueueAdmissionCheckAppliedPerFlavor"

# Active (MultiKueueCluster)
REASON_ACTIVE: Final = "Active"
"""Active=True on a connected MultiKueueCluster (message ``Connected``)."""
REASON_BAD_KUBECONFIG: Final = "BadKubeConfig"
REASON_INSECURE_KUBECONFIG: Final = "InsecureKubeConfig"
REASON_BAD_CLUSTER_PROFILE: Final = "BadClusterProfile"
REASON_CLIENT_CONNECTION_FAILED: Final = "ClientConnectionFailed"

# --- kfed's own extensions -----------------------------------------------------------------

KFED_PREFIX: Final = "kfed.io/"
"""Every kfed label and annotation key starts with this."""
MAINTENANCE_ANNOTATION: Final = "kfed.io/maintenance"
"""On a MultiKueueCluster: ``cordon`` (no new placements) or ``drain`` (also move work)."""
MAINTENANCE_CORDON: Final = "cordon"
MAINTENANCE_DRAIN: Final = "drain"
NAMESPACES_ANNOTATION: Final = "kfed.io/namespaces"
"""On a MultiKueueCluster: the manager namespaces whose workloads may run on that worker
(comma-separated, ``*`` globs allowed); absent: every namespace, as upstream."""
JOB_NAME_ANNOTATION: Final = "kfed.io/job-name"
"""On a Workload: the name of its Job (remote copies have no owner reference to find it by)."""
FENCED_ANNOTATION: Final = "kfed.io/fenced"
"""On a copy and on our job there: the worker's shim fenced them (its manager's lease
expired before the job ended). A fenced job is never started again on that worker."""
