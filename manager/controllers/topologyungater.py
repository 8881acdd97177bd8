"""The topology ungater: gives each pod of a placed pod set its domain (upstream's
``pkg/controller/tas/topology_ungater.go``).

The pods of a pod set with a topology assignment are created behind the
``kueue.x-k8s.io/topology`` scheduling gate (``jobplacement.py`` puts it in their template). Once
the Workload is admitted, each gated pod gets, in one patch, the nodeSelector of a domain
of the assignment that still has fewer running pods than its count, and loses the gate;
the kube-scheduler then binds it inside that domain. A pod that ends (or is deleted)
frees its place, so the pod its job creates instead goes to the same domain.

Pods are taken in order of their completion index when they have one (an Indexed Job's
pods), else by name, so that a restart of this controller gives the same answer.
"""

from __future__ import annotations

import logging
import time

from manager import core
from manager.api import constants as C
from manager.api.view import at, items, labels_of
from manager.controllers import conditions, taspods, topologyassignment
from manager.controllers import workloadstatus as ws
from manager.controllers.state import ClusterState
from manager.kube import resources as R
from manager.kube.api import Obj
from manager.kube.informer import Event, Informer
from manager.kube.workqueue import WorkQueue

log = logging.getLogger(__name__)

_BY_WORKLOAD = "workload"
_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"


def _workload_of(pod: Obj) -> str | None:
    meta = at(pod, "metadata")
    name = at(meta, "annotations").get(taspods.WORKLOAD_ANNOTATION)
    if not name or at(meta, "labels").get(taspods.TAS_LABEL) != "true":
        return None
    return f"{meta.get('namespace')}/{name}"


def is_gated(pod: Obj) -> bool:
    gates = items(pod, "spec", "schedulingGates")
    return any(g.get("name") == taspods.TOPOLOGY_GATE for g in gates)


def _alive(pod: Obj) -> bool:
    phase = at(pod, "status").get("phase")
    return phase not in ("Succeeded", "Failed") and not at(pod, "metadata").get("deletionTimestamp")


def _order(pod: Obj) -> tuple[int, str]:
    meta = at(pod, "metadata")
    index = at(meta, "labels").get(_INDEX_LABEL) or at(meta, "annotations").get(_INDEX_LABEL)
    return (int(str(index)) if str(index).isdigit() else 1 << 30, str(meta.get("name", "")))


def node_selector(levels: tuple[str, ...], values: tuple[str, ...]) -> dict[str, str]:
    return dict(zip(levels, values, strict=True))


def plan(assignment: core.TopologyAssignment, pods: list[Obj]) -> list[tuple[Obj, dict[str, str]]]:
    """Which gated pod goes to which domain: each domain takes pods until the pods that run
    there (ungated, alive, with its nodeSelector) reach its count."""
    room: list[tuple[dict[str, str], int]] = []
    alive = [p for p in pods if _alive(p)]
    placed = [p for p in alive if not is_gated(p)]
    for domain in assignment.domains:
        selector = node_selector(assignment.levels, domain.values)
        there = sum(
            1
            for p in placed
            if all(at(p, "spec", "nodeSelector").get(k) == v for k, v in selector.items())
        )
        room.append((selector, domain.count - there))
    moves = []
    for pod in sorted((p for p in alive if is_gated(p)), key=_order):
        slot = next((i for i, (_, left) in enumerate(room) if left > 0), None)
        if slot is None:
            break
        selector, left = room[slot]
        room[slot] = (selector, left - 1)
        moves.append((pod, selector))
    return moves


class TopologyUngater:
    def __init__(self, state: ClusterState, pods: Informer) -> None:
        self.state = state
        self.pods = pods
        self.queue = WorkQueue(name="topology-ungater")
        pods.add_index(_BY_WORKLOAD, lambda p: [w] if (w := _workload_of(p)) else [])
        pods.subscribe(self._on_pod)
        state.workloads.subscribe(self._on_workload)

    def __repr__(self) -> str:
        return "<TopologyUngater>"

    def _on_pod(self, event: Event) -> None:
        key = _workload_of(event.obj)
        if key is not None:
            self.queue.add(key)

    def _on_workload(self, event: Event) -> None:
        if event.type != "DELETED" and _assignments(event.obj):
            self.queue.add(event.key)

    async def reconcile(self, key: str) -> float | None:
        wl = self.state.workloads.get(key)
        if wl is None or not ws.is_admitted(wl) or ws.is_finished(wl):
            return None
        pods = self.pods.by_index(_BY_WORKLOAD, key)
        for pod_set, assignment in _assignments(wl).items():
            mine = [p for p in pods if labels_of(p).get(taspods.PODSET_LABEL) == pod_set]
            for pod, selector in plan(assignment, mine):
                await self._ungate(pod, selector)
                self._record_gate_removal(wl)
        return None

    def _record_gate_removal(self, wl: Obj) -> None:
        """``kueue_pod_scheduling_gate_removal_seconds``: the workload's admission (its
        Admitted condition's time) to this pod's ungating, as upstream's ungater records it.
        kfed places no plain-pod groups: ``is_group`` is always false."""
        admitted = conditions.find(ws.status_of(wl).get("conditions"), C.ADMITTED)
        since = ws.parse_time(admitted.get("lastTransitionTime")) if admitted else None
        cluster_queue = ws.cluster_queue_of(wl)
        if since is None or not cluster_queue:
            return
        self.state.metrics.scheduling_gate_removed(
            taspods.TOPOLOGY_GATE, cluster_queue, seconds=time.time() - since
        )

    async def _ungate(self, pod: Obj, selector: dict[str, str]) -> None:
        meta = pod["metadata"]
        gates = [
            g
            for g in items(pod, "spec", "schedulingGates")
            if g.get("name") != taspods.TOPOLOGY_GATE
        ]
        patch = {
            "metadata": {"resourceVersion": meta.get("resourceVersion")},
            "spec": {"schedulingGates": gates or None, "nodeSelector": selector},
        }
        written = await self.state.api.patch(R.PODS, meta["name"], patch, meta["namespace"])
        self.pods.remember_written(f"{meta['namespace']}/{meta['name']}", pod, written)
        log.info("ungated pod %s/%s to %s", meta["namespace"], meta["name"], selector)


def _assignments(wl: Obj) -> dict[str, core.TopologyAssignment]:
    result = {}
    for psa in items(wl, "status", "admission", "podSetAssignments"):
        raw = psa.get("topologyAssignment")
        if raw:
            try:
                result[str(psa.get("name", ""))] = topologyassignment.from_status(raw)
            except (KeyError, ValueError, IndexError, TypeError) as err:
                log.warning("unreadable topologyAssignment of %s: %s", psa.get("name"), err)
    return result
