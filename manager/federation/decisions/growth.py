"""Which of a worker's flavors grow on demand: their nodes come from an autoscaler when
pending pods ask for them, so the worker can take a job its nodes cannot hold now.

kfed places by quota (``capacity.py``), which already lets such a worker take a job before
its nodes exist; what it must not do is prefer it. A flavor grows when one of the worker's
Karpenter NodePools (``karpenter.sh/v1``) makes nodes that carry every one of the flavor's
``nodeLabels``: the labels of the NodePool's node template, or a requirement of its nodes
with exactly one value (``In [v]``), which Karpenter also puts on the node. A flavor without
nodeLabels matches no pool: nothing says its pods would land on the pool's nodes.

Among the workers where a workload fits, one that would have to grow for it comes after
every one that would not (``capacity.choose``): on-premises GPUs first, the cloud worker only
when they cannot take it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from manager.api.view import MalformedObject, at, items

Obj = dict[str, Any]


def node_labels(pool: Obj) -> dict[str, str]:
    """The labels every node of the NodePool carries: its template's, and each requirement of
    one value."""
    labels = {str(k): str(v) for k, v in at(pool, "spec", "template", "metadata", "labels").items()}
    for req in items(pool, "spec", "template", "spec", "requirements"):
        if not isinstance(req, dict):
            continue
        values = req.get("values") or []
        if req.get("operator") == "In" and len(values) == 1 and req.get("key"):
            labels.setdefault(str(req["key"]), str(values[0]))
    return labels


def grown_flavors(flavors: Mapping[str, Obj], pools: list[Obj]) -> dict[str, str]:
    """Worker flavor -> the NodePool that grows it (the first by name), for the flavors
    one of ``pools`` makes nodes for."""
    pool_labels = []
    for pool in pools:
        try:
            pool_labels.append((str(at(pool, "metadata").get("name", "")), node_labels(pool)))
        except MalformedObject:
            continue  # its schema refuses such a pool; one that slipped through grows nothing
    pool_labels.sort()
    grown: dict[str, str] = {}
    for name, flavor in flavors.items():
        try:
            wanted = {str(k): str(v) for k, v in at(flavor, "spec", "nodeLabels").items()}
        except MalformedObject:
            continue
        if not wanted:
            continue
        for pool_name, labels in pool_labels:
            if all(labels.get(k) == v for k, v in wanted.items()):
                grown[name] = pool_name
                break
    return grown
