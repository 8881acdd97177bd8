"""Prometheus metrics of kfed: Kueue's names where the meaning matches, MultiKueue's dispatch
counter, the federation's own (``kfed_``), and the worker shim's fencing.

One ``Metrics`` object per process owns its own ``CollectorRegistry`` (never the global
one): the manager and worker shims of an in-process test federation then each count on
their own, the same names never collide, and each process serves exactly its registry at
``/metrics``. Controllers reach it through ``ClusterState.metrics``.

Two kinds of metric:

- events, recorded where they happen by the typed methods below (a workload admitted, a
  copy created on a worker, a failover, ...): counters and histograms;
- state (pending workloads, queue usage and quotas, worker health and free capacity):
  gauges replaced wholesale from the in-memory views right before each scrape
  (``set_cluster_queues``, ``set_clusters``), so they are exact at scrape time, cost
  nothing between scrapes, and a deleted queue or worker disappears instead of going stale.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

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

AdmissionResult = Literal["success", "inadmissible"]
FailoverReason = Literal["lost", "drain", "evicted", "retry"]
"""Why a workload left a worker: the worker was lost (and fenced), is draining, evicted the
copy (or the copy vanished), or did not admit it in time (the next candidate is tried)."""
QueueStatus = Literal["pending", "active", "terminating"]
Maintenance = Literal["", "cordon", "drain"]

QUEUE_STATUSES: tuple[QueueStatus, ...] = ("pending", "active", "terminating")
MAINTENANCE_LEVEL: dict[str, int] = {"": 0, "cordon": 1, "drain": 2}
ACTIVE_STATUSES = ("True", "False", "Unknown")
"""The values of ``multikueue_cluster_status``'s ``active`` label, as upstream Kueue has them."""

# Buckets, in seconds. A scheduling cycle is sub-millisecond to tens of milliseconds; queue
# waits range from an instant to hours; a dispatch is an API round trip or two on each side,
# unless the worker is full and the copy waits there.
CYCLE_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)
WAIT_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600)
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


class Metrics:
    """Every metric of one process, on the registry it serves."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        cq = ["cluster_queue"]
        quota = ["cohort", "cluster_queue", "flavor", "resource"]

        # -- Kueue's names --------------------------------------------------------------
        self.pending_workloads = Gauge(
            "kueue_pending_workloads",
            "Pending workloads per ClusterQueue; status: active (queued for admission) or "
            "inadmissible (parked until something changes, or backing off)",
            ["cluster_queue", "status"],
            registry=r,
        )
        self.quota_reserved_workloads = Counter(
            "kueue_quota_reserved_workloads_total",
            "Workloads that got a quota reservation",
            cq,
            registry=r,
        )
        self.admitted_workloads = Counter(
            "kueue_admitted_workloads_total",
            "Workloads admitted (quota reserved and every admission check Ready)",
            cq,
            registry=r,
        )
        self.evicted_workloads = Counter(
            "kueue_evicted_workloads_total",
            "Workloads evicted, by the Evicted condition's reason",
            ["cluster_queue", "reason"],
            registry=r,
        )
        self.finished_workloads = Counter(
            "kueue_finished_workloads_total",
            "Workloads that finished while holding quota",
            cq,
            registry=r,
        )
        self.quota_reserved_wait_time = Histogram(
            "kueue_quota_reserved_wait_time_seconds",
            "Time from creation (or the last requeue) to the quota reservation",
            cq,
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.admission_wait_time = Histogram(
            "kueue_admission_wait_time_seconds",
            "Time from creation (or the last requeue) to admission",
            cq,
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.admission_attempts = Counter(
            "kueue_admission_attempts_total",
            "Scheduling cycles that evaluated workloads; success when one admitted something",
            ["result"],
            registry=r,
        )
        self.admission_attempt_duration = Histogram(
            "kueue_admission_attempt_duration_seconds",
            "Duration of one scheduling cycle of the admission core",
            ["result"],
            buckets=CYCLE_BUCKETS,
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
            ["cluster_queue", "status"],
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
        self.workloads_dispatched = Counter(
            "multikueue_workloads_dispatched_total",
            "Copies of manager workloads created on a worker cluster",
            ["cluster_queue", "cluster"],
            registry=r,
        )
        self.workloads_admitted_remotely = Counter(
            "multikueue_workloads_admitted_total",
            "Manager workloads whose copy a worker cluster admitted",
            ["cluster_queue", "cluster"],
            registry=r,
        )
        self.multikueue_cluster_status = Gauge(
            "multikueue_cluster_status",
            "1 for the status (True, False, Unknown: not set yet) of each worker cluster's "
            "Active condition, per manager ClusterQueue whose MultiKueue check lists it",
            ["cluster_queue", "cluster", "active"],
            registry=r,
        )
        self.workloads_evicted_remotely = Counter(
            "multikueue_workloads_evicted_total",
            "Manager workloads whose copy a worker cluster evicted (preempted there, or its "
            "quota lost): taken off that worker and placed again",
            ["cluster_queue", "cluster"],
            registry=r,
        )

        # -- the federation -------------------------------------------------------------
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
            "Maintenance state of a worker cluster: 0 none, 1 cordoned, 2 draining",
            ["cluster"],
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
    def for_process(cls) -> Metrics:
        """A fresh registry with the process, platform and GC collectors too (a real process
        serves those; tests, with several managers in one process, leave them out)."""
        registry = CollectorRegistry()
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            registry.register(collector)
        return cls(registry)

    # -- events ---------------------------------------------------------------------------

    def event_written(self, verb: str) -> None:
        self.events_written.labels(verb).inc()

    def event_dropped(self, reason: str) -> None:
        self.events_dropped.labels(reason).inc()

    # -- admission ------------------------------------------------------------------------

    def scheduling_cycle(self, *, admitted: int, seconds: float) -> None:
        """One cycle of the core that evaluated at least one workload."""
        result: AdmissionResult = "success" if admitted else "inadmissible"
        self.admission_attempts.labels(result).inc()
        self.admission_attempt_duration.labels(result).observe(seconds)

    def quota_reserved(self, cluster_queue: str, *, waited: float) -> None:
        self.quota_reserved_workloads.labels(cluster_queue).inc()
        self.quota_reserved_wait_time.labels(cluster_queue).observe(max(0.0, waited))

    def admitted(self, cluster_queue: str, *, waited: float) -> None:
        self.admitted_workloads.labels(cluster_queue).inc()
        self.admission_wait_time.labels(cluster_queue).observe(max(0.0, waited))

    def evicted(self, cluster_queue: str, reason: str) -> None:
        self.evicted_workloads.labels(cluster_queue, reason).inc()

    def finished(self, cluster_queue: str) -> None:
        self.finished_workloads.labels(cluster_queue).inc()

    # -- dispatch -------------------------------------------------------------------------

    def remote_object_created(self, cluster: str, kind: str, *, cluster_queue: str) -> None:
        """An object created on a worker; a Workload copy is also a MultiKueue dispatch."""
        self.remote_objects_created.labels(cluster, kind).inc()
        if kind == "Workload":
            self.workloads_dispatched.labels(cluster_queue, cluster).inc()

    def admitted_remotely(self, cluster_queue: str, cluster: str) -> None:
        """The worker admitted the copy and the manager's check went Ready."""
        self.workloads_admitted_remotely.labels(cluster_queue, cluster).inc()

    def evicted_remotely(self, cluster_queue: str, cluster: str) -> None:
        """The worker evicted the copy; the manager took the workload off it to place again."""
        self.workloads_evicted_remotely.labels(cluster_queue, cluster).inc()

    def dispatch_done(self, cluster: str, seconds: float) -> None:
        self.dispatch_latency.labels(cluster).observe(max(0.0, seconds))

    def failover(self, from_cluster: str, reason: FailoverReason) -> None:
        self.failovers.labels(from_cluster, reason).inc()

    def set_leader(self, identity: str, leading: bool) -> None:
        self.leader.labels(identity).set(1 if leading else 0)

    # -- worker shim ----------------------------------------------------------------------

    def fencing_started(self, origin: str) -> None:
        """A manager origin's lease expired: its workloads are being fenced."""
        self.shim_fencing_events.labels(origin).inc()
        self.shim_fenced.labels(origin).set(1)

    def fencing_ended(self, origin: str) -> None:
        """The origin's lease is renewed again."""
        self.shim_fenced.labels(origin).set(0)

    # -- state, replaced before each scrape -----------------------------------------------

    def set_cluster_queues(self, samples: Iterable[ClusterQueueSample]) -> None:
        gauges = (
            self.pending_workloads,
            self.reserving_active_workloads,
            self.admitted_active_workloads,
            self.cluster_queue_status,
            self.cluster_queue_resource_usage,
            self.cluster_queue_nominal_quota,
            self.cluster_queue_borrowing_limit,
        )
        for gauge in gauges:
            gauge.clear()
        for s in samples:
            self.pending_workloads.labels(s.name, "active").set(s.pending_active)
            self.pending_workloads.labels(s.name, "inadmissible").set(s.pending_inadmissible)
            self.reserving_active_workloads.labels(s.name).set(s.reserving)
            self.admitted_active_workloads.labels(s.name).set(s.admitted)
            for status in QUEUE_STATUSES:
                self.cluster_queue_status.labels(s.name, status).set(int(status == s.status))
            for q in s.quotas:
                labels = (s.cohort, s.name, q.flavor, q.resource)
                self.cluster_queue_resource_usage.labels(*labels).set(q.usage)
                self.cluster_queue_nominal_quota.labels(*labels).set(q.nominal)
                if q.borrowing_limit is not None:
                    self.cluster_queue_borrowing_limit.labels(*labels).set(q.borrowing_limit)

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
            self.cluster_maintenance.labels(s.name).set(MAINTENANCE_LEVEL.get(s.maintenance, 0))
            for (flavor, resource), free in sorted(s.free.items()):
                self.cluster_free_capacity.labels(s.name, flavor, resource).set(free)

    def set_multikueue_clusters(self, samples: Iterable[tuple[str, str, str]]) -> None:
        """(manager ClusterQueue, worker cluster, its Active condition's status) triples."""
        self.multikueue_cluster_status.clear()
        for cluster_queue, cluster, active in samples:
            for status in ACTIVE_STATUSES:
                self.multikueue_cluster_status.labels(cluster_queue, cluster, status).set(
                    int(status == active)
                )

    # -- exposition -----------------------------------------------------------------------

    def exposition(self) -> tuple[bytes, str]:
        """The registry in Prometheus' text format, and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
