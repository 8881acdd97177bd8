"""Every knob of the federation, with the reasoning behind its default."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from manager.api import constants as C


class DispatchMode(StrEnum):
    CAPACITY_AWARE = "kfed.io/capacity-aware"
    """kfed's default: ONE copy, on the best-fitting worker with free quota in the flavor."""
    ALL_AT_ONCE = C.MULTIKUEUE_DISPATCHER_ALL_AT_ONCE
    """Upstream's default: a copy on every worker; the first to admit wins."""
    INCREMENTAL = C.MULTIKUEUE_DISPATCHER_INCREMENTAL
    """Upstream's incremental dispatcher: rounds of ``incremental_step`` workers."""


class FailoverPolicy(StrEnum):
    """When the workloads of a lost worker may run elsewhere (per ClusterQueue, annotation
    ``kfed.io/failover``; the manager's ``--failover-policy`` is the default)."""

    AT_MOST_ONCE = "at-most-once"
    """kfed's default: a workload moves only when its copy surely stopped: the worker came
    back and its copy is fenced or gone, or ``worker_lost_timeout`` passed (the shim fences
    it by then, if its own control plane lets it). A worker whose control plane is down
    cannot stop its pods (kubelets keep containers running), so nothing moves sooner."""
    FAST = "fast"
    """Move once the worker's shim has surely fenced, if it could act: seconds, not minutes.
    For jobs that tolerate running twice: when the worker's own control plane is down its
    shim cannot stop anything, and the job may run in two places until it returns."""


def failover_policy(value: str | None, default: FailoverPolicy) -> FailoverPolicy:
    """The policy an annotation value asks for; ``wait`` (kfed 0.1's name) is at-most-once,
    and anything unknown is the safe one."""
    if not value:
        return default
    if value == "wait":
        return FailoverPolicy.AT_MOST_ONCE
    try:
        return FailoverPolicy(value)
    except ValueError:
        return FailoverPolicy.AT_MOST_ONCE


@dataclass(frozen=True, slots=True)
class FederationSettings:
    namespace: str = "kueue-system"
    """Where MultiKueueCluster Secrets live, on the manager; where Leases live, on workers."""
    origin: str = "multikueue"
    """Value of the origin label on remote objects (upstream's default). Managers that share
    workers must use distinct origins."""
    manager_identity: str = "kfed-manager"
    dispatch_mode: DispatchMode = DispatchMode.CAPACITY_AWARE
    dispatch_workers: int = 16
    """Workloads placed or followed at once. Each reconcile mostly waits on a worker's API,
    so more than the single-cluster controllers' 4: at a few jobs per second 4 left
    workloads seconds in the dispatch queue (e2e/bench/federation)."""
    incremental_step: int = 3
    incremental_round_timeout: float = 300.0
    admission_timeout: float = 30.0
    """A copy the chosen worker has not admitted by then is withdrawn; the next is tried."""
    nominate_after: float = 1.0
    """Capacity-aware: a copy not admitted by then is shown on the Workload as nominated (the
    check's Pending message, ``nominatedClusterNames``); one admitted sooner, as most are,
    costs no write for it."""
    dispatch_deadline: float = 300.0
    """A workload no worker can ever hold as configured (no worker has its queue or flavor,
    or none has that much quota) keeps its manager quota this long, then it is evicted
    (releasing the quota) and requeued with the reason."""
    gc_interval: float = 60.0
    """Remote objects of our origin without a manager-side workload are deleted this often."""
    request_timeout: float = 5.0
    """Per request to a worker: long enough for a loaded apiserver, short enough to notice
    a partition quickly."""
    reconnect_initial: float = 1.0
    reconnect_max: float = 60.0
    """Capped, jittered exponential backoff between connection attempts to a worker."""
    lease_duration: float = 10.0
    """The manager's Lease on each worker: the worker shim fences (suspends this origin's
    workloads) when it has not seen a renewal for this long."""
    lease_renew_period: float = 2.0
    fence_grace: float = 4.0
    """Extra time after the worker's lease surely expired, for the shim to suspend the jobs
    and their pods to stop, before the manager runs them elsewhere."""
    foreign_object_recheck: float = 30.0
    """A worker where an object of a workload's name exists that kfed did not create is
    skipped for that workload; after this many seconds it is considered again."""
    failover_policy: FailoverPolicy = FailoverPolicy.AT_MOST_ONCE
    """The default policy of ClusterQueues without the ``kfed.io/failover`` annotation."""
    worker_lost_timeout: float = 300.0
    """The outage timeout (upstream's ``workerLostTimeout``, 15 min there): at-most-once
    workloads of a lost worker move after this long, and its shim fences them by then. Also
    the wait for workers without kfed's shim (e.g. upstream Kueue), which cannot fence."""
    finished_retention: float = 0.0
    """How long a finished workload's objects stay on the worker it ran on (its Workload
    copy, our Job there and its pods), from its Finished time, for people to look at them
    there; then they are collected. 0: at once, as upstream. Per ClusterQueue:
    ``kfed.io/finished-retention`` (``retention.py``). A deleted workload's go at once."""
    credentials_warning: float = 6 * 3600.0
    """A worker's kubeconfig whose token or client certificate runs out within this many
    seconds gets the ``kfed.io/CredentialsExpiring`` condition, an Event and a dashboard
    warning (``credentials.py``)."""

    @property
    def fenced_failover_after(self) -> float:
        """Seconds after the start of the last renewal that may have reached a worker until
        its fast-policy jobs have surely stopped: request timeout + lease duration + grace."""
        return self.request_timeout + self.lease_duration + self.fence_grace

    @property
    def outage_failover_after(self) -> float:
        """The same for at-most-once jobs, which the shim fences only after the outage
        timeout: request timeout + worker lost timeout + grace."""
        return self.request_timeout + self.worker_lost_timeout + self.fence_grace

    def fence_after(self, policy: FailoverPolicy) -> int:
        """Seconds without a lease renewal after which the shim fences a copy of this policy
        (annotation ``kfed.io/fence-after-seconds`` on the copy)."""
        seconds = self.lease_duration if policy is FailoverPolicy.FAST else self.worker_lost_timeout
        return max(1, int(seconds))


MANAGER_LEASE_PREFIX = "kfed-manager-"
"""Lease ``kfed-manager-<origin>`` in ``namespace`` on every worker: the fencing lease."""
SHIM_HEARTBEAT_LEASE = "kfed-worker-shim"
"""Lease the worker shim renews in ``namespace``: tells the manager the worker can fence."""
FAILOVER_POLICY_ANNOTATION = "kfed.io/failover"
"""On a manager ClusterQueue: ``at-most-once`` or ``fast`` (see FailoverPolicy)."""
FENCE_AFTER_ANNOTATION = "kfed.io/fence-after-seconds"
"""On a remote Workload: how long the shim waits without a manager lease renewal before it
fences this copy (the lease duration for fast copies, the outage timeout otherwise)."""
RETENTION_ANNOTATION = "kfed.io/finished-retention"
"""On a manager ClusterQueue: how long its finished workloads' objects stay on their worker
(``1h``, ``90s``, ``1h30m`` or seconds); overrides the manager's ``--finished-retention``."""
RAN_ON_ANNOTATION = "kfed.io/ran-on"
"""On a finished manager Workload: the worker its run ended on, written only when
``status.clusterName`` does not say it (it finished there unseen after it was requeued)."""
ALLOWED_CLUSTERS_ANNOTATION = "kfed.io/allowed-clusters"
"""On a Job (copied to its Workload): comma-separated worker names it may run on."""
PLACEMENT_ANNOTATION = "kfed.io/placement"
"""On a manager Workload: the last dispatch decision, as JSON, for `kfed explain`."""
JOB_NAME_ANNOTATION = C.JOB_NAME_ANNOTATION
