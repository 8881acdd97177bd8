"""API objects (pydantic models of kueue.x-k8s.io and batch/v1) to the admission core's plain
dataclasses, and the core's admissions back to Workload status.

Quantities become the core's ints here (milli-cpu, bytes, counts), once, at the edge.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from manager import core
from manager.api import draannotations, quantity
from manager.api.clusterqueue import ClusterQueue
from manager.api.cohort import Cohort
from manager.api.localqueue import LocalQueue
from manager.api.meta import LabelSelector
from manager.api.pod import NodeSelectorTerm as ApiNodeSelectorTerm
from manager.api.pod import PodSpec, Taint, Toleration
from manager.api.quota import ResourceGroup
from manager.api.resourceflavor import ResourceFlavor
from manager.api.topology import TopologyRequest
from manager.api.view import at, labels_of
from manager.api.workload import Workload
from manager.controllers import topologyassignment

_RESOURCE_POLICY = {
    "Never": core.PreemptionPolicy.NEVER,
    "LowerPriority": core.PreemptionPolicy.LOWER_PRIORITY,
    "LowerOrNewerEqualPriority": core.PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY,
    "Any": core.PreemptionPolicy.ANY,
}


def units(resource: str, value: Any) -> int:
    return quantity.to_core_units(resource, value)


def label_selector(selector: LabelSelector | None) -> core.LabelSelector | None:
    if selector is None:
        return None
    return core.LabelSelector(
        match_labels=dict(selector.match_labels or {}),
        match_expressions=tuple(
            core.Requirement(e.key, core.Operator(str(e.operator)), tuple(e.values or ()))
            for e in selector.match_expressions or ()
        ),
    )


def tolerations(items: Iterable[Toleration]) -> tuple[core.Toleration, ...]:
    return tuple(
        core.Toleration(
            key=t.key or "",
            operator=core.TolerationOperator(t.operator or "Equal"),
            value=t.value or "",
            effect=core.TaintEffect(t.effect) if t.effect else None,
        )
        for t in items
    )


def taints(items: Iterable[Taint]) -> tuple[core.Taint, ...]:
    return tuple(core.Taint(t.key, core.TaintEffect(t.effect), t.value or "") for t in items)


def flavor(rf: ResourceFlavor) -> core.ResourceFlavor:
    return core.ResourceFlavor(
        name=core.FlavorName(rf.metadata.name or ""),
        node_labels=dict(rf.spec.node_labels),
        node_taints=taints(rf.spec.node_taints),
        tolerations=tolerations(rf.spec.tolerations),
        topology_name=rf.spec.topology_name,
    )


def topology_request(request: TopologyRequest | None) -> core.TopologyRequest | None:
    """What a pod set asks of the topology; the first of several slice layers stands for
    them all (kfed places one layer of slices: docs/tas.md)."""
    if request is None:
        return None
    slice_level, slice_size = request.pod_set_slice_required_topology, request.pod_set_slice_size
    layers = request.podset_slice_required_topology_constraints
    if slice_level is None and layers:
        slice_level, slice_size = layers[0].topology, layers[0].size
    converted = core.TopologyRequest(
        required=request.required,
        preferred=request.preferred,
        unconstrained=bool(request.unconstrained),
        slice_required=slice_level,
        slice_size=slice_size,
    )
    return converted if converted.asks else None


def topology(obj: Mapping[str, Any]) -> core.Topology:
    """A Topology object (as stored) for the core; ValueError without levels."""
    levels = tuple(str(level["nodeLabel"]) for level in (at(obj, "spec").get("levels") or []))
    if not levels:
        raise ValueError("spec.levels is empty")
    return core.Topology(str(obj["metadata"]["name"]), levels)


def node(obj: Mapping[str, Any]) -> core.Node:
    """What TAS reads of a Node: labels, taints, allocatable, Ready and unschedulable."""
    spec, status = at(obj, "spec"), at(obj, "status")
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    return core.Node(
        name=str(obj["metadata"]["name"]),
        labels=dict(labels_of(obj)),
        allocatable={
            core.ResourceName(r): units(r, v) for r, v in at(obj, "status", "allocatable").items()
        },
        taints=tuple(
            core.Taint(t["key"], core.TaintEffect(t["effect"]), t.get("value") or "")
            for t in spec.get("taints") or []
        ),
        ready=ready,
        unschedulable=bool(spec.get("unschedulable")),
    )


def resource_groups(groups: Iterable[ResourceGroup]) -> tuple[core.ResourceGroup, ...]:
    return tuple(
        core.ResourceGroup(
            covered_resources=tuple(core.ResourceName(r) for r in rg.covered_resources),
            flavors=tuple(
                core.FlavorQuotas(
                    name=core.FlavorName(fq.name),
                    resources=tuple(
                        core.ResourceQuota(
                            name=core.ResourceName(rq.name),
                            nominal=units(rq.name, rq.nominal_quota),
                            borrowing_limit=None
                            if rq.borrowing_limit is None
                            else units(rq.name, rq.borrowing_limit),
                            lending_limit=None
                            if rq.lending_limit is None
                            else units(rq.name, rq.lending_limit),
                        )
                        for rq in fq.resources
                    ),
                )
                for fq in rg.flavors
            ),
        )
        for rg in groups
    )


def _weight(fair_sharing: Any) -> float:
    if fair_sharing is None or fair_sharing.weight is None:
        return 1.0
    return float(quantity.parse_quantity(fair_sharing.weight).value)


def cluster_queue(cq: ClusterQueue) -> core.ClusterQueue:
    spec = cq.spec
    p = spec.preemption
    ff = spec.flavor_fungibility
    return core.ClusterQueue(
        name=core.ClusterQueueName(cq.metadata.name or ""),
        resource_groups=resource_groups(spec.resource_groups),
        cohort=core.CohortName(spec.cohort_name) if spec.cohort_name else None,
        queueing_strategy=core.QueueingStrategy(str(spec.queueing_strategy)),
        namespace_selector=label_selector(spec.namespace_selector),
        preemption=core.ClusterQueuePreemption(
            within_cluster_queue=_RESOURCE_POLICY[str(p.within_cluster_queue)],
            reclaim_within_cohort=_RESOURCE_POLICY[str(p.reclaim_within_cohort)],
            borrow_within_cohort=core.BorrowWithinCohort(
                policy=core.BorrowWithinCohortPolicy(str(p.borrow_within_cohort.policy)),
                max_priority_threshold=p.borrow_within_cohort.max_priority_threshold,
            ),
        ),
        flavor_fungibility=core.FlavorFungibility(
            when_can_borrow=core.FungibilityPolicy(str(ff.when_can_borrow)),
            when_can_preempt=core.FungibilityPolicy(str(ff.when_can_preempt)),
            preference=core.FungibilityPreference(str(ff.preference)) if ff.preference else None,
        ),
        stop_policy=core.StopPolicy(str(spec.stop_policy)),
        fair_sharing_weight=_weight(spec.fair_sharing),
    )


def cohort(obj: Cohort) -> core.Cohort:
    return core.Cohort(
        name=core.CohortName(obj.metadata.name or ""),
        parent=core.CohortName(obj.spec.parent_name) if obj.spec.parent_name else None,
        resource_groups=resource_groups(obj.spec.resource_groups),
        fair_sharing_weight=_weight(obj.spec.fair_sharing),
    )


def local_queue(lq: LocalQueue) -> core.LocalQueue:
    return core.LocalQueue(
        namespace=core.Namespace(lq.metadata.namespace or ""),
        name=lq.metadata.name or "",
        cluster_queue=core.ClusterQueueName(lq.spec.cluster_queue),
        stop_policy=core.StopPolicy(str(lq.spec.stop_policy)),
    )


def pod_requests(spec: PodSpec) -> dict[core.ResourceName, int]:
    """Effective per-pod requests, as the scheduler computes them: the sum over containers
    (a limit stands in for a missing request), at least the largest init container, plus
    the pod overhead."""
    total: dict[str, int] = {}
    for container in spec.containers:
        for name, value in _container_requests(container.resources).items():
            total[name] = total.get(name, 0) + value
    for container in spec.init_containers:
        for name, value in _container_requests(container.resources).items():
            total[name] = max(total.get(name, 0), value)
    for name, overhead in (spec.overhead or {}).items():
        total[name] = total.get(name, 0) + units(name, overhead)
    return {core.ResourceName(k): v for k, v in total.items() if v}


def _container_requests(resources: Any) -> dict[str, int]:
    if resources is None:
        return {}
    merged = {**(resources.limits or {}), **(resources.requests or {})}
    return {name: units(name, value) for name, value in merged.items()}


def _affinity_terms(spec: PodSpec) -> tuple[core.NodeSelectorTerm, ...]:
    affinity = spec.affinity
    node_affinity = affinity.node_affinity if affinity else None
    required = (
        node_affinity.required_during_scheduling_ignored_during_execution if node_affinity else None
    )
    if required is None:
        return ()
    return tuple(_term(t) for t in required.node_selector_terms)


def _term(term: ApiNodeSelectorTerm) -> core.NodeSelectorTerm:
    return core.NodeSelectorTerm(
        match_expressions=tuple(
            core.Requirement(e.key, core.Operator(e.operator), tuple(e.values))
            for e in term.match_expressions
        )
    )


def dra_requests(wl: Workload) -> dict[str, dict[core.ResourceName, int]]:
    """Per pod set, what one pod's device claims are charged (docs/dra.md), as recorded on
    the Workload when it was created: added to its requests here, on the manager and on the
    worker that runs the copy alike, never computed again."""
    recorded = draannotations.recorded_charge(wl.metadata.annotations or {})
    return {
        ps: {core.ResourceName(r): units(r, q) for r, q in res.items()}
        for ps, res in recorded.items()
    }


def not_chargeable(wl: Workload) -> str | None:
    """Why its device claims cannot be charged (recorded when it was created), or None; a
    charge annotation that cannot be read is a reason too: it must not run uncharged."""
    annotations = wl.metadata.annotations or {}
    if draannotations.REFUSED_ANNOTATION in annotations:
        return str(annotations[draannotations.REFUSED_ANNOTATION])
    try:
        draannotations.recorded_charge(annotations)
    except ValueError as err:
        return f"annotation {draannotations.CHARGE_ANNOTATION} cannot be read: {err}"
    try:
        draannotations.recorded_replaced(annotations)
    except ValueError as err:
        return f"annotation {draannotations.REPLACED_ANNOTATION} cannot be read: {err}"
    return None


def _with(
    requests: dict[core.ResourceName, int],
    extra: Mapping[core.ResourceName, int],
    replaced: tuple[str, ...] = (),
) -> dict[core.ResourceName, int]:
    """The pod's requests, less the extended resources DRA serves (``replaced``: ``extra``
    charges them as their DeviceClass's resource, once), plus its device charge."""
    out = {r: v for r, v in requests.items() if r not in replaced}
    for resource, value in extra.items():
        out[resource] = out.get(resource, 0) + value
    return out


def workload(
    wl: Workload, *, priority: int, creation_time: float, left_to_check: str | None = None
) -> core.Workload:
    namespace, name = wl.metadata.namespace or "", wl.metadata.name or ""
    problem = not_chargeable(wl)
    devices = dra_requests(wl) if problem is None else {}
    replaced = draannotations.recorded_replaced(wl.metadata.annotations) if problem is None else {}
    return core.Workload(
        key=core.WorkloadKey(f"{namespace}/{name}"),
        queue_name=wl.spec.queue_name or "",
        pod_sets=tuple(
            core.PodSet(
                name=core.PodSetName(ps.name),
                count=ps.count,
                min_count=ps.min_count,
                requests=_with(
                    pod_requests(ps.template.spec),
                    devices.get(ps.name, {}),
                    replaced.get(ps.name, ()),
                ),
                node_selector=dict(ps.template.spec.node_selector),
                node_affinity=_affinity_terms(ps.template.spec),
                tolerations=tolerations(ps.template.spec.tolerations),
                topology_request=topology_request(ps.topology_request),
            )
            for ps in wl.spec.pod_sets
        ),
        priority=priority,
        creation_time=creation_time,
        uid=wl.metadata.uid or "",
        not_chargeable=problem,
        left_to_check=left_to_check,
    )


def admission_to_status(admission: core.Admission) -> dict[str, Any]:
    """``status.admission`` as Kueue writes it (quantities in Kueue's canonical form)."""
    return {
        "clusterQueue": admission.cluster_queue,
        "podSetAssignments": [_assignment_to_status(psa) for psa in admission.pod_set_assignments],
    }


def _assignment_to_status(psa: core.PodSetAssignment) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": psa.name,
        "flavors": dict(psa.flavors),
        "resourceUsage": {
            r: str(quantity.from_core_units(r, v)) for r, v in psa.resource_usage.items()
        },
        "count": psa.count,
    }
    if psa.topology_assignment is not None:
        out["topologyAssignment"] = topologyassignment.to_status(psa.topology_assignment)
    if psa.delayed_topology:
        out["delayedTopologyRequest"] = "Pending"
    return out


def admission_from_status(status: Mapping[str, Any]) -> core.Admission:
    return core.Admission(
        cluster_queue=core.ClusterQueueName(status["clusterQueue"]),
        pod_set_assignments=tuple(
            core.PodSetAssignment(
                name=core.PodSetName(psa.get("name", "main")),
                flavors={
                    core.ResourceName(r): core.FlavorName(f)
                    for r, f in (psa.get("flavors") or {}).items()
                },
                resource_usage={
                    core.ResourceName(r): units(r, v)
                    for r, v in (psa.get("resourceUsage") or {}).items()
                },
                count=int(psa.get("count") or 0),
                topology_assignment=(
                    topologyassignment.from_status(psa["topologyAssignment"])
                    if psa.get("topologyAssignment")
                    else None
                ),
                delayed_topology=psa.get("delayedTopologyRequest") == "Pending",
            )
            for psa in status.get("podSetAssignments") or []
        ),
    )
