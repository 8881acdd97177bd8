"""The federation as the manager sees it, read for one job by the CLI: the LocalQueue and
the ClusterQueue it points to, and the queue's MultiKueue check, config and clusters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from manager.api import federated
from manager.api.view import at
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]


@dataclass(frozen=True)
class QueueChain:
    """A LocalQueue and the ClusterQueue it points to, as far as they exist on the manager.
    Each caller words the missing link in its own terms (and exit code)."""

    local_queue: Obj | None
    cluster_queue_name: str
    cluster_queue: Obj | None


async def read_queue_chain(api: KubeApi, namespace: str, queue: str) -> QueueChain:
    try:
        lq = await api.get(R.LOCAL_QUEUES, queue, namespace)
    except errors.NotFound:
        return QueueChain(None, "", None)
    cq_name = str(at(lq, "spec").get("clusterQueue") or "")
    try:
        cq: Obj | None = await api.get(R.CLUSTER_QUEUES, cq_name)
    except errors.NotFound:
        cq = None
    return QueueChain(lq, cq_name, cq)


async def multikueue_config(api: KubeApi, cq: Obj) -> tuple[str, str, list[str]] | None:
    """(AdmissionCheck, MultiKueueConfig, its clusters) of a ClusterQueue; None when the
    queue has no MultiKueue check (its jobs run on the manager). The same answer as the
    manager's (``api/federated.py``), from one LIST of each kind."""
    checks = by_key((await api.list(R.ADMISSION_CHECKS))["items"])
    configs = by_key((await api.list(R.MULTIKUEUE_CONFIGS))["items"])
    found = federated.federation_of(cq, checks.get, configs.get)
    if found is None:
        return None
    return found.check, found.config, list(found.clusters)


def by_key(items: list[Obj]) -> dict[str, Obj]:
    result = {}
    for obj in items:
        meta = obj["metadata"]
        key = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
        result[str(key)] = obj
    return result
