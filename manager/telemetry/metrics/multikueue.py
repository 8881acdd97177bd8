"""MultiKueue's families (``multikueue_*``), as upstream's MultiKueue controllers report
them: copies dispatched, admitted and evicted on each worker, and each worker's Active
status per manager ClusterQueue."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge

from manager.telemetry.metrics.samples import ACTIVE_STATUSES, ReplicaRole


class MultiKueueFamilies:
    replica_role: ReplicaRole

    def _register_multikueue(self, r: CollectorRegistry) -> None:
        role = ["replica_role"]
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

    def admitted_remotely(self, cluster_queue: str, cluster: str) -> None:
        """The worker admitted the copy and the manager's check went Ready."""
        self.workloads_admitted_remotely.labels(cluster_queue, cluster, self.replica_role).inc()

    def evicted_remotely(self, cluster_queue: str, cluster: str, reason: str = "") -> None:
        """The worker evicted the copy (``reason``: the copy's Evicted condition reason);
        the manager took the workload off it to place again."""
        self.workloads_evicted_remotely.labels(
            cluster_queue, cluster, reason, self.replica_role
        ).inc()

    def set_multikueue_clusters(self, samples: Iterable[tuple[str, str, str]]) -> None:
        """(manager ClusterQueue, worker cluster, its Active condition's status) triples."""
        self.multikueue_cluster_status.clear()
        role = self.replica_role
        for cluster_queue, cluster, active in samples:
            for value in ACTIVE_STATUSES:
                self.multikueue_cluster_status.labels(cluster_queue, cluster, value, role).set(
                    int(value == active)
                )
