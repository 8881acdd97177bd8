"""What happened on a worker, watched from the start: each Workload's creations, deletions and
last state, and the nodes each job's pods ran on. The copies of a finished workload are
removed soon after it finishes (upstream's manager and kfed's both do), so a test reads what
the worker did from here, not from the worker afterwards."""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from types import TracebackType
from typing import Any

from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.informer import Event, Informer
from manager.kube.tasks import stop_tasks


class WorkerRecord:
    def __init__(self, api: KubeApi, namespace: str) -> None:
        self.api = api
        self.created: Counter[str] = Counter()
        self.deleted: Counter[str] = Counter()
        self.last: dict[str, dict[str, Any]] = {}
        """Workload name -> its last state seen before it was deleted (or now)."""
        self.nodes: dict[str, set[str]] = defaultdict(set)
        """Job name -> the nodes its pods were bound to."""
        self._informers = [
            Informer(api, R.WORKLOADS, namespace=namespace),
            Informer(api, R.PODS, namespace=namespace),
        ]
        self._informers[0].subscribe(self._on_workload)
        self._informers[1].subscribe(self._on_pod)
        self._tasks: list[asyncio.Task[None]] = []

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

    async def __aenter__(self) -> WorkerRecord:
        self._tasks = [asyncio.create_task(i.run()) for i in self._informers]
        await asyncio.gather(*(i.synced.wait() for i in self._informers))
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await stop_tasks(self._tasks)
