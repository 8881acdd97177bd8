"""The state behind upstream's v0.18 and v0.19 gauges (``metrics.kueuev019``), read from one
cluster's views right before a scrape: where each ClusterQueue and cohort sits in the cohort
tree, what each ClusterQueue's pending workloads request, and the workloads not admitted and
why."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from manager import core
from manager.api import constants as C
from manager.api.view import at
from manager.controllers import conditions
from manager.controllers import workloadstatus as ws
from manager.controllers.state import ClusterState
from manager.observability.units import natural
from manager.telemetry.metrics import TreeSample, UnadmittedSample

Obj = Mapping[str, Any]


def _ancestry(cohort: str, parents: Mapping[str, str]) -> list[str] | None:
    """The cohort and its ancestors, nearest first; None when walking up runs into a cycle
    (the core reports such a tree invalid, and upstream reports nothing for it)."""
    path: list[str] = []
    node = cohort
    while node:
        if node in path:
            return None
        path.append(node)
        node = parents.get(node, "")
    return path


def queue_tree(state: ClusterState) -> tuple[list[TreeSample], list[TreeSample]]:
    """(ClusterQueues, cohorts) with their parent and root, as ``kueue_cluster_queue_info``
    and ``kueue_cohort_info`` label them. The cohorts are the Cohort objects and every name a
    ClusterQueue or a Cohort gives as its cohort or parent (upstream's implicit cohorts)."""
    parents: dict[str, str] = {}
    names: set[str] = set()
    for obj in state.cohorts.items():
        name = str(at(obj, "metadata").get("name") or "")
        names.add(name)
        if parent := str(at(obj, "spec").get("parentName") or ""):
            parents[name] = parent
            names.add(parent)
    queues: list[TreeSample] = []
    for obj in state.cluster_queues.items():
        name = str(at(obj, "metadata").get("name") or "")
        cohort = str(at(obj, "spec").get("cohortName") or "")
        path = _ancestry(cohort, parents) if cohort else None
        if cohort:
            names.add(cohort)
        queues.append(TreeSample(name, path[0], path[-1]) if path else TreeSample(name, "", ""))
    cohorts = []
    for name in names:
        path = _ancestry(name, parents)
        if path is not None:
            cohorts.append(TreeSample(name, path[1] if len(path) > 1 else "", path[-1]))
    return sorted(queues, key=lambda s: s.name), sorted(cohorts, key=lambda s: s.name)


def pending_resources(state: ClusterState) -> dict[str, dict[str, float]]:
    """ClusterQueue -> resource -> what its pending workloads request in all (natural units),
    each resource the ClusterQueue covers reported even at 0, as upstream reports it."""
    result: dict[str, dict[str, float]] = {}
    for obj in state.cluster_queues.items():
        name = str(at(obj, "metadata").get("name") or "")
        totals: dict[str, float] = {}
        for group in at(obj, "spec").get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for resource in flavor.get("resources") or []:
                    totals[str(resource.get("name"))] = 0.0
        requested = state.core.pending_requests(core.ClusterQueueName(name))
        for resource, units in requested.items():
            totals[resource] = natural(resource, units)
        result[name] = totals
    return result


def unadmitted_samples(state: ClusterState) -> list[UnadmittedSample]:
    """Every workload not admitted, finished or being deleted, as upstream v0.19 counts it
    (UnadmittedWorkloadsObservability): ``reason`` NoReservation while it holds no quota,
    UnsatisfiedAdmissionChecks while it holds quota and waits for its checks (the reasons
    upstream writes to Admitted=False then), and ``underlying_cause`` its QuotaReserved=False
    reason (PendingEvaluation while it has none yet, "" while it holds quota). Its
    ClusterQueue is its LocalQueue's, as upstream finds it; none when that LocalQueue is
    missing."""
    samples = []
    for obj in state.workloads.items():
        meta = at(obj, "metadata")
        if meta.get("deletionTimestamp") or ws.is_admitted(obj) or ws.is_finished(obj):
            continue
        namespace, queue = str(meta.get("namespace") or ""), at(obj, "spec").get("queueName")
        lq = state.local_queues.get(f"{namespace}/{queue}") if queue else None
        cluster_queue = str(at(lq, "spec").get("clusterQueue") or "") if lq else ""
        if ws.has_reservation(obj):
            reason, cause = C.REASON_UNSATISFIED_ADMISSION_CHECKS, ""
        else:
            reason = C.REASON_NO_RESERVATION
            found = conditions.find(ws.status_of(obj).get("conditions"), C.QUOTA_RESERVED)
            if found is None:
                cause = C.REASON_PENDING_EVALUATION
            elif found.get("status") == "True":
                cause = ""
            else:
                cause = str(found.get("reason") or "")
        samples.append(
            UnadmittedSample(
                cluster_queue=cluster_queue,
                local_queue=(str(queue), namespace) if lq is not None else None,
                reason=reason,
                underlying_cause=cause,
            )
        )
    return samples
