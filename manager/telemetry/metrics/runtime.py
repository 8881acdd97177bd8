"""controller-runtime's and client-go's families, as a Go controller serves them: the work
queues (``workqueue_*``), reconciles (``controller_runtime_*``), the REST client and leader
election. The kube layer records into them through ``manager.kube.instrument``."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from manager.kube.instrument import ReconcileResult
from manager.kube.workqueue import QueueSnapshot

RECONCILE_RESULTS: tuple[ReconcileResult, ...] = ("success", "error", "requeue", "requeue_after")
WORKQUEUE_BUCKETS = tuple(1e-8 * 10**i for i in range(12))
"""controller-runtime's work queue histograms: ``ExponentialBuckets(10e-9, 10, 12)``."""
RECONCILE_BUCKETS = (
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7),
    *(0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10),
    *(15, 20, 25, 30, 40, 50, 60),
)
"""controller-runtime's ``controller_runtime_reconcile_time_seconds``."""


class RuntimeFamilies:
    """The work queue, reconcile, REST client and leader election metrics."""

    def _register_runtime(self, r: CollectorRegistry) -> None:
        self._queues_seen: set[str] = set()
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
