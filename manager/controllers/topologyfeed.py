"""What topology-aware scheduling reads of a cluster, fed to the admission core: Topology
objects, Nodes, and the requests of the pods it does not place (upstream's TAS cache and
its non-TAS pod cache).

A pod counts on its node once scheduled and until it ends. Pods of TAS workloads (labelled
``kueue.x-k8s.io/tas``) are not counted here: their workload's topology assignment holds
their room from admission on, before they exist.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pydantic

from manager import core
from manager.api.pod import PodSpec
from manager.api.view import at, labels_of
from manager.controllers import convert
from manager.kube.api import Obj
from manager.kube.informer import Event

log = logging.getLogger(__name__)

TAS_LABEL = "kueue.x-k8s.io/tas"
"""Upstream's label on the pods of a workload placed by topology."""


class TopologyFeed:
    def __init__(self, admission_core: core.AdmissionCore, kick: Callable[[], None]) -> None:
        self.core = admission_core
        self.kick = kick
        self._pods: dict[str, tuple[str, dict[core.ResourceName, int]]] = {}
        """Counted pods: key -> (node, requests with ``pods: 1``)."""
        self._per_node: dict[str, dict[core.ResourceName, int]] = {}

    def on_topology(self, event: Event) -> None:
        if event.type == "DELETED":
            self.core.delete_topology(event.key)
        else:
            try:
                self.core.set_topology(convert.topology(event.obj))
            except (KeyError, ValueError) as err:
                log.warning("Topology %s is not usable: %s", event.key, err)
                self.core.delete_topology(event.key)
        self.kick()

    def on_node(self, event: Event) -> None:
        if event.type == "DELETED":
            self.core.delete_node(event.key)
        else:
            try:
                self.core.upsert_node(convert.node(event.obj))
            except (KeyError, ValueError) as err:
                log.warning("Node %s is not usable for TAS: %s", event.key, err)
                self.core.delete_node(event.key)
        self.kick()

    def on_pod(self, event: Event) -> None:
        if event.type != "DELETED" and event.old is not None and _same_count(event.old, event.obj):
            return  # a status update (most pod events): what it holds did not change
        counted = None if event.type == "DELETED" else _counted(event.obj)
        before = self._pods.pop(event.key, None)
        if before == counted:
            if counted is not None:
                self._pods[event.key] = counted
            return
        if before is not None:
            self._add(before[0], before[1], -1)
        if counted is not None:
            self._pods[event.key] = counted
            self._add(counted[0], counted[1], 1)
        self.kick()

    def _add(self, node: str, requests: dict[core.ResourceName, int], sign: int) -> None:
        total = self._per_node.setdefault(node, {})
        for resource, value in requests.items():
            total[resource] = total.get(resource, 0) + sign * value
            if total[resource] == 0:
                del total[resource]
        if not total:
            del self._per_node[node]
        self.core.set_pod_usage(node, dict(total))


def _same_count(old: Obj, new: Obj) -> bool:
    """Would ``new`` be counted exactly as ``old`` was (same spec, labels and whether it ended)?"""
    ended = ("Succeeded", "Failed")
    return (
        old.get("spec") == new.get("spec")
        and (at(old, "status").get("phase") in ended) == (at(new, "status").get("phase") in ended)
        and labels_of(old).get(TAS_LABEL) == labels_of(new).get(TAS_LABEL)
    )


def _counted(pod: Obj) -> tuple[str, dict[core.ResourceName, int]] | None:
    """(node, requests) of a pod that holds room outside TAS's own accounting, else None."""
    spec, status = at(pod, "spec"), at(pod, "status")
    node = spec.get("nodeName")
    labels = labels_of(pod)
    if not node or status.get("phase") in ("Succeeded", "Failed") or TAS_LABEL in labels:
        return None
    try:
        requests = convert.pod_requests(PodSpec.model_validate(spec))
    except (pydantic.ValidationError, ValueError):
        return None
    return str(node), {**requests, core.PODS: 1}
