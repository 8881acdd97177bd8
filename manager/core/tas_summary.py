"""A cluster's topology capacity in a few bytes per node: what a worker shim reports so that
a manager can ask "does a domain at level L hold these pod sets?" without watching the
worker's Nodes and Pods.

Per TAS flavor: the Topology's name and levels, and each leaf (a host, when the lowest level
is the hostname) with its values at every level and what is free there (allocatable, minus
the requests of the pods TAS does not place, minus what admitted TAS workloads hold). The
manager rebuilds a ``TopologySnapshot`` from it and runs the same placement as the worker
(``find_assignment``). What it leaves out: taints, node labels other than the levels, and a
node's name where the lowest level is not the hostname; the worker decides on those.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from manager.core.model import ResourceName
from manager.core.tas import TopologySnapshot
from manager.core.tas_model import Node, Topology

FORMAT = 1
"""Bumped when the shape changes; a summary of another format is ignored (not misread)."""


def summarize(snapshot: TopologySnapshot) -> dict[str, Any]:
    """One flavor's summary, JSON-ready: ``{"format", "topology", "levels", "leaves":
    [[values...], {resource: free units}]}``."""
    return {
        "format": FORMAT,
        "topology": snapshot.topology.name,
        "levels": list(snapshot.levels),
        "leaves": [
            [list(values), {r: v for r, v in sorted(free.items()) if v}]
            for values, free in snapshot.free_leaves()
        ],
    }


class BadSummary(ValueError):
    """A summary that is not in this version's shape."""


def snapshot_of(summary: Mapping[str, Any]) -> TopologySnapshot:
    """The domain tree a summary describes (each leaf one node, Ready, with its free
    capacity as allocatable); ``BadSummary`` when it is not one."""
    try:
        if summary.get("format") != FORMAT:
            raise BadSummary(f"format {summary.get('format')!r}, expected {FORMAT}")
        levels = tuple(str(level) for level in summary["levels"])
        topology = Topology(str(summary["topology"]), levels)
        nodes = []
        for i, (values, free) in enumerate(summary["leaves"]):
            if len(values) != len(levels):
                raise BadSummary(f"leaf {i} has {len(values)} values for {len(levels)} levels")
            labels = dict(zip(levels, (str(v) for v in values), strict=True))
            allocatable = {ResourceName(str(r)): int(v) for r, v in free.items()}
            nodes.append(Node(f"leaf-{i}", labels, allocatable))
    except (KeyError, TypeError, ValueError) as err:
        if isinstance(err, BadSummary):
            raise
        raise BadSummary(f"not a topology summary: {err}") from None
    tree = TopologySnapshot(topology, nodes)
    tree.forget_nodes()
    return tree


def trees_of(data: Mapping[str, str]) -> tuple[dict[str, TopologySnapshot], dict[str, str]]:
    """A report's ConfigMap ``data`` (flavor -> summary as JSON): each flavor's domain tree,
    and why a flavor's could not be read."""
    trees: dict[str, TopologySnapshot] = {}
    problems: dict[str, str] = {}
    for flavor, text in data.items():
        try:
            trees[flavor] = snapshot_of(json.loads(text))
        except (BadSummary, ValueError) as err:
            problems[flavor] = str(err)
    return trees, problems
