"""The drill's eyes: it reads every worker DIRECTLY, with the kubeconfig from its Secret (never
through the manager, and never through the path the drill breaks), and the manager, every
``interval`` seconds, and keeps what it saw as samples for ``drillreport``.

Each worker has its own polling loop, so a worker that hangs (or is paused by a
``--break-command``) delays nobody else's samples; its silence shows up as a gap. A worker
sample says which probes have a Running pod there (terminating pods count: their container
may still run) and which have a Workload copy there. A manager sample says whether the manager
reports the broken cluster lost and on which cluster it has each probe admitted.

While it runs it also reports, once each, the notable moments (cluster lost, a probe stopped,
copied, running elsewhere, running twice) through ``on_event``, for the live progress lines.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from manager.api.view import at, labels_of
from manager.cli.clusterstatus import active_condition
from manager.cli.drills.intervals import ManagerSample, WorkerSample
from manager.cli.drills.probes import PROBE_LABEL, RUN_LABEL, ProbePlan
from manager.controllers import workloadstatus as ws
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.tasks import stop_tasks

Obj = dict[str, Any]

CONNECTING = "Connecting"
"""The message of a manager connection that has not failed yet (kfed's registry): a Secret
change restarts the connection, so Active=False with this message is not a loss yet."""


def cluster_lost(mk_cluster: Obj | None) -> bool:
    """The manager reports the cluster lost: Active is not True after a failed connection."""
    condition = active_condition(mk_cluster or {})
    if condition is None or condition.get("status") == "True":
        return False
    return not str(condition.get("message") or "").startswith(CONNECTING)


def placed_on(workload: Obj | None) -> str:
    """The cluster the manager has this workload admitted on ("" when it is not)."""
    if workload is None or not ws.is_admitted(workload) or ws.is_evicted(workload):
        return ""
    return str(ws.status_of(workload).get("clusterName") or "")


def running_by_probe(pods: list[Obj]) -> frozenset[str]:
    return frozenset(
        str(labels_of(p).get(PROBE_LABEL, ""))
        for p in pods
        if at(p, "status").get("phase") == "Running"
    )


@dataclass
class Watcher:
    manager: KubeApi
    workers: Mapping[str, KubeApi]
    plan: ProbePlan
    workloads: Mapping[str, str]
    """Probe -> its Workload's name (the same on the manager and on every worker)."""
    interval: float = 0.25
    on_event: Callable[[float, str], None] = lambda at, text: None
    zero: float = field(default_factory=time.monotonic)
    """Monotonic time of the break: sample times are relative to it."""
    _workers: list[tuple[float, str, frozenset[str], frozenset[str]]] = field(default_factory=list)
    _manager: list[tuple[float, bool, dict[str, str]]] = field(default_factory=list)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)
    _runs: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)
    """Cluster -> probe -> (first, last) sample time of its current run of Running samples
    there: the live counterpart of ``drillreport.running_intervals``."""
    moved: dict[str, str] = field(default_factory=dict)
    """Probe -> the other cluster it was first seen running on after the break."""
    resumed: dict[str, float] = field(default_factory=dict)
    """Probe -> when it was first seen running on the broken cluster after the restore,
    having run nowhere else."""
    restored_at: float | None = None
    lost_at: float | None = None

    @property
    def read_timeout(self) -> float:
        return max(2.0, 4 * self.interval)

    def now(self) -> float:
        return time.monotonic() - self.zero

    def mark_break(self) -> None:
        self.zero = time.monotonic()

    def mark_restored(self, at: float) -> None:
        self.restored_at = at

    def settled(self) -> int:
        """How many probes run again: elsewhere, or on the broken cluster once restored."""
        return len(set(self.moved) | set(self.resumed))

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._poll_worker(name, api), name=f"drill-watch/{name}")
            for name, api in self.workers.items()
        ]
        self._tasks.append(asyncio.create_task(self._poll_manager(), name="drill-watch/manager"))

    async def stop(self) -> None:
        await stop_tasks(self._tasks)
        self._tasks = []

    def has_samples_of_every_worker(self) -> bool:
        return {c for _, c, _, _ in self._workers} >= set(self.workers)

    # -- samples ---------------------------------------------------------------------------

    def worker_samples(self) -> list[WorkerSample]:
        return [
            WorkerSample(at - self.zero, cluster, running, copies)
            for at, cluster, running, copies in self._workers
        ]

    def manager_samples(self) -> list[ManagerSample]:
        return [ManagerSample(at - self.zero, lost, placed) for at, lost, placed in self._manager]

    # -- polling -----------------------------------------------------------------------------

    async def _pace(self, started: float) -> None:
        await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - started)))

    async def _poll_worker(self, cluster: str, api: KubeApi) -> None:
        ns, names = self.plan.namespace, {v: k for k, v in self.workloads.items()}
        while True:
            sent = time.monotonic()
            try:
                async with asyncio.timeout(self.read_timeout):
                    pods, workloads = await asyncio.gather(
                        api.list(R.PODS, ns, label_selector=f"{RUN_LABEL}={self.plan.run_id}"),
                        api.list(R.WORKLOADS, ns),
                    )
            except (errors.KubeError, TimeoutError):
                await self._pace(sent)
                continue
            at = (sent + time.monotonic()) / 2
            running = running_by_probe(pods["items"])
            copies = frozenset(
                names[w["metadata"]["name"]]
                for w in workloads["items"]
                if w["metadata"]["name"] in names
            )
            self._workers.append((at, cluster, running, copies))
            self._track_runs(at - self.zero, cluster, running)
            self._notice(at - self.zero, cluster, running, copies)
            await self._pace(sent)

    async def _poll_manager(self) -> None:
        target, ns = self.plan.target, self.plan.namespace
        while True:
            sent = time.monotonic()
            try:
                async with asyncio.timeout(self.read_timeout):
                    mk_cluster = await self.manager.get(R.MULTIKUEUE_CLUSTERS, target)
                    placed = {
                        probe: placed_on(await self._workload(name, ns))
                        for probe, name in self.workloads.items()
                    }
            except (errors.KubeError, TimeoutError):
                await self._pace(sent)
                continue
            at = (sent + time.monotonic()) / 2
            lost = cluster_lost(mk_cluster)
            self._manager.append((at, lost, placed))
            since = at - self.zero
            if since >= 0 and lost and self.lost_at is None:
                self.lost_at = since
                condition = active_condition(mk_cluster) or {}
                self.on_event(
                    since,
                    f"the manager reports {target} lost: {condition.get('reason', '')}: "
                    f"{str(condition.get('message', '')).split(';')[0]}",
                )
            if since >= 0:
                for probe, cluster in placed.items():
                    if cluster != target:
                        self._once(
                            since, f"evicted:{probe}", f"{probe} taken off {target} by the manager"
                        )
            await self._pace(sent)

    async def _workload(self, name: str, namespace: str) -> Obj | None:
        try:
            return await self.manager.get(R.WORKLOADS, name, namespace)
        except errors.NotFound:
            return None

    # -- live events ---------------------------------------------------------------------------

    def _once(self, at: float, key: str, text: str) -> None:
        if key not in self._seen:
            self._seen.add(key)
            self.on_event(at, text)

    def _track_runs(self, at: float, cluster: str, running: frozenset[str]) -> None:
        previous = self._runs.get(cluster, {})
        self._runs[cluster] = {
            probe: (previous[probe][0] if probe in previous else at, at) for probe in running
        }

    def _running_at_once(self, probe: str) -> list[str]:
        """The clusters whose current runs of ``probe`` overlap another's, as the report will
        judge it. Comparing each cluster's latest sample instead would raise false alarms: a
        fresh sample of one worker against an older one of another, taken before the probe
        stopped there."""
        spans = {c: runs[probe] for c, runs in self._runs.items() if probe in runs}
        return sorted(
            a
            for a, (a_first, a_last) in spans.items()
            for b, (b_first, b_last) in spans.items()
            if a != b and max(a_first, b_first) <= min(a_last, b_last)
        )

    def _notice(
        self, at: float, cluster: str, running: frozenset[str], copies: frozenset[str]
    ) -> None:
        if at < 0:
            return
        target = self.plan.target
        for probe in self.workloads:
            if cluster == target and probe not in running:
                self._once(at, f"stopped:{probe}", f"{probe} no longer runs on {target}")
            if cluster != target and probe in copies:
                self._once(at, f"copy:{probe}", f"{probe} re-dispatched: copy created on {cluster}")
            if cluster != target and probe in running:
                self.moved.setdefault(probe, cluster)
                self._once(at, f"running:{probe}", f"{probe} runs on {cluster}")
            restored = self.restored_at is not None and at >= self.restored_at
            if restored and cluster == target and probe in running and probe not in self.moved:
                self.resumed.setdefault(probe, at)
                self._once(at, f"resumed:{probe}", f"{probe} runs on {target} again (resumed)")
            on = sorted(set(self._running_at_once(probe)))
            if len(on) > 1:
                self._once(
                    at,
                    f"double:{probe}:{','.join(on)}",
                    f"DOUBLE RUN: {probe} runs on {', '.join(on)}",
                )
