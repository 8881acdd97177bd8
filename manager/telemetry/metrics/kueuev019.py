"""Upstream Kueue's families added after v0.17, in v0.18 and v0.19 (to v0.19.2), where their
meaning applies to kfed (``tests/data/upstream-metrics-v0.19.2.json`` says which do not, and
why). Names, labels and buckets are upstream's; every series has ``replica_role``.

- v0.18: the cohort tree as info gauges (``kueue_cluster_queue_info``, ``kueue_cohort_info``),
  the requests of a ClusterQueue's pending workloads (``kueue_cluster_queue_resource_pending``),
  how long an evicted workload held its quota after the eviction
  (``kueue_workload_eviction_latency_seconds``), and how long a job waited for its Workload
  (``kueue_workload_creation_latency_seconds``);
- v0.19: how long an admitted workload's pods waited for their scheduling gate to go
  (``kueue_pod_scheduling_gate_removal_seconds``), and the workloads not admitted, by why
  (``kueue_unadmitted_workloads``, ``kueue_local_queue_unadmitted_workloads``; upstream's
  UnadmittedWorkloadsObservability gate, kfed's ``--unadmitted-workloads-observability``).

The histograms are recorded when their event happens; the gauges are state, replaced from
the process's views right before each scrape, as ``kueue``'s are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Gauge, Histogram

from manager.telemetry.metrics.samples import ReplicaRole
from manager.telemetry.metrics.shapes import DEF_BUCKETS, KUEUE_BUCKETS_14

CREATION_LATENCY_BUCKETS = tuple(0.01 * 2**i for i in range(11))
"""``prometheus.ExponentialBuckets(0.01, 2, 11)``: 10 ms to ~10 s."""


@dataclass(frozen=True, slots=True)
class TreeSample:
    """A ClusterQueue or a cohort in the cohort tree: its parent cohort and the tree's root
    ("" and "" for a ClusterQueue without a cohort; a root cohort is its own root)."""

    name: str
    parent: str
    root: str


@dataclass(frozen=True, slots=True)
class UnadmittedSample:
    """One workload that is not admitted (nor finished, nor being deleted), as upstream
    counts it: ``reason`` is why it is not admitted (``NoReservation``,
    ``UnsatisfiedAdmissionChecks``), ``underlying_cause`` its QuotaReserved=False reason
    ("" while it holds quota)."""

    cluster_queue: str
    """The ClusterQueue of its LocalQueue; "" when that LocalQueue does not exist."""
    local_queue: tuple[str, str] | None
    """(name, namespace) of its LocalQueue, None when that does not exist."""
    reason: str
    underlying_cause: str


class KueueV019Families:
    """The v0.18 and v0.19 families, and the events and state they are recorded from."""

    replica_role: ReplicaRole

    def _register_kueue_v019(self, r: CollectorRegistry) -> None:
        role = ["replica_role"]
        tree = ["parent_cohort", "root_cohort", *role]
        # -- v0.18 ------------------------------------------------------------------------
        self.cluster_queue_info = Gauge(
            "kueue_cluster_queue_info",
            "1 per ClusterQueue, labelled with its parent cohort and the root of its cohort "
            "tree (both empty without a cohort): join on cluster_queue",
            ["cluster_queue", *tree],
            registry=r,
        )
        self.cohort_info = Gauge(
            "kueue_cohort_info",
            "1 per cohort (a Cohort object or a name a ClusterQueue or cohort gives), labelled "
            "with its parent and its tree's root: join on cohort",
            ["cohort", *tree],
            registry=r,
        )
        self.cluster_queue_resource_pending = Gauge(
            "kueue_cluster_queue_resource_pending",
            "What the ClusterQueue's pending workloads request in all, per resource (cores, "
            "bytes, devices), before any flavor is assigned; 0 for a covered resource no one "
            "asks for",
            ["cluster_queue", "resource", *role],
            registry=r,
        )
        self.workload_eviction_latency = Histogram(
            "kueue_workload_eviction_latency_seconds",
            "From a workload's eviction (Evicted=True) until its quota was released, per "
            "ClusterQueue and eviction reason",
            ["cluster_queue", "reason", *role],
            buckets=KUEUE_BUCKETS_14,
            registry=r,
        )
        self.workload_creation_latency = Histogram(
            "kueue_workload_creation_latency_seconds",
            "From a job's creation until its Workload's, per kind of job (jobs never edited "
            "before their Workload was made)",
            ["job_kind", *role],
            buckets=CREATION_LATENCY_BUCKETS,
            registry=r,
        )
        # -- v0.19 ------------------------------------------------------------------------
        self.pod_scheduling_gate_removal = Histogram(
            "kueue_pod_scheduling_gate_removal_seconds",
            "From a workload's admission until a scheduling gate left one of its pods, per "
            "gate and ClusterQueue",
            ["name", "cluster_queue", "is_group", *role],
            buckets=DEF_BUCKETS,
            registry=r,
        )
        self.unadmitted_workloads = Gauge(
            "kueue_unadmitted_workloads",
            "Workloads not admitted, per ClusterQueue, why (reason: NoReservation, "
            "UnsatisfiedAdmissionChecks) and the QuotaReserved=False reason behind it "
            "(underlying_cause); with --unadmitted-workloads-observability",
            ["cluster_queue", "reason", "underlying_cause", *role],
            registry=r,
        )
        self.lq_unadmitted_workloads = Gauge(
            "kueue_local_queue_unadmitted_workloads",
            "As kueue_unadmitted_workloads, per LocalQueue",
            ["name", "namespace", "cluster_queue", "reason", "underlying_cause", *role],
            registry=r,
        )

    # -- events -----------------------------------------------------------------------------

    def eviction_released(self, cluster_queue: str, reason: str, *, seconds: float) -> None:
        """An evicted workload gave its quota back ``seconds`` after its Evicted condition
        (``reason``: that condition's) went True. Clocks differ between the API server and
        this process: a negative time counts as 0, as upstream counts it."""
        self.workload_eviction_latency.labels(cluster_queue, reason, self.replica_role).observe(
            max(0.0, seconds)
        )

    def workload_created(self, job_kind: str, *, seconds: float) -> None:
        """A Workload created for a job of ``job_kind`` (``Job``, ``JobSet``, ...),
        ``seconds`` after the job's own creation."""
        self.workload_creation_latency.labels(job_kind, self.replica_role).observe(
            max(0.0, seconds)
        )

    def scheduling_gate_removed(
        self, gate: str, cluster_queue: str, *, seconds: float, is_group: bool = False
    ) -> None:
        """A pod lost scheduling gate ``gate`` ``seconds`` after its workload's admission;
        ``is_group``: the pod belongs to a pod group (upstream's plain-pod groups)."""
        self.pod_scheduling_gate_removal.labels(
            gate, cluster_queue, "true" if is_group else "false", self.replica_role
        ).observe(max(0.0, seconds))

    # -- state, replaced before each scrape ---------------------------------------------------

    def set_queue_tree(
        self, cluster_queues: Iterable[TreeSample], cohorts: Iterable[TreeSample]
    ) -> None:
        """``kueue_cluster_queue_info`` and ``kueue_cohort_info``, replaced."""
        self.cluster_queue_info.clear()
        self.cohort_info.clear()
        role = self.replica_role
        for s in cluster_queues:
            self.cluster_queue_info.labels(s.name, s.parent, s.root, role).set(1)
        for s in cohorts:
            self.cohort_info.labels(s.name, s.parent, s.root, role).set(1)

    def set_pending_resources(self, pending: Mapping[str, Mapping[str, float]]) -> None:
        """ClusterQueue -> resource -> what its pending workloads request, natural units."""
        self.cluster_queue_resource_pending.clear()
        role = self.replica_role
        for cluster_queue, by_resource in pending.items():
            for resource, value in by_resource.items():
                self.cluster_queue_resource_pending.labels(cluster_queue, resource, role).set(value)

    def set_unadmitted(self, samples: Iterable[UnadmittedSample]) -> None:
        """The unadmitted-workload gauges, replaced (a label set no workload has any more
        disappears, as upstream deletes it). A workload whose LocalQueue is missing is in no
        series, as upstream has no ClusterQueue for it."""
        per_cq: dict[tuple[str, str, str], int] = {}
        per_lq: dict[tuple[str, str, str, str, str], int] = {}
        for s in samples:
            if not s.cluster_queue:
                continue
            cq_key = (s.cluster_queue, s.reason, s.underlying_cause)
            per_cq[cq_key] = per_cq.get(cq_key, 0) + 1
            if s.local_queue is not None:
                lq_key = (*s.local_queue, s.cluster_queue, s.reason, s.underlying_cause)
                per_lq[lq_key] = per_lq.get(lq_key, 0) + 1
        self.unadmitted_workloads.clear()
        self.lq_unadmitted_workloads.clear()
        role = self.replica_role
        for key, count in per_cq.items():
            self.unadmitted_workloads.labels(*key, role).set(count)
        for lq_key, count in per_lq.items():
            self.lq_unadmitted_workloads.labels(*lq_key, role).set(count)
