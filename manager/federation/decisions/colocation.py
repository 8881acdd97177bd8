"""Which of a manager ClusterQueue's flavors one worker offers together (pure).

The manager assigns flavors before it places a workload, and places it whole on one worker.
A distributed job whose launcher asks for cpu only and selects no nodes, beside trainers that
ask for H100 GPUs, would otherwise get the ClusterQueue's first flavor for the launcher (say
rtx-a1000) and h100 for the trainers: no worker that has only one of them could ever hold it.
Upstream MultiKueue lets each worker assign its own flavors; kfed charges the manager's quota
in the flavors of the worker it will use, so the manager's assignment must be one that a
single worker can hold. These sets are given to the admission core
(``core.ClusterQueue.colocated_flavors``), whose flavor assigner then keeps every workload
within one of them.

One place is a worker's ClusterQueue as the job would reach it: the same LocalQueue (namespace
and name) as on the manager, leading there to a ClusterQueue whose flavors match the
manager's (same name, else same nodeLabels: ``capacity.match_flavor``). Only what the workers
are configured with counts here (not their free quota: that is the dispatcher's part).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from manager.api.view import at
from manager.core import FlavorName
from manager.federation.decisions.capacity import WorkerView, match_flavor, offered_flavors

Obj = dict[str, Any]
Places = tuple[frozenset[FlavorName], ...]


def places(
    cluster_queue: Obj,
    local_queue_keys: Iterable[str],
    workers: Sequence[WorkerView],
    manager_flavors: Mapping[str, Obj],
) -> Places:
    """The sets of the manager ClusterQueue's flavors each worker offers together, in the
    workers' order, each set once; ``()`` when no worker is known to offer any (no constraint:
    the dispatcher then says why nothing fits)."""
    own = offered_flavors(cluster_queue)
    found: dict[frozenset[FlavorName], None] = {}
    for worker in workers:
        for key in sorted(local_queue_keys):
            lq = worker.local_queues.get(key)
            if lq is None:
                continue
            cq = worker.cluster_queues.get(str(at(lq, "spec").get("clusterQueue", "")))
            if cq is None:
                continue
            offered = offered_flavors(cq)
            matched = frozenset(
                FlavorName(f)
                for f in own
                if match_flavor(f, manager_flavors, worker, offered) is not None
            )
            if matched:
                found[matched] = None
    return tuple(found)
