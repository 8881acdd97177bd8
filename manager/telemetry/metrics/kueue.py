"""Upstream Kueue's (v0.17.0) scheduler, ClusterQueue and cohort families: names, labels and
buckets as upstream has them, where the meaning applies (``kueue_*``). Every series carries
upstream's ``replica_role``; counters carry the role at the time of the event. The
LocalQueue families are in ``localqueue``, MultiKueue's in ``multikueue``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from manager.api.view import at
from manager.telemetry.metrics.localqueue import LocalQueueFamilies
from manager.telemetry.metrics.samples import (
    AdmissionResult,
    ClusterQueueSample,
    LocalQueueSample,
    QueueStatus,
    ReplicaRole,
    Workload,
)
from manager.telemetry.metrics.shapes import (
    DEF_BUCKETS,
    KUEUE_BUCKETS_14,
    KUEUE_BUCKETS_16,
    PlainGauge,
)

QUEUE_STATUSES: tuple[QueueStatus, ...] = ("pending", "active", "terminating")


class KueueFamilies(LocalQueueFamilies):
    """Upstream's scheduler, ClusterQueue and cohort metrics, and the events and state they
    are recorded from (each event counts for the workload's LocalQueue too)."""

    replica_role: ReplicaRole

    def _register_kueue(self, r: CollectorRegistry) -> None:
        self._register_local_queues(r)
        role = ["replica_role"]
        cq = ["cluster_queue", "replica_role"]
        cq_pc = ["cluster_queue", "priority_class", "replica_role"]
        quota = ["cohort", "cluster_queue", "flavor", "resource", "replica_role"]
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
        cohorts: tuple[str, ...] = (),
    ) -> None:
        """Admitted: ``waited`` since creation (or the last requeue), ``checks_waited`` since
        the quota reservation (0 without admission checks, as upstream observes it);
        ``cohorts`` are the ClusterQueue's cohort and its ancestors now, each subtree counting
        the admission (``kueue_cohort_subtree_admitted_workloads_total``)."""
        pc, lq = priority_class_of(workload), local_queue_of(workload)
        waited, checks_waited = max(0.0, waited), max(0.0, checks_waited)
        role = self.replica_role
        self.admitted_workloads.labels(cluster_queue, pc, role).inc()
        self.admission_wait_time.labels(cluster_queue, pc, role).observe(waited)
        self.admission_checks_wait_time.labels(cluster_queue, pc, role).observe(checks_waited)
        for cohort in cohorts:
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
        for s in samples:
            cohorts = s.cohorts or ((s.cohort,) if s.cohort else ())
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
        self._set_local_queues(local_queues)


def priority_class_of(workload: Workload | None) -> str:
    """Upstream's ``priority_class`` label: the name in the Workload's
    ``spec.priorityClassRef`` (v1beta2; upstream's ``workload.PriorityClassName``), "" when
    it has none. A Workload read as v1beta1 names it in ``spec.priorityClassName``."""
    if workload is None:
        return ""
    spec = at(workload, "spec")
    return str(at(spec, "priorityClassRef").get("name") or spec.get("priorityClassName") or "")


def local_queue_of(workload: Workload | None) -> tuple[str, str] | None:
    """(LocalQueue name, namespace) of a Workload, None when unknown."""
    if workload is None:
        return None
    name = at(workload, "spec").get("queueName")
    namespace = at(workload, "metadata").get("namespace")
    if not name or not namespace:
        return None
    return str(name), str(namespace)
