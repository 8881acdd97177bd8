"""What happened on a worker, watched from the start: each Workload's creations, deletions and
last state, and the nodes each job's pods ran on. The copies of a finished workload are
removed soon after it finishes (upstream's manager and kfed's both do), so a test reads what
the worker did from here, not from the worker afterwards."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.informer import Event, Informer
from tests.integration.federation.runs import Watching


class WorkerRecord(Watching):
    def __init__(self, api: KubeApi, namespace: str) -> None:
        super().__init__()
        self.api = api
        self.created: Counter[str] = Counter()
        self.deleted: Counter[str] = Counter()
        self.last: dict[str, dict[str, Any]] = {}
        """Workload name -> its last state seen before it was deleted (or now)."""
        self.nodes: dict[str, set[str]] = defaultdict(set)
        """Job name -> the nodes its pods were bound to."""
        self.watch(Informer(api, R.WORKLOADS, namespace=namespace), self._on_workload)
        self.watch(Informer(api, R.PODS, namespace=namespace), self._on_pod)

    def _on_workload(self, event: Event) -> None:
        name = event.obj["metadata"]["name"]
        if event.type == "ADDED":
            self.created[name] += 1
        if event.type == "DELETED":
            self.deleted[name] += 1
        else:
            self.last[name] = event.obj

    def _on_pod(self, event: Event) -> None:
        job = (event.obj["metadata"].get("labels") or {}).get("job-name")
        node = (event.obj.get("spec") or {}).get("nodeName")
        if job and node:
            self.nodes[job].add(node)

    async def gpu_models_of(self, job: str) -> set[str]:
        """The ``gpu.model`` labels of the nodes ``job``'s pods ran on."""
        nodes = [await self.api.get(R.NODES, name) for name in sorted(self.nodes[job])]
        return {n["metadata"].get("labels", {}).get("gpu.model", "") for n in nodes}
