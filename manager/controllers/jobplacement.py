"""Where a job's pod sets run under its Workload's admission: each pod set's nodeSelector
and tolerations as submitted (the Workload keeps them), plus its flavors' node labels and
tolerations and its admission checks' podSetUpdates; a pod set placed by topology also
gets the topology gate and labels for the ungater. Pure: Workload and flavor dicts in."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from manager.api.view import at, items
from manager.controllers import taspods
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.base import PodSetPlacement

Obj = dict[str, Any]


def placements(wl: Obj, flavor: Callable[[str], Obj | None]) -> dict[str, PodSetPlacement]:
    """Per pod set: the nodeSelector and tolerations it runs with under this admission
    (its submitted ones, plus its flavors' and its admission checks' podSetUpdates)."""
    submitted_ = submitted(wl)
    admission = at(ws.status_of(wl), "admission")
    updates: dict[str, list[Obj]] = {}
    for check in items(ws.status_of(wl), "admissionChecks"):
        for update in items(check, "podSetUpdates"):
            updates.setdefault(str(update.get("name", "")), []).append(update)
    result = {}
    for psa in items(admission, "podSetAssignments"):
        name = str(psa.get("name", ""))
        base = submitted_.get(name, PodSetPlacement({}, []))
        selector, tolerations = dict(base.node_selector), list(base.tolerations)
        sources = [at(flavor(f), "spec") for f in sorted(set(at(psa, "flavors").values()))]
        for fspec in sources:
            selector.update(at(fspec, "nodeLabels"))
            tolerations += [t for t in fspec.get("tolerations") or [] if t not in tolerations]
        for update in updates.get(name, []):
            selector.update(at(update, "nodeSelector"))
            tolerations += [t for t in update.get("tolerations") or [] if t not in tolerations]
        placement = PodSetPlacement(selector, tolerations)
        if psa.get("topologyAssignment"):
            placement = placed_by_topology(placement, base, name, wl)
        result[name] = placement
    return result


def submitted(wl: Obj) -> dict[str, PodSetPlacement]:
    """Each pod set's nodeSelector and tolerations as submitted (the Workload keeps them),
    and for a pod set placed by topology its labels, annotations and scheduling gates too
    (what ``placed_by_topology`` adds is taken back on eviction)."""
    result = {}
    for ps in items(wl, "spec", "podSets"):
        spec, meta = at(ps, "template", "spec"), at(ps, "template", "metadata")
        placement = PodSetPlacement(
            dict(at(spec, "nodeSelector")), list(items(spec, "tolerations"))
        )
        if ps.get("topologyRequest") or admitted_by_topology(wl, str(ps.get("name", ""))):
            placement = dataclasses.replace(
                placement,
                labels=dict(at(meta, "labels")),
                annotations=dict(at(meta, "annotations")),
                scheduling_gates=list(items(spec, "schedulingGates")),
            )
        result[str(ps.get("name", ""))] = placement
    return result


def admitted_by_topology(wl: Obj, pod_set: str) -> bool:
    return any(
        psa.get("name") == pod_set and psa.get("topologyAssignment")
        for psa in items(ws.status_of(wl), "admission", "podSetAssignments")
    )


def placed_by_topology(
    placement: PodSetPlacement, submitted: PodSetPlacement, pod_set: str, wl: Obj
) -> PodSetPlacement:
    """A pod set with a topology assignment: its pods are created behind the topology gate,
    labelled and named after their Workload, for the ungater (topologyungater.py) to give
    each one its domain's nodeSelector."""
    gates = [g for g in submitted.scheduling_gates or [] if g.get("name") != taspods.TOPOLOGY_GATE]
    return dataclasses.replace(
        placement,
        labels={
            **(submitted.labels or {}),
            taspods.TAS_LABEL: "true",
            taspods.PODSET_LABEL: pod_set,
        },
        annotations={
            **(submitted.annotations or {}),
            taspods.WORKLOAD_ANNOTATION: str(wl["metadata"]["name"]),
        },
        scheduling_gates=[*gates, {"name": taspods.TOPOLOGY_GATE}],
    )
