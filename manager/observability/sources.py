"""What each process shows on its observability server: readiness, the state gauges to set
before a scrape, and the dashboard snapshot.

- ``ManagerSource``: a manager replica. Only the leader runs the federation (and so has
  views to show); a standby is ready once it knows who leads, and its dashboard says who.
- ``ShimSource``: a worker shim: its own queues and workloads.
"""

from __future__ import annotations

import dataclasses
import time

from manager.controllers.jobkinds import registry
from manager.controllers.runtime import ClusterController
from manager.controllers.state import ClusterState
from manager.federation.runtime import FederationController
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.leader import LeaderElector
from manager.observability.clusterrows import (
    cluster_rows,
    gpus_reserved,
    multikueue_cluster_samples,
)
from manager.observability.history import History, Sample, counter_totals
from manager.observability.queuerows import cohort_quotas, local_queue_samples, queue_rows
from manager.observability.queuetree import pending_resources, queue_tree, unadmitted_samples
from manager.observability.state import Snapshot
from manager.observability.workloadpage import WorkloadDetails
from manager.observability.workloadrows import workload_rows
from manager.telemetry import tracing
from manager.telemetry.metrics import Metrics


def set_queue_metrics(metrics: Metrics, state: ClusterState | None) -> None:
    """The ClusterQueue, LocalQueue and cohort gauges from one cluster's views (None: none)."""
    if state is None:
        metrics.set_cluster_queues(())
        metrics.set_queue_tree((), ())
        metrics.set_pending_resources({})
        metrics.set_unadmitted(())
        return
    metrics.set_cluster_queues(
        (r.sample() for r in queue_rows(state)),
        local_queues=local_queue_samples(state),
        cohort_quotas=cohort_quotas(state),
    )
    metrics.set_queue_tree(*queue_tree(state))
    metrics.set_pending_resources(pending_resources(state))
    # Upstream reports these only with its UnadmittedWorkloadsObservability gate.
    observed = state.unadmitted_workloads_observability
    metrics.set_unadmitted(unadmitted_samples(state) if observed else ())


def queue_levels(state: ClusterState) -> tuple[dict[str, int], dict[str, int]]:
    """Pending (active and inadmissible) and admitted workloads per ClusterQueue, for the
    charts of a manager or a shim."""
    rows = queue_rows(state)
    return (
        {r.name: r.pending_active + r.pending_inadmissible for r in rows},
        {r.name: r.admitted for r in rows},
    )


async def workload_details(
    state: ClusterState, namespace: str, name: str, *, trace_url: str = ""
) -> WorkloadDetails | None:
    """What the workload page shows: the Workload from the informer cache, its Job and the
    Events on both read afresh (an Event no informer keeps). None when there is no such
    Workload; a failed read leaves that part out rather than the page."""
    obj = state.workloads.get(f"{namespace}/{name}")
    if obj is None:
        return None
    job = None
    names = [name]
    owner = registry.owner_of(obj)
    if owner is not None:
        kind, key = owner
        job_name = key.split("/", 1)[1]
        names.append(job_name)
        try:
            job = await state.api.get(kind.resource, job_name, namespace)
        except errors.KubeError:
            job = None
    events: list[dict[str, object]] = []
    for involved in names:
        try:
            listed = await state.api.list(
                R.EVENTS, namespace, field_selector=f"involvedObject.name={involved}"
            )
        except errors.KubeError:
            continue
        events.extend(listed["items"])
    link = trace_url.replace("{trace_id}", tracing.trace_id_of(obj)) if trace_url else ""
    return WorkloadDetails(obj, job, events, link)


class ManagerSource:
    def __init__(
        self,
        metrics: Metrics,
        *,
        identity: str,
        elector: LeaderElector | None = None,
        federation: FederationController | None = None,
        trace_url: str = "",
    ) -> None:
        self.metrics = metrics
        self.identity = identity
        self.elector = elector
        """None when the manager runs without leader election (the in-process test bed)."""
        self.federation = federation
        """The current term's federation: set by the leader when it starts one, None again
        once leadership is lost."""
        self.history = History()
        self.trace_url = trace_url
        """A trace UI's URL for one trace, ``{trace_id}`` standing for its id ("": none)."""
        if elector is not None:
            # Upstream's replica_role (follower until elected) from the first event on, and
            # at once on every change, not only at the next scrape.
            self._leading_changed(elector.is_leader)
            elector.on_leading_changed.append(self._leading_changed)

    def _leading_changed(self, leading: bool) -> None:
        election = self.elector.config.name if self.elector is not None else None
        self.metrics.set_leader(self.identity, leading, election=election)

    @property
    def is_leader(self) -> bool:
        if self.elector is None:
            return self.federation is not None
        return self.elector.is_leader

    @property
    def leader(self) -> str | None:
        if self.elector is None:
            return self.identity if self.federation is not None else None
        return self.elector.leader

    def readiness(self) -> tuple[bool, str]:
        """Ready once leadership is known and, on the leader, every informer has synced."""
        elector = self.elector
        if elector is not None:
            if not elector.known.is_set():
                if elector.terms:  # led before: lost it (e.g. its API server went away)
                    return False, "standby: leadership lost, the Lease not read since"
                return False, "leader election has not read its Lease yet"
            if not elector.is_leader:
                if elector.leader is None:
                    return False, "no replica leads yet"
                return True, f"standby: {elector.leader} leads"
        federation = self.federation
        if federation is None:
            return False, "the federation is starting"
        if not federation.ready.is_set():
            return False, "informers are syncing"
        return True, "leading: informers synced"

    def refresh_metrics(self) -> None:
        if self.elector is not None:
            self._leading_changed(self.is_leader)
        else:
            self.metrics.leader.labels(self.identity).set(1 if self.is_leader else 0)
        federation = self.federation
        if federation is None or not self.is_leader:
            # A standby shows no queues, also once it led: no state of a lost term is left
            # behind (summed over replicas, it would count twice).
            set_queue_metrics(self.metrics, None)
            self.metrics.set_clusters(())
            self.metrics.set_multikueue_clusters(())
            return
        if not federation.manager.synced.is_set():
            return
        set_queue_metrics(self.metrics, federation.manager.state)
        self.metrics.set_clusters(r.sample() for r in cluster_rows(federation))
        self.metrics.set_multikueue_clusters(multikueue_cluster_samples(federation))

    def record_history(self, now: float | None = None) -> None:
        """One sample for the charts; nothing while this replica does not lead (a standby
        sees no queues) or before the informers synced."""
        federation = self.federation
        if federation is None or not self.is_leader or not federation.manager.synced.is_set():
            return
        pending, admitted = queue_levels(federation.manager.state)
        dispatch, failovers = counter_totals(self.metrics.registry)
        self.history.add(
            Sample(
                at=time.time() if now is None else now,
                pending=pending,
                admitted=admitted,
                gpus_reserved=gpus_reserved(federation),
                dispatch_totals=dispatch,
                failover_totals=failovers,
            )
        )

    def cluster_state(self) -> tuple[ClusterState | None, str]:
        """The global queues, on the leader once synced (for the visibility API)."""
        federation = self.federation
        if federation is None or not self.is_leader:
            return None, f"this replica does not lead ({self.leader or 'no replica'} leads)"
        if not federation.manager.synced.is_set():
            return None, "informers are syncing"
        return federation.manager.state, "leading"

    async def workload_details(self, namespace: str, name: str) -> WorkloadDetails | None:
        state, _ = self.cluster_state()
        if state is None:
            return None
        return await workload_details(state, namespace, name, trace_url=self.trace_url)

    def snapshot(self) -> Snapshot:
        ready, why = self.readiness()
        base = Snapshot(
            role="manager",
            identity=self.identity,
            ready=ready,
            ready_reason=why,
            is_leader=self.is_leader,
            leader=self.leader,
        )
        federation = self.federation
        if federation is None or not self.is_leader:
            return base
        state = federation.manager.state
        return dataclasses.replace(
            base,
            clusters=cluster_rows(federation),
            queues=queue_rows(state),
            workloads=workload_rows(state, role="manager"),
        )


class ShimSource:
    """A worker shim. Admitting (``controller`` set, while this replica leads or when it runs
    without election), its own queues and workloads; a standby of a highly available shim,
    or a fence-only one (upstream Kueue admits there), fences only: it is ready once it
    knows who leads (fence-only: at once) and shows no queues."""

    def __init__(
        self,
        controller: ClusterController | None,
        *,
        identity: str = "worker-shim",
        metrics: Metrics | None = None,
        elector: LeaderElector | None = None,
        fence_only: bool = False,
    ) -> None:
        self.controller = controller
        """The current term's admitting controller; None while not admitting."""
        if metrics is None:
            if controller is None:
                raise ValueError("a shim source without a controller needs its metrics")
            metrics = controller.state.metrics
        self.metrics = metrics
        self.identity = identity
        self.elector = elector
        self.fence_only = fence_only
        self.history = History()

    def _synced(self) -> ClusterController | None:
        controller = self.controller
        return controller if controller is not None and controller.synced.is_set() else None

    def readiness(self) -> tuple[bool, str]:
        if self.fence_only:
            return True, "fence-only: upstream Kueue admits here"
        elector = self.elector
        if elector is not None and not elector.is_leader:
            if not elector.known.is_set():
                return False, "leader election has not read its Lease yet"
            return True, f"standby: fencing; {elector.leader or 'no replica'} admits"
        if self._synced() is None:
            return False, "informers are syncing"
        return True, "informers synced"

    def cluster_state(self) -> tuple[ClusterState | None, str]:
        controller = self._synced()
        if controller is None:
            return None, "not admitting here" if self.fence_only else "informers are syncing"
        return controller.state, "synced"

    def record_history(self, now: float | None = None) -> None:
        controller = self._synced()
        if controller is None:
            return
        pending, admitted = queue_levels(controller.state)
        self.history.add(
            Sample(at=time.time() if now is None else now, pending=pending, admitted=admitted)
        )

    async def workload_details(self, namespace: str, name: str) -> WorkloadDetails | None:
        controller = self._synced()
        if controller is None:
            return None
        return await workload_details(controller.state, namespace, name)

    def refresh_metrics(self) -> None:
        if self.elector is not None:
            self.metrics.set_leader(
                self.identity, self.elector.is_leader, election=self.elector.config.name
            )
        controller = self._synced()
        # Not admitting: no queues shown (summed over replicas, they would count twice).
        set_queue_metrics(self.metrics, controller.state if controller is not None else None)

    def snapshot(self) -> Snapshot:
        ready, why = self.readiness()
        elector = self.elector
        base = Snapshot(
            role="worker",
            identity=self.identity,
            ready=ready,
            ready_reason=why,
            is_leader=elector.is_leader if elector is not None else False,
            leader=elector.leader if elector is not None else None,
        )
        controller = self._synced()
        if controller is None:
            return base
        return dataclasses.replace(
            base,
            queues=queue_rows(controller.state),
            workloads=workload_rows(controller.state, role="worker"),
        )
