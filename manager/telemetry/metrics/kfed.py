"""kfed's own families (``kfed_*``): its build, the federation (dispatch latency,
failovers, workers' health, maintenance, credentials and free capacity), the leader, the
Kubernetes Events it writes, and the worker shim's fencing."""

from __future__ import annotations

import importlib.metadata
import platform
import sys
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from manager.telemetry.metrics.samples import FailoverReason, WorkerClusterSample

MAINTENANCE_STATES = ("none", "cordon", "drain")
"""``kfed_cluster_maintenance``'s ``state`` label: one series per state, as kube-state-metrics
reports an enum."""
MAINTENANCE_STATE: dict[str, str] = {"": "none", "cordon": "cordon", "drain": "drain"}
# A dispatch is an API round trip or two on each side, unless the worker is full and the
# copy waits there.
DISPATCH_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300)


class KfedFamilies:
    """kfed's own metrics, and the events and state they are recorded from."""

    def _register_kfed(self, r: CollectorRegistry) -> None:
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

    # -- events ---------------------------------------------------------------------------

    def event_written(self, verb: str) -> None:
        self.events_written.labels(verb).inc()

    def event_dropped(self, reason: str) -> None:
        self.events_dropped.labels(reason).inc()

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
