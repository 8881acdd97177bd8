"""Prometheus metrics of kfed: upstream Kueue's (v0.17.0) and MultiKueue's names, labels and
buckets where the meaning applies, controller-runtime's and client-go's for the work queues,
reconcilers, REST client and leader election, and kfed's own (``kfed_``).

Which upstream metrics are served and which are not (and why) is data:
``tests/data/upstream-metrics-v0.17.0.json``, extracted from upstream's source by
``python -m e2e.upstream_metrics``; ``tests/unit/telemetry/test_upstream_metric_names.py``
checks this module against it, and ``docs/metrics.md`` lists both.

One ``Metrics`` object per process owns its own ``CollectorRegistry`` (never the global
one): the manager and worker shims of an in-process test federation then each count on
their own, the same names never collide, and each process serves exactly its registry at
``/metrics``. Controllers reach it through ``ClusterState.metrics``.

Every ``kueue_*`` and ``multikueue_*`` series carries upstream's ``replica_role``: ``leader``
or ``follower`` on a manager with leader election (``set_leader``), ``standalone`` on a
worker shim. Counters carry the role at the time of the event, as upstream's do.

Two kinds of metric:

- events, recorded where they happen by the typed methods below (a workload admitted, a
  copy created on a worker, a failover, a key reconciled, a REST call ...): counters and
  histograms;
- state (pending workloads, queue usage and quotas, LocalQueues, cohorts, worker health and
  free capacity, work queue depth): gauges replaced wholesale from the in-memory views right
  before each scrape (``set_cluster_queues``, ``set_clusters``, ``set_work_queues``), so
  they are exact at scrape time, cost nothing between scrapes, and a deleted queue or worker
  disappears instead of going stale.
"""

from __future__ import annotations

import importlib.metadata
import platform
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric

from manager.kube import instrument
from manager.kube.instrument import ReconcileResult
from manager.kube.workqueue import QueueSnapshot, live_queues

Workload = Mapping[str, Any]
AdmissionResult = Literal["success", "inadmissible"]
FailoverReason = Literal["lost", "drain", "evicted", "retry"]
"""Why a workload left a worker: the worker was lost (and fenced), is draining, evicted the
copy (or the copy vanished), or did not admit it in time (the next candidate is tried)."""
QueueStatus = Literal["pending", "active", "terminating"]
Maintenance = Literal["", "cordon", "drain"]
ReplicaRole = Literal["leader", "follower", "standalone"]
"""Upstream's ``replica_role`` values (``pkg/util/roletracker``)."""

QUEUE_STATUSES: tuple[QueueStatus, ...] = ("pending", "active", "terminating")
MAINTENANCE_STATES = ("none", "cordon", "drain")
"""``kfed_cluster_maintenance``'s ``state`` label: one series per state, as kube-state-metrics
reports an enum."""
MAINTENANCE_STATE: dict[str, str] = {"": "none", "cordon": "cordon", "drain": "drain"}
ACTIVE_STATUSES = ("True", "False", "Unknown")
"""The values of ``multikueue_cluster_status``'s and ``kueue_local_queue_status``'s ``active``
label, as upstream Kueue has them."""
RECONCILE_RESULTS: tuple[ReconcileResult, ...] = ("success", "error", "requeue", "requeue_after")


def kueue_buckets(count: int) -> tuple[float, ...]:
    """Upstream's ``generateExponentialBuckets(count)``: 1, then 2.5 doubling."""
    return (1.0, *(2.5 * 2**i for i in range(count - 1)))


# Buckets, in seconds.
KUEUE_BUCKETS_14 = kueue_buckets(14)
KUEUE_BUCKETS_16 = kueue_buckets(16)
"""``kueue_admission_wait_time_seconds`` has 16 (up to ~11 h); upstream's other waits 14."""
DEF_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""client_golang's ``DefBuckets``: upstream's admission attempt duration names none."""
WORKQUEUE_BUCKETS = tuple(1e-8 * 10**i for i in range(12))
"""controller-runtime's work queue histograms: ``ExponentialBuckets(10e-9, 10, 12)``."""
RECONCILE_BUCKETS = (
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7),
    *(0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10),
    *(15, 20, 25, 30, 40, 50, 60),
)
"""controller-runtime's ``controller_runtime_reconcile_time_seconds``."""
# A dispatch is an API round trip or two on each side, unless the worker is full and the
# copy waits there.
DISPATCH_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300)


@dataclass(frozen=True, slots=True)
class QuotaSample:
    """One (flavor, resource) of a ClusterQueue, in natural units (cores, bytes, devices)."""

    flavor: str
    resource: str
    nominal: float
    usage: float
    """Held by admitted workloads (Kueue's ``flavorsUsage``)."""
    borrowing_limit: float | None = None
    reserved: float = 0.0
    """Held by every workload with a reservation (Kueue's ``flavorsReservation``)."""
    lending_limit: float | None = None


@dataclass(frozen=True, slots=True)
class ClusterQueueSample:
    name: str
    cohort: str
    status: QueueStatus
    pending_active: int
    pending_inadmissible: int
    reserving: int
    admitted: int
    quotas: tuple[QuotaSample, ...] = ()
    finished: int = 0
    """Finished Workload objects of this queue that still exist (``kueue_finished_workloads``)."""
    weighted_share: float | None = None
    """With fair sharing on, the queue's weighted share; None: not reported."""
    cohorts: tuple[str, ...] = ()
    """Its cohort and that cohort's ancestors, nearest first (() : just ``cohort``)."""


@dataclass(frozen=True, slots=True)
class LocalQueueUsageSample:
    flavor: str
    resource: str
    reserved: float
    usage: float


@dataclass(frozen=True, slots=True)
class LocalQueueSample:
    namespace: str
    name: str
    active: str
    """Its Active condition's status: "True", "False" or "Unknown"."""
    pending_active: int
    pending_inadmissible: int
    reserving: int
    admitted: int
    finished: int = 0
    usage: tuple[LocalQueueUsageSample, ...] = ()


@dataclass(frozen=True, slots=True)
class WorkerClusterSample:
    name: str
    active: bool
    maintenance: str
    """The ``kfed.io/maintenance`` annotation: "", "cordon" or "drain"."""
    free: Mapping[tuple[str, str], float] = field(default_factory=dict)
    """(flavor, resource) -> free quota in natural units; empty while not connected."""
    credentials_expire_at: float | None = None
    """Unix time its kubeconfig's token or client certificate expires, when it can be read."""


class PlainGauge:
    """A labelled gauge for a name that prometheus_client's own would refuse: upstream has
    both ``kueue_finished_workloads`` (a gauge) and ``kueue_finished_workloads_total`` (a
    counter), and a client_python Counter claims its name without ``_total`` too. The
    exposition of the two is distinct (the counter's family is written ``..._total``)."""

    def __init__(
        self, name: str, documentation: str, labelnames: list[str], *, registry: CollectorRegistry
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._values: dict[tuple[str, ...], float] = {}
        registry.register(self)

    def describe(self) -> list[Metric]:
        return []  # nothing for the registry's duplicate check to refuse

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, value in sorted(self._values.items()):
            family.add_metric(list(labels), value)
        yield family

    def set(self, labels: tuple[str, ...], value: float) -> None:
        if len(labels) != len(self.labelnames):
            raise ValueError(f"{self.name}: {len(self.labelnames)} label values expected")
        self._values[labels] = value

    def clear(self) -> None:
        self._values.clear()


class Metrics:
    """Every metric of one process, on the registry it serves."""

    def __init__(
        self, registry: CollectorRegistry | None = None, *, replica_role: ReplicaRole = "standalone"
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.replica_role: ReplicaRole = replica_role
        """Upstream's ``replica_role`` label: ``leader`` / ``follower`` on a replica with
        leader election (``set_leader``), ``standalone`` without (a worker shim)."""
        self._cohorts_of: dict[str, tuple[str, ...]] = {}
        """ClusterQueue -> its cohort and that cohort's ancestors, nearest first, as of the
        last ``set_cluster_queues`` (for ``kueue_cohort_subtree_admitted_workloads_total``)."""
        self._queues_seen: set[str] = set()
        r = self.registry
        role = ["replica_role"]
        cq = ["cluster_queue", "replica_role"]
        cq_pc = ["cluster_queue", "priority_class", "replica_role"]
        lq = ["name", "namespace", "replica_role"]
        lq_pc = ["name", "namespace", "priority_class", "replica_role"]
        quota = ["cohort", "cluster_queue", "flavor", "resource", "replica_role"]
        lq_quota = ["name", "namespace", "flavor", "resource", "replica_role"]
        cohort_fr = ["cohort", "flavor", "resource", "replica_role"]

        # -- Kueue's: the scheduler ------------------------------------------------------
        self.admission_attempts = Counter(
            "kueue_admission_attempts_total",
            "Scheduling cycles that evaluated workloads; success when one admitted something",
            ["result", *role],
            registry=r,
        )
        self.admission_attempt_duration = Histogram(
            "kueue_admission_attempt_duration_seconds",
            "Duration of one scheduling cycle of the admission core",
            ["result", *role],
            buckets=DEF_BUCKETS,
            registry=r,
        )

        # -- Kueue's: ClusterQueues --------------------------------------------------------
        self.pending_workloads = Gauge(
            "kueue_pending_workloads",
            "Pending workloads per ClusterQueue; status: active (queued for admission) or "
            "inadmissible (parked until something changes, or backing off)",
            ["cluster_queue", "status", *role],
            registry=r,
        )
        self.finished_workloads_now = PlainGauge(
            "kueue_finished_workloads",
            "Finished workloads per ClusterQueue (Workload objects that still exist)",
            cq,
            registry=r,
        )
        self.quota_reserved_workloads = Counter(
            "kueue_quota_reserved_workloads_total",
            "Workloads that got a quota reservation",
            cq_pc,
            registry=r,
        )
        self.finished_workloads = Counter(
            "kueue_finished_workloads_total",
            "Workloads that finished while holding quota",
            cq_pc,
            registry=r,
        )
        self.quota_reserved_wait_time = Histogram(
            "kueue_quota_reserved_wait_time_seconds",
            "Time from creation (or the last requeue) to the quota reservation",
            cq_pc,
            buckets=KUEUE_BUCKETS_14,
            registry=r,
        )
        self.admitted_workloads = Counter(
            "kueue_admitted_workloads_total",
            "Workloads admitted (quota reserved and every admission check Ready)",
            cq_pc,
            registry=r,
        )
        self.admission_wait_time = Histogram(
            "kueue_admission_wait_time_seconds",
            "Time from creation (or the last requeue) to admission",
            cq_pc,
            buckets=KUEUE_BUCKETS_16,
            registry=r,
        )
        self.admission_checks_wait_time = Histogram(
            "kueue_admission_checks_wait_time_seconds",
            "Time from the quota reservation to admission (every admission check Ready)",
            cq_pc,
            buckets=KUEUE_BUCKETS_14,
            registry=r,
        )
        self.evicted_workloads = Counter(
            "kueue_evicted_workloads_total",
            "Workloads evicted, by the Evicted condition's reason and its underlying cause",
            ["cluster_queue", "reason", "underlying_cause", "priority_class", *role],
            registry=r,
        )
        self.preempted_workloads = Counter(
            "kueue_preempted_workloads_total",
            "Workloads preempted, per preempting ClusterQueue and the Preempted reason",
            ["preempting_cluster_queue", "reason", *role],
            registry=r,
        )
        self.reserving_active_workloads = Gauge(
            "kueue_reserving_active_workloads",
            "Workloads holding a quota reservation (admitted or waiting for admission checks)",
            cq,
            registry=r,
        )
        self.admitted_active_workloads = Gauge(
            "kueue_admitted_active_workloads",
            "Admitted workloads that have not finished",
            cq,
            registry=r,
        )
        self.cluster_queue_status = Gauge(
            "kueue_cluster_queue_status",
            "1 for the ClusterQueue's current status (pending, active or terminating), else 0",
            ["cluster_queue", "status", *role],
            registry=r,
        )
        self.cluster_queue_resource_reservation = Gauge(
            "kueue_cluster_queue_resource_reservation",
            "Quota reserved by every workload holding a reservation, per flavor and resource",
            quota,
            registry=r,
        )
        self.cluster_queue_resource_usage = Gauge(
            "kueue_cluster_queue_resource_usage",
            "Quota used by admitted workloads, per flavor and resource (cores, bytes, devices)",
            quota,
            registry=r,
        )
        self.cluster_queue_nominal_quota = Gauge(
            "kueue_cluster_queue_nominal_quota",
            "Nominal quota per flavor and resource (cores, bytes, devices)",
            quota,
            registry=r,
        )
        self.cluster_queue_borrowing_limit = Gauge(
            "kueue_cluster_queue_borrowing_limit",
            "Borrowing limit per flavor and resource, where one is set",
            quota,
            registry=r,
        )
        self.cluster_queue_lending_limit = Gauge(
            "kueue_cluster_queue_lending_limit",
            "Lending limit per flavor and resource, where one is set",
            quota,
            registry=r,
        )
        self.cluster_queue_weighted_share = Gauge(
            "kueue_cluster_queue_weighted_share",
            "Fair sharing: the largest ratio of usage above nominal quota to the cohort's "
            "lendable resources, divided by the weight (only with fair sharing on)",
            ["cluster_queue", "cohort", *role],
            registry=r,
        )

        # -- Kueue's: cohorts --------------------------------------------------------------
        self.cohort_weighted_share = Gauge(
            "kueue_cohort_weighted_share",
            "Fair sharing: the cohort's weighted share (only with fair sharing on)",
            ["cohort", *role],
            registry=r,
        )
        self.cohort_subtree_quota = Gauge(
            "kueue_cohort_subtree_quota",
            "Nominal quota of a cohort's subtree (its own and its members'), per flavor and "
            "resource",
            cohort_fr,
            registry=r,
        )
        self.cohort_subtree_admitted_workloads = Counter(
            "kueue_cohort_subtree_admitted_workloads_total",
            "Workloads admitted by a ClusterQueue in the cohort's subtree",
            ["cohort", "priority_class", *role],
            registry=r,
        )
        self.cohort_subtree_resource_reservations = Gauge(
            "kueue_cohort_subtree_resource_reservations",
            "Quota reserved in a cohort's subtree, per flavor and resource",
            cohort_fr,
            registry=r,
        )
        self.cohort_subtree_admitted_active_workloads = Gauge(
            "kueue_cohort_subtree_admitted_active_workloads",
            "Admitted workloads not finished in a cohort's subtree",
            ["cohort", *role],
            registry=r,
        )

        # -- Kueue's: LocalQueues (upstream: behind its LocalQueueMetrics gate) ------------
        self.lq_pending_workloads = Gauge(
            "kueue_local_queue_pending_workloads",
            "Pending workloads per LocalQueue; status: active or inadmissible",
            ["name", "namespace", "status", *role],
            registry=r,
        )
        self.lq_finished_workloads_now = PlainGauge(
            "kueue_local_queue_finished_workloads",
            "Finished workloads per LocalQueue (Workload objects that still exist)",
            lq,
            registry=r,
        )
        self.lq_quota_reserved_workloads = Counter(
            "kueue_local_queue_quota_reserved_workloads_total",
            "Workloads of the LocalQueue that got a quota reservation",
            lq_pc,
            registry=r,
        )
        self.lq_finished_workloads = Counter(
            "kueue_local_queue_finished_workloads_total",
            "Workloads of the LocalQueue that finished while holding quota",
            lq_pc,
            registry=r,
        )
        self.lq_quota_reserved_wait_time = Histogram(
            "kueue_local_queue_quota_reserved_wait_time_seconds",
            "Time from creation (or the last requeue) to the quota reservation, per LocalQueue",
            lq_pc,
            buckets=KUEUE_BUCKETS_14,
            registry=r,
        )
        self.lq_admitted_workloads = Counter(
            "kueue_local_queue_admitted_workloads_total",
            "Workloads of the LocalQueue admitted",
            lq_pc,
            registry=r,
        )
        self.lq_admission_wait_time = Histogram(
            "kueue_local_queue_admission_wait_time_seconds",
            "Time from creation (or the last requeue) to admission, per LocalQueue",
            lq_pc,
            buckets=KUEUE_BUCKETS_14,
            registry=r,
        )
        self.lq_admission_checks_wait_time = Histogram(
            "kueue_local_queue_admission_checks_wait_time_seconds",
            "Time from the quota reservation to admission, per LocalQueue",
            lq_pc,
            buckets=KUEUE_BUCKETS_14,
            registry=r,
        )
        self.lq_evicted_workloads = Counter(
            "kueue_local_queue_evicted_workloads_total",
            "Workloads of the LocalQueue evicted, by reason and underlying cause",
            ["name", "namespace", "reason", "underlying_cause", "priority_class", *role],
            registry=r,
        )
        self.lq_reserving_active_workloads = Gauge(
            "kueue_local_queue_reserving_active_workloads",
            "Workloads of the LocalQueue holding a quota reservation",
            lq,
            registry=r,
        )
        self.lq_admitted_active_workloads = Gauge(
            "kueue_local_queue_admitted_active_workloads",
            "Admitted workloads of the LocalQueue that have not finished",
            lq,
            registry=r,
        )
        self.lq_status = Gauge(
            "kueue_local_queue_status",
            "1 for the LocalQueue's Active condition status (True, False, Unknown), else 0",
            ["name", "namespace", "active", *role],
            registry=r,
        )
        self.lq_resource_reservation = Gauge(
            "kueue_local_queue_resource_reservation",
            "Quota reserved by the LocalQueue's workloads, per flavor and resource",
            lq_quota,
            registry=r,
        )
        self.lq_resource_usage = Gauge(
            "kueue_local_queue_resource_usage",
            "Quota used by the LocalQueue's admitted workloads, per flavor and resource",
            lq_quota,
            registry=r,
        )

        # -- MultiKueue's ------------------------------------------------------------------
        mk = ["cluster_queue", "cluster", *role]
        self.workloads_dispatched = Counter(
            "multikueue_workloads_dispatched_total",
            "Copies of manager workloads created on a worker cluster",
            mk,
            registry=r,
        )
        self.workloads_admitted_remotely = Counter(
            "multikueue_workloads_admitted_total",
            "Manager workloads whose copy a worker cluster admitted",
            mk,
            registry=r,
        )
        self.multikueue_cluster_status = Gauge(
            "multikueue_cluster_status",
            "1 for the status (True, False, Unknown: not set yet) of each worker cluster's "
            "Active condition, per manager ClusterQueue whose MultiKueue check lists it",
            ["cluster_queue", "cluster", "active", *role],
            registry=r,
        )
        self.workloads_evicted_remotely = Counter(
            "multikueue_workloads_evicted_total",
            "Manager workloads whose copy a worker cluster evicted (preempted there, or its "
            "quota lost), by the copy's eviction reason: taken off that worker, placed again",
            ["cluster_queue", "cluster", "reason", *role],
            registry=r,
        )

        # -- controller-runtime's and client-go's --------------------------------------------
        wq = ["name", "controller"]
        self.workqueue_depth = Gauge(
            "workqueue_depth", "Current depth of workqueue", [*wq, "priority"], registry=r
        )
        self.workqueue_adds = Counter(
            "workqueue_adds_total", "Total number of adds handled by workqueue", wq, registry=r
        )
        self.workqueue_queue_duration = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            wq,
            buckets=WORKQUEUE_BUCKETS,
            registry=r,
        )
        self.workqueue_work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            wq,
            buckets=WORKQUEUE_BUCKETS,
            registry=r,
        )
        self.workqueue_unfinished_work = Gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been "
            "observed by work_duration",
            wq,
            registry=r,
        )
        self.workqueue_longest_running = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            wq,
            registry=r,
        )
        self.workqueue_retries = Counter(
            "workqueue_retries_total",
            "Total number of retries handled by workqueue",
            wq,
            registry=r,
        )
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            ["controller"],
            registry=r,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"],
            buckets=RECONCILE_BUCKETS,
            registry=r,
        )
        self.max_concurrent_reconciles = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller (the workers seen at once)",
            ["controller"],
            registry=r,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            ["controller"],
            registry=r,
        )
        self.rest_client_requests = Counter(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host",
            ["code", "method", "host"],
            registry=r,
        )
        self.leader_election_master_status = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
            "backup, 1 indicates master. 'name' is the string used to identify the lease",
            ["name"],
            registry=r,
        )

        # -- kfed's: build, the federation ------------------------------------------------
        self.build_info = Gauge(
            "kfed_build_info",
            "kfed build information: 1, labelled by kfed's version, the Python version and "
            "implementation, and the platform",
            ["version", "python_version", "python_implementation", "platform"],
            registry=r,
        )
        self.build_info.labels(*build_labels()).set(1)
        self.dispatch_latency = Histogram(
            "kfed_dispatch_latency_seconds",
            "From the manager's quota reservation until the manager has seen the copy admitted "
            "on the worker and started the Job there",
            ["cluster"],
            buckets=DISPATCH_BUCKETS,
            registry=r,
        )
        self.failovers = Counter(
            "kfed_failovers_total",
            "Workloads taken off a worker to be placed again; reason: lost, drain, evicted, "
            "retry (not admitted there in time)",
            ["from_cluster", "reason"],
            registry=r,
        )
        self.cluster_active = Gauge(
            "kfed_cluster_active",
            "1 while the manager is connected to the worker cluster and renews its lease there",
            ["cluster"],
            registry=r,
        )
        self.cluster_maintenance = Gauge(
            "kfed_cluster_maintenance",
            "Maintenance state of a worker cluster, one series per state (none, cordon, "
            "drain): 1 for the current one, 0 for the others",
            ["cluster", "state"],
            registry=r,
        )
        self.cluster_credentials_expiry = Gauge(
            "kfed_cluster_credentials_expiry_timestamp_seconds",
            "When the token or client certificate of a worker's kubeconfig expires (Unix time); "
            "absent when it cannot be read (no JWT token, no certificate)",
            ["cluster"],
            registry=r,
        )
        self.cluster_free_capacity = Gauge(
            "kfed_cluster_free_capacity",
            "Free quota of a connected worker per flavor and resource, as the dispatcher sees it",
            ["cluster", "flavor", "resource"],
            registry=r,
        )
        self.remote_objects_created = Counter(
            "kfed_remote_objects_created_total",
            "Objects the manager created on worker clusters, by kind (Workload, Job)",
            ["cluster", "kind"],
            registry=r,
        )
        self.leader = Gauge(
            "kfed_leader",
            "1 while this manager replica is the leader",
            ["identity"],
            registry=r,
        )

        # -- Kubernetes Events (manager and shim) -------------------------------------
        self.events_written = Counter(
            "kfed_events_written_total",
            "Kubernetes Events written: create (a new one) or patch (a repeat's count)",
            ["verb"],
            registry=r,
        )
        self.events_dropped = Counter(
            "kfed_events_dropped_total",
            "Kubernetes Events not written: spam (per-object filter), rate (global limit), "
            "queue (write queue full), error (the API server refused)",
            ["reason"],
            registry=r,
        )

        # -- the worker shim ------------------------------------------------------------
        self.shim_fenced = Gauge(
            "kfed_shim_fenced",
            "1 while the workloads of a manager origin are fenced (its lease expired)",
            ["origin"],
            registry=r,
        )
        self.shim_fencing_events = Counter(
            "kfed_shim_fencing_events_total",
            "Times a manager origin's lease expired and its workloads were fenced",
            ["origin"],
            registry=r,
        )

    @classmethod
    def for_process(cls, *, replica_role: ReplicaRole = "standalone") -> Metrics:
        """A fresh registry with the process, platform and GC collectors too (a real process
        serves those; tests, with several managers in one process, leave them out). It is
        also the process's sink for the kube layer's work queue, reconcile and REST client
        metrics (``manager.kube.instrument``)."""
        registry = CollectorRegistry()
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            registry.register(collector)
        metrics = cls(registry, replica_role=replica_role)
        instrument.install(metrics)
        return metrics

    # -- the replica's role ----------------------------------------------------------------

    def set_leader(self, identity: str, leading: bool, *, election: str | None = None) -> None:
        """This replica leads (or stands by): ``kfed_leader``, upstream's ``replica_role``
        (leader / follower) and, given the Lease's name, ``leader_election_master_status``."""
        self.leader.labels(identity).set(1 if leading else 0)
        self.replica_role = "leader" if leading else "follower"
        if election is not None:
            self.leader_election_master_status.labels(election).set(1 if leading else 0)

    # -- events ---------------------------------------------------------------------------

    def event_written(self, verb: str) -> None:
        self.events_written.labels(verb).inc()

    def event_dropped(self, reason: str) -> None:
        self.events_dropped.labels(reason).inc()

    # -- admission ------------------------------------------------------------------------

    def scheduling_cycle(self, *, admitted: int, seconds: float) -> None:
        """One cycle of the core that evaluated at least one workload."""
        result: AdmissionResult = "success" if admitted else "inadmissible"
        self.admission_attempts.labels(result, self.replica_role).inc()
        self.admission_attempt_duration.labels(result, self.replica_role).observe(seconds)

    def quota_reserved(
        self, cluster_queue: str, *, waited: float, workload: Workload | None = None
    ) -> None:
        """A quota reservation written; ``workload`` (the object) gives the LocalQueue and
        the priority class."""
        pc, lq = priority_class_of(workload), local_queue_of(workload)
        waited = max(0.0, waited)
        role = self.replica_role
        self.quota_reserved_workloads.labels(cluster_queue, pc, role).inc()
        self.quota_reserved_wait_time.labels(cluster_queue, pc, role).observe(waited)
        if lq is not None:
            self.lq_quota_reserved_workloads.labels(*lq, pc, role).inc()
            self.lq_quota_reserved_wait_time.labels(*lq, pc, role).observe(waited)

    def admitted(
        self,
        cluster_queue: str,
        *,
        waited: float,
        workload: Workload | None = None,
        checks_waited: float = 0.0,
    ) -> None:
        """Admitted: ``waited`` since creation (or the last requeue), ``checks_waited`` since
        the quota reservation (0 without admission checks, as upstream observes it)."""
        pc, lq = priority_class_of(workload), local_queue_of(workload)
        waited, checks_waited = max(0.0, waited), max(0.0, checks_waited)
        role = self.replica_role
        self.admitted_workloads.labels(cluster_queue, pc, role).inc()
        self.admission_wait_time.labels(cluster_queue, pc, role).observe(waited)
        self.admission_checks_wait_time.labels(cluster_queue, pc, role).observe(checks_waited)
        for cohort in self._cohorts_of.get(cluster_queue, ()):
            self.cohort_subtree_admitted_workloads.labels(cohort, pc, role).inc()
        if lq is not None:
            self.lq_admitted_workloads.labels(*lq, pc, role).inc()
            self.lq_admission_wait_time.labels(*lq, pc, role).observe(waited)
            self.lq_admission_checks_wait_time.labels(*lq, pc, role).observe(checks_waited)

    def evicted(
        self,
        cluster_queue: str,
        reason: str,
        *,
        workload: Workload | None = None,
        underlying_cause: str = "",
    ) -> None:
        """An eviction written, by the Evicted condition's reason; ``underlying_cause`` is
        upstream's (``AdmissionCheck`` for a deactivation by a rejected check, else "")."""
        pc, lq = priority_class_of(workload), local_queue_of(workload)
        role = self.replica_role
        self.evicted_workloads.labels(cluster_queue, reason, underlying_cause, pc, role).inc()
        if lq is not None:
            self.lq_evicted_workloads.labels(*lq, reason, underlying_cause, pc, role).inc()

    def preempted(self, preempting_cluster_queue: str, reason: str) -> None:
        """A preemption written; ``reason`` is the Preempted condition's (InClusterQueue,
        InCohortReclamation, InCohortFairSharing, InCohortReclaimWhileBorrowing)."""
        self.preempted_workloads.labels(preempting_cluster_queue, reason, self.replica_role).inc()

    def finished(self, cluster_queue: str, *, workload: Workload | None = None) -> None:
        pc, lq = priority_class_of(workload), local_queue_of(workload)
        self.finished_workloads.labels(cluster_queue, pc, self.replica_role).inc()
        if lq is not None:
            self.lq_finished_workloads.labels(*lq, pc, self.replica_role).inc()

    # -- dispatch -------------------------------------------------------------------------

    def remote_object_created(self, cluster: str, kind: str, *, cluster_queue: str) -> None:
        """An object created on a worker; a Workload copy is also a MultiKueue dispatch."""
        self.remote_objects_created.labels(cluster, kind).inc()
        if kind == "Workload":
            self.workloads_dispatched.labels(cluster_queue, cluster, self.replica_role).inc()

    def admitted_remotely(self, cluster_queue: str, cluster: str) -> None:
        """The worker admitted the copy and the manager's check went Ready."""
        self.workloads_admitted_remotely.labels(cluster_queue, cluster, self.replica_role).inc()

    def evicted_remotely(self, cluster_queue: str, cluster: str, reason: str = "") -> None:
        """The worker evicted the copy (``reason``: the copy's Evicted condition reason);
        the manager took the workload off it to place again."""
        self.workloads_evicted_remotely.labels(
            cluster_queue, cluster, reason, self.replica_role
        ).inc()

    def dispatch_done(self, cluster: str, seconds: float) -> None:
        self.dispatch_latency.labels(cluster).observe(max(0.0, seconds))

    def failover(self, from_cluster: str, reason: FailoverReason) -> None:
        self.failovers.labels(from_cluster, reason).inc()

    # -- worker shim ----------------------------------------------------------------------

    def fencing_started(self, origin: str) -> None:
        """A manager origin's lease expired: its workloads are being fenced."""
        self.shim_fencing_events.labels(origin).inc()
        self.shim_fenced.labels(origin).set(1)

    def fencing_ended(self, origin: str) -> None:
        """The origin's lease is renewed again."""
        self.shim_fenced.labels(origin).set(0)

    # -- the kube layer (manager.kube.instrument.KubeMetrics) -----------------------------

    def queue_added(self, queue: str) -> None:
        self.workqueue_adds.labels(queue, queue).inc()

    def queue_retried(self, queue: str) -> None:
        self.workqueue_retries.labels(queue, queue).inc()

    def queue_waited(self, queue: str, seconds: float) -> None:
        self.workqueue_queue_duration.labels(queue, queue).observe(max(0.0, seconds))

    def reconciled(self, queue: str, result: ReconcileResult, seconds: float) -> None:
        seconds = max(0.0, seconds)
        self._touch_controller(queue)
        self.workqueue_work_duration.labels(queue, queue).observe(seconds)
        self.reconcile_total.labels(queue, result).inc()
        self.reconcile_time.labels(queue).observe(seconds)
        if result == "error":
            self.reconcile_errors.labels(queue).inc()

    def rest_request(self, host: str, method: str, code: str) -> None:
        self.rest_client_requests.labels(code, method, host).inc()

    def _touch_controller(self, queue: str) -> None:
        """Every reconcile result at 0 from the start, as controller-runtime has them."""
        if queue in self._queues_seen:
            return
        self._queues_seen.add(queue)
        for result in RECONCILE_RESULTS:
            self.reconcile_total.labels(queue, result)
        self.reconcile_errors.labels(queue)
        self.workqueue_adds.labels(queue, queue)
        self.workqueue_retries.labels(queue, queue)

    def set_work_queues(self, queues: Iterable[QueueSnapshot]) -> None:
        """The work queues' state gauges, replaced (``workqueue.live_queues()``)."""
        gauges = (
            self.workqueue_depth,
            self.workqueue_unfinished_work,
            self.workqueue_longest_running,
            self.max_concurrent_reconciles,
            self.active_workers,
        )
        for gauge in gauges:
            gauge.clear()
        for q in queues:
            self._touch_controller(q.name)
            self.workqueue_depth.labels(q.name, q.name, "").set(q.depth)
            self.workqueue_unfinished_work.labels(q.name, q.name).set(q.unfinished_seconds)
            self.workqueue_longest_running.labels(q.name, q.name).set(q.longest_running_seconds)
            self.max_concurrent_reconciles.labels(q.name).set(q.workers)
            self.active_workers.labels(q.name).set(q.in_flight)

    # -- state, replaced before each scrape -----------------------------------------------

    def set_cluster_queues(
        self,
        samples: Iterable[ClusterQueueSample],
        *,
        local_queues: Iterable[LocalQueueSample] = (),
        cohort_quotas: Mapping[str, Mapping[tuple[str, str], float]] | None = None,
        cohort_shares: Mapping[str, float] | None = None,
    ) -> None:
        """The ClusterQueue, LocalQueue and cohort gauges, replaced. Cohort subtrees are
        summed from their member ClusterQueues (``ClusterQueueSample.cohorts``) plus the
        cohorts' own quotas (``cohort_quotas``, cohort -> (flavor, resource) -> nominal);
        ``cohort_shares`` gives the cohorts' weighted shares, with fair sharing on."""
        gauges = (
            self.pending_workloads,
            self.finished_workloads_now,
            self.reserving_active_workloads,
            self.admitted_active_workloads,
            self.cluster_queue_status,
            self.cluster_queue_resource_reservation,
            self.cluster_queue_resource_usage,
            self.cluster_queue_nominal_quota,
            self.cluster_queue_borrowing_limit,
            self.cluster_queue_lending_limit,
            self.cluster_queue_weighted_share,
            self.cohort_weighted_share,
            self.cohort_subtree_quota,
            self.cohort_subtree_resource_reservations,
            self.cohort_subtree_admitted_active_workloads,
            self.lq_pending_workloads,
            self.lq_finished_workloads_now,
            self.lq_reserving_active_workloads,
            self.lq_admitted_active_workloads,
            self.lq_status,
            self.lq_resource_reservation,
            self.lq_resource_usage,
        )
        for gauge in gauges:
            gauge.clear()
        role = self.replica_role
        subtree_quota: dict[str, dict[tuple[str, str], float]] = {}
        subtree_reserved: dict[str, dict[tuple[str, str], float]] = {}
        subtree_admitted: dict[str, int] = {}
        for cohort, quotas in (cohort_quotas or {}).items():
            for key, nominal in quotas.items():
                into = subtree_quota.setdefault(cohort, {})
                into[key] = into.get(key, 0.0) + nominal
        cohorts_of: dict[str, tuple[str, ...]] = {}
        for s in samples:
            cohorts = s.cohorts or ((s.cohort,) if s.cohort else ())
            cohorts_of[s.name] = cohorts
            self.pending_workloads.labels(s.name, "active", role).set(s.pending_active)
            self.pending_workloads.labels(s.name, "inadmissible", role).set(s.pending_inadmissible)
            self.finished_workloads_now.set((s.name, role), s.finished)
            self.reserving_active_workloads.labels(s.name, role).set(s.reserving)
            self.admitted_active_workloads.labels(s.name, role).set(s.admitted)
            for status in QUEUE_STATUSES:
                self.cluster_queue_status.labels(s.name, status, role).set(int(status == s.status))
            if s.weighted_share is not None:
                self.cluster_queue_weighted_share.labels(s.name, s.cohort, role).set(
                    s.weighted_share
                )
            for q in s.quotas:
                labels = (s.cohort, s.name, q.flavor, q.resource, role)
                self.cluster_queue_resource_reservation.labels(*labels).set(q.reserved)
                self.cluster_queue_resource_usage.labels(*labels).set(q.usage)
                self.cluster_queue_nominal_quota.labels(*labels).set(q.nominal)
                if q.borrowing_limit is not None:
                    self.cluster_queue_borrowing_limit.labels(*labels).set(q.borrowing_limit)
                if q.lending_limit is not None:
                    self.cluster_queue_lending_limit.labels(*labels).set(q.lending_limit)
                for cohort in cohorts:
                    key = (q.flavor, q.resource)
                    quota = subtree_quota.setdefault(cohort, {})
                    quota[key] = quota.get(key, 0.0) + q.nominal
                    reserved = subtree_reserved.setdefault(cohort, {})
                    reserved[key] = reserved.get(key, 0.0) + q.reserved
            for cohort in cohorts:
                subtree_admitted[cohort] = subtree_admitted.get(cohort, 0) + s.admitted
        self._cohorts_of = cohorts_of
        for cohort in sorted(set(subtree_quota) | set(subtree_admitted)):
            for (flavor, resource), value in sorted(subtree_quota.get(cohort, {}).items()):
                self.cohort_subtree_quota.labels(cohort, flavor, resource, role).set(value)
                self.cohort_subtree_resource_reservations.labels(
                    cohort, flavor, resource, role
                ).set(subtree_reserved.get(cohort, {}).get((flavor, resource), 0.0))
            self.cohort_subtree_admitted_active_workloads.labels(cohort, role).set(
                subtree_admitted.get(cohort, 0)
            )
        for cohort, share in sorted((cohort_shares or {}).items()):
            self.cohort_weighted_share.labels(cohort, role).set(share)
        for lq in local_queues:
            ident = (lq.name, lq.namespace)
            self.lq_pending_workloads.labels(*ident, "active", role).set(lq.pending_active)
            self.lq_pending_workloads.labels(*ident, "inadmissible", role).set(
                lq.pending_inadmissible
            )
            self.lq_finished_workloads_now.set((*ident, role), lq.finished)
            self.lq_reserving_active_workloads.labels(*ident, role).set(lq.reserving)
            self.lq_admitted_active_workloads.labels(*ident, role).set(lq.admitted)
            for active in ACTIVE_STATUSES:
                self.lq_status.labels(*ident, active, role).set(int(active == lq.active))
            for u in lq.usage:
                self.lq_resource_reservation.labels(*ident, u.flavor, u.resource, role).set(
                    u.reserved
                )
                self.lq_resource_usage.labels(*ident, u.flavor, u.resource, role).set(u.usage)

    def set_clusters(self, samples: Iterable[WorkerClusterSample]) -> None:
        for gauge in (
            self.cluster_active,
            self.cluster_maintenance,
            self.cluster_free_capacity,
            self.cluster_credentials_expiry,
        ):
            gauge.clear()
        for s in samples:
            self.cluster_active.labels(s.name).set(1 if s.active else 0)
            if s.credentials_expire_at is not None:
                self.cluster_credentials_expiry.labels(s.name).set(s.credentials_expire_at)
            current = MAINTENANCE_STATE.get(s.maintenance, "none")
            for state in MAINTENANCE_STATES:
                self.cluster_maintenance.labels(s.name, state).set(int(state == current))
            for (flavor, resource), free in sorted(s.free.items()):
                self.cluster_free_capacity.labels(s.name, flavor, resource).set(free)

    def set_multikueue_clusters(self, samples: Iterable[tuple[str, str, str]]) -> None:
        """(manager ClusterQueue, worker cluster, its Active condition's status) triples."""
        self.multikueue_cluster_status.clear()
        role = self.replica_role
        for cluster_queue, cluster, active in samples:
            for value in ACTIVE_STATUSES:
                self.multikueue_cluster_status.labels(cluster_queue, cluster, value, role).set(
                    int(value == active)
                )

    # -- exposition -----------------------------------------------------------------------

    def exposition(self) -> tuple[bytes, str]:
        """The registry in Prometheus' text format, and its content type. The work queue
        gauges are read first when this object is the process's kube sink."""
        if instrument.sink() is self:
            self.set_work_queues(live_queues())
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def priority_class_of(workload: Workload | None) -> str:
    """Upstream's ``priority_class`` label: the Workload's ``spec.priorityClassName``."""
    if workload is None:
        return ""
    return str((workload.get("spec") or {}).get("priorityClassName") or "")


def local_queue_of(workload: Workload | None) -> tuple[str, str] | None:
    """(LocalQueue name, namespace) of a Workload, None when unknown."""
    if workload is None:
        return None
    name = (workload.get("spec") or {}).get("queueName")
    namespace = (workload.get("metadata") or {}).get("namespace")
    if not name or not namespace:
        return None
    return str(name), str(namespace)


def build_labels() -> tuple[str, str, str, str]:
    try:
        version = importlib.metadata.version("kfed")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return (
        version,
        platform.python_version(),
        platform.python_implementation(),
        f"{sys.platform}/{platform.machine()}",
    )
