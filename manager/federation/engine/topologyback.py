"""TAS: where the worker placed the pods, brought back to the manager's Workload.

The worker's shim writes the exact assignment on its copy (``topologyAssignment`` of each pod
set, upstream's v1beta2 form, hosts only when the lowest level is the hostname). The manager's
Workload gets the same in its own ``status.admission`` (its ``delayedTopologyRequest`` then
``Ready``, as upstream names a request served), and the annotation ``kfed.io/topology``
with every level spelled out (block, rack, host and pod count, from the worker's report), for
``kfed explain``, the workload page and its trace (a span ``topology``).
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
from collections.abc import Mapping
from typing import Any

from manager.api.view import annotations_of, items
from manager.controllers import spans, topologyassignment
from manager.controllers import workloadstatus as ws
from manager.controllers.state import ClusterState
from manager.core.tas import TopologySnapshot
from manager.federation.decisions.topology import short
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import Obj
from manager.kube.update import patch_guarded

log = logging.getLogger(__name__)

ANNOTATION = "kfed.io/topology"
"""On the manager's Workload: ``{"cluster", "podSets": {name: [[values...], count]...},
"levels"}``, every level of the worker's topology named."""
READY = "Ready"


def assignments_of(remote_wl: Obj) -> dict[str, Any]:
    """Pod set -> its ``topologyAssignment`` on the worker's copy."""
    return {
        str(psa.get("name", "")): psa["topologyAssignment"]
        for psa in items(remote_wl, "status", "admission", "podSetAssignments")
        if psa.get("topologyAssignment")
    }


def with_assignments(obj: Obj, found: dict[str, Any]) -> Obj | None:
    """The manager's Workload with the worker's assignments in its admission (None: it has
    them already, or has no admission to put them in)."""
    # Writes into the pod set assignments of ``obj`` itself: reads them live, not through
    # the read-only views of manager.api.view.
    admission = ws.status_of(obj).get("admission") or {}
    changed = False
    for psa in admission.get("podSetAssignments") or []:
        got = found.get(str(psa.get("name", "")))
        if got is None or psa.get("topologyAssignment") == got:
            continue
        psa["topologyAssignment"] = got
        psa["delayedTopologyRequest"] = READY
        changed = True
    return obj if changed else None


def spelled_out(
    cluster: str, found: dict[str, Any], trees: dict[str, TopologySnapshot]
) -> dict[str, Any]:
    """Each domain of the assignments with its values at every level of the worker's
    topology (a host's block and rack from the report; as assigned when not found)."""
    levels: list[str] = []
    pod_sets: dict[str, list[list[Any]]] = {}
    for name, raw in found.items():
        assignment = topologyassignment.from_status(raw)
        for domain in assignment.domains:
            full = _full(domain.values, assignment.levels, trees)
            if full is not None and len(full[0]) > len(levels):
                levels = list(full[0])
            values = list(full[1]) if full else list(domain.values)
            pod_sets.setdefault(name, []).append([values, domain.count])
        if not levels:
            levels = list(assignment.levels)
    return {"cluster": cluster, "levels": levels, "podSets": pod_sets}


def _full(
    values: tuple[str, ...], levels: tuple[str, ...], trees: dict[str, TopologySnapshot]
) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    for tree in trees.values():
        offset = len(tree.levels) - len(levels)
        if offset < 0 or tuple(tree.levels[offset:]) != tuple(levels):
            continue
        for leaf in tree.leaves.values():
            if leaf.values[offset:] == tuple(values):
                return tuple(tree.levels), leaf.values
    return None


def to_bring_back(
    cluster: str, obj: Obj, remote_wl: Obj | None, trees: dict[str, Any]
) -> tuple[dict[str, Any], str] | None:
    """The worker copy's assignments and their annotation text, when the manager's Workload
    does not show them yet (None: nothing to bring back). Reads only."""
    if remote_wl is None:
        return None
    found = assignments_of(remote_wl)
    if not found:
        return None
    text = json.dumps(spelled_out(cluster, found, trees), separators=(",", ":"))
    annotated = annotations_of(obj).get(ANNOTATION) == text
    if annotated and with_assignments(copy.deepcopy(obj), found) is None:
        return None
    return found, text


async def bring_back(
    state: ClusterState, cluster: str, obj: Obj, found: Mapping[str, Any], text: str
) -> None:
    """Write the worker copy's assignments into the manager's Workload, once each: its
    ``status.admission`` and the annotation (``to_bring_back`` read them)."""
    meta = obj["metadata"]
    assignments = dict(found)
    with contextlib.suppress(errors.NotFound):
        if with_assignments(copy.deepcopy(obj), assignments) is not None:
            await patch_guarded(
                state.api,
                R.WORKLOADS,
                obj,
                lambda o: with_assignments(o, assignments),
                subresource="status",
            )
        if annotations_of(obj).get(ANNOTATION) != text:
            await state.api.patch(
                R.WORKLOADS,
                meta["name"],
                {"metadata": {"annotations": {ANNOTATION: text}}},
                meta["namespace"],
            )
            # In the workload's trace too: where its pods went, every level named.
            spans.record(
                "manager",
                "topology",
                obj,
                attributes={"kfed.cluster": cluster, "kfed.topology": described(text)},
            )


SHOWN = 8
"""Domains shown per pod set; the rest are counted."""


def lines(workload: Mapping[str, Any]) -> list[str]:
    """Where its pods went, for people (``kfed explain``, the workload page), while that is
    its placement: admitted with a topology assignment, or finished (none once it was
    evicted and waits to be placed again)."""
    text = annotations_of(workload).get(ANNOTATION)
    placed_now = any(
        psa.get("topologyAssignment")
        for psa in items(workload, "status", "admission", "podSetAssignments")
    )
    if not text or not (placed_now or ws.is_finished(workload)):
        return []
    return described(text)


def described(text: str) -> list[str]:
    """A ``kfed.io/topology`` value in lines: the worker and its levels, then per pod set its
    domains with every level named."""
    try:
        placed = json.loads(text)
        pod_sets = dict(placed["podSets"])
    except (ValueError, KeyError, TypeError):
        return [f"unreadable {ANNOTATION} annotation"]
    levels = " / ".join(short(str(level)) for level in placed.get("levels") or [])
    result = [f"on {placed.get('cluster', '?')} ({levels})"] if levels else []
    for name, domains in sorted(pod_sets.items()):
        shown = [f"{' / '.join(values)} x{count}" for values, count in domains[:SHOWN]]
        more = len(domains) - len(shown)
        result.append(f"{name}: {', '.join(shown)}" + (f" and {more} more" if more > 0 else ""))
    return result
