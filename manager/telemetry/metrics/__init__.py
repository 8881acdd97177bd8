"""Prometheus metrics of kfed: upstream Kueue's (v0.17.0, and those v0.18 and v0.19 added) and
MultiKueue's names, labels and buckets where the meaning applies, controller-runtime's and
client-go's for the work queues, reconcilers, REST client and leader election, and kfed's own
(``kfed_``).

Which upstream metrics are served and which are not (and why) is data:
``tests/data/upstream-metrics-v0.17.0.json`` and ``-v0.19.2.json``, extracted from upstream's
source by
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
The families live by whose they are: upstream Kueue's (``kueue``: scheduler, ClusterQueues,
cohorts; ``localqueue``; ``kueuev019``: the ones upstream added in v0.18 and v0.19),
MultiKueue's (``multikueue``), controller-runtime's and client-go's (``runtime``), and kfed's
own (``kfed``); ``samples`` holds the records the state gauges are set from, ``shapes``
upstream's buckets. ``Metrics`` is all of them on one registry.
"""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    generate_latest,
)

from manager.kube import instrument
from manager.kube.workqueue import live_queues
from manager.telemetry.metrics.kfed import KfedFamilies
from manager.telemetry.metrics.kueue import KueueFamilies
from manager.telemetry.metrics.kueuev019 import KueueV019Families, TreeSample, UnadmittedSample
from manager.telemetry.metrics.multikueue import MultiKueueFamilies
from manager.telemetry.metrics.runtime import RuntimeFamilies
from manager.telemetry.metrics.samples import (
    ClusterQueueSample,
    FailoverReason,
    LocalQueueSample,
    LocalQueueUsageSample,
    QueueStatus,
    QuotaSample,
    ReplicaRole,
    WorkerClusterSample,
)

__all__ = [
    "ClusterQueueSample",
    "FailoverReason",
    "LocalQueueSample",
    "LocalQueueUsageSample",
    "Metrics",
    "QueueStatus",
    "QuotaSample",
    "ReplicaRole",
    "TreeSample",
    "UnadmittedSample",
    "WorkerClusterSample",
]


class Metrics(KueueFamilies, KueueV019Families, MultiKueueFamilies, RuntimeFamilies, KfedFamilies):
    """Every metric of one process, on the registry it serves."""

    def __init__(
        self, registry: CollectorRegistry | None = None, *, replica_role: ReplicaRole = "standalone"
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.replica_role: ReplicaRole = replica_role
        """Upstream's ``replica_role`` label: ``leader`` / ``follower`` on a replica with
        leader election (``set_leader``), ``standalone`` without (a worker shim)."""
        self._register_kueue(self.registry)
        self._register_kueue_v019(self.registry)
        self._register_multikueue(self.registry)
        self._register_runtime(self.registry)
        self._register_kfed(self.registry)

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

    # -- both: a copy on a worker is a MultiKueue dispatch ---------------------------------

    def remote_object_created(self, cluster: str, kind: str, *, cluster_queue: str) -> None:
        """An object created on a worker; a Workload copy is also a MultiKueue dispatch."""
        self.remote_objects_created.labels(cluster, kind).inc()
        if kind == "Workload":
            self.workloads_dispatched.labels(cluster_queue, cluster, self.replica_role).inc()

    # -- exposition -----------------------------------------------------------------------

    def exposition(self) -> tuple[bytes, str]:
        """The registry in Prometheus' text format, and its content type. The work queue
        gauges are read first when this object is the process's kube sink."""
        if instrument.sink() is self:
            self.set_work_queues(live_queues())
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
