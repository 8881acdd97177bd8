"""Upstream's names for topology-aware scheduling on pods and their templates: what a job
asks with (pod template annotations), and what marks the pods of a placed pod set (a label,
the Workload's name, and the scheduling gate they are created behind until the ungater
gives each one its domain).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from manager.api.view import annotations_of

REQUIRED_ANNOTATION: Final = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_ANNOTATION: Final = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED_ANNOTATION: Final = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED_ANNOTATION: Final = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE_ANNOTATION: Final = "kueue.x-k8s.io/podset-slice-size"

TAS_LABEL: Final = "kueue.x-k8s.io/tas"
"""On the pods of a pod set placed by topology (value ``true``)."""
PODSET_LABEL: Final = "kueue.x-k8s.io/podset"
"""On such pods: the pod set's name."""
WORKLOAD_ANNOTATION: Final = "kueue.x-k8s.io/workload"
"""On such pods: the name of their Workload (in their namespace)."""
TOPOLOGY_GATE: Final = "kueue.x-k8s.io/topology"
"""The scheduling gate such pods are created behind: lifted one pod at a time, together
with the nodeSelector of the domain the pod goes to."""


def topology_request(template: Mapping[str, Any]) -> dict[str, Any] | None:
    """A Workload pod set's ``topologyRequest`` from its template's annotations, as upstream's
    job integrations build it; None when they ask for no topology.

    A slice size that is not a positive number is kept out: the admission core then says
    "slice topology requested, but slice size not provided" on the Workload."""
    annotations = annotations_of(template)
    request: dict[str, Any] = {}
    if annotations.get(REQUIRED_ANNOTATION):
        request["required"] = annotations[REQUIRED_ANNOTATION]
    elif annotations.get(PREFERRED_ANNOTATION):
        request["preferred"] = annotations[PREFERRED_ANNOTATION]
    elif str(annotations.get(UNCONSTRAINED_ANNOTATION, "")).lower() == "true":
        request["unconstrained"] = True
    if annotations.get(SLICE_REQUIRED_ANNOTATION):
        request["podSetSliceRequiredTopology"] = annotations[SLICE_REQUIRED_ANNOTATION]
        size = str(annotations.get(SLICE_SIZE_ANNOTATION, ""))
        if size.isdigit() and int(size) > 0:
            request["podSetSliceSize"] = int(size)
    return request or None
