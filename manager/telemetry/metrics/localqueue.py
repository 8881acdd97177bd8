"""Upstream Kueue's LocalQueue families (``kueue_local_queue_*``; upstream serves them
behind its LocalQueueMetrics gate): the ClusterQueue families' counterparts, per LocalQueue."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from manager.telemetry.metrics.samples import ACTIVE_STATUSES, LocalQueueSample, ReplicaRole
from manager.telemetry.metrics.shapes import KUEUE_BUCKETS_14, PlainGauge


class LocalQueueFamilies:
    """The LocalQueue gauges, counters and histograms; the ClusterQueue events
    (``KueueFamilies``) record into the counters and histograms too."""

    replica_role: ReplicaRole

    def _register_local_queues(self, r: CollectorRegistry) -> None:
        role = ["replica_role"]
        lq = ["name", "namespace", "replica_role"]
        lq_pc = ["name", "namespace", "priority_class", "replica_role"]
        lq_quota = ["name", "namespace", "flavor", "resource", "replica_role"]
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

    def _set_local_queues(self, local_queues: Iterable[LocalQueueSample]) -> None:
        """The LocalQueue gauges, replaced."""
        gauges = (
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
