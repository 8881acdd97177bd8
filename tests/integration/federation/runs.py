"""Where every job's pods ran, watched on each worker directly (never through the manager):
how many pods of each job succeeded, on which workers it ran, and whether it ever ran on two
workers at once. The double-run rule is the benchmark's (``e2e.bench.federation.doublerun``),
so a test and a benchmark cannot disagree about what a double run is."""

from __future__ import annotations

import asyncio
import functools
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Self

from e2e.bench.federation.doublerun import RunningPods
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.informer import Event, Informer
from manager.kube.tasks import stop_tasks


async def complete_jobs(api: KubeApi, namespace: str) -> set[str]:
    """Names of the Jobs in ``namespace`` whose Complete condition is True."""
    return {
        job["metadata"]["name"]
        for job in (await api.list(R.JOBS, namespace))["items"]
        if any(
            c["type"] == "Complete" and c["status"] == "True"
            for c in (job.get("status") or {}).get("conditions") or []
        )
    }


class Watching:
    """Informers run for the length of an ``async with`` block, synced on entry: what a
    test watches on its clusters from before it acts."""

    def __init__(self) -> None:
        self._informers: list[Informer] = []
        self._tasks: list[asyncio.Task[None]] = []

    def watch(self, informer: Informer, handler: Callable[[Event], None]) -> None:
        informer.subscribe(handler)
        self._informers.append(informer)

    async def __aenter__(self) -> Self:
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


class RunWatch(Watching):
    def __init__(
        self, workers: Mapping[str, KubeApi], namespace: str, *, label: str = "job-name"
    ) -> None:
        super().__init__()
        self.label = label
        """The pod label naming the job a pod belongs to (a JobSet's: its JobSet label)."""
        self.succeeded: dict[str, set[str]] = defaultdict(set)
        """Job -> uids of its pods that succeeded, on any worker."""
        self.succeeded_on: dict[str, dict[str, float]] = defaultdict(dict)
        """Job -> worker -> when a pod of it was first seen Succeeded there (monotonic)."""
        self.runs: dict[str, RunningPods] = {}
        self.nodes: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        """Job -> worker -> the nodes its pods were bound to there."""
        for worker, api in workers.items():
            pods = Informer(api, R.PODS, namespace=namespace)
            self.watch(pods, functools.partial(self._on_pod, worker))

    def _on_pod(self, worker: str, event: Event) -> None:
        job = (event.obj["metadata"].get("labels") or {}).get(self.label)
        if not job:
            return
        if job not in self.runs:
            self.runs[job] = RunningPods(job, self.label)
        self.runs[job].pod_event(worker, event.type, event.obj, time.monotonic())
        if node := (event.obj.get("spec") or {}).get("nodeName"):
            self.nodes[job][worker].add(str(node))
        if (event.obj.get("status") or {}).get("phase") == "Succeeded":
            self.succeeded[job].add(event.obj["metadata"]["uid"])
            self.succeeded_on[job].setdefault(worker, time.monotonic())

    def clusters_of(self, job: str) -> set[str]:
        """The workers where a pod of ``job`` was ever seen running."""
        run = self.runs.get(job)
        return set(run.first_running_at) if run else set()

    def double_runs(self) -> list[str]:
        return sorted(job for job, run in self.runs.items() if run.double_run)

    def not_exactly_once(self, jobs: list[str]) -> dict[str, int]:
        """Jobs whose pods did not succeed exactly once, with how often they did."""
        return {j: len(self.succeeded[j]) for j in jobs if len(self.succeeded[j]) != 1}
