"""Partition drills: a long probe Job is placed on a worker, the manager's link to that worker
is cut (the worker's cuttable proxy refuses every connection; the worker itself, its shim
and the benchmark's own watches carry on), and the drill times how long until the probe's
pod runs on another worker. The worker's shim must have stopped it first (self-fencing when
the manager's lease there expires): the pods of every worker are watched directly
throughout, and two workers running the probe at once is a double run. Then the link heals,
the stale copy is removed, the probe is deleted, and the next drill starts on a clean slate.

The manager runs with fast-failover flags (``FAST_FAILOVER``, as the federation tests do),
or with its defaults (``--default-failover``). The shim needs no flag: it fences on the
lease duration the manager writes into its Lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence

from e2e.bench.federation import processes
from e2e.bench.federation.bed import Bed
from e2e.bench.federation.dispatchrun import say
from e2e.bench.federation.doublerun import RunningPods
from e2e.bench.federation.jobs import (
    BENCH_LABEL,
    NAMESPACE,
    JobShape,
    probe_flavor,
    probe_job,
    probe_name,
)
from e2e.bench.federation.report import DrillResult, DrillsResult
from e2e.bench.federation.topology import CHECK, ORIGIN_SELECTOR
from e2e.local.federation import MANAGER
from e2e.local.process import ManagedProcess
from e2e.waiting import WaitTimeout, wait_for
from manager.controllers import workloadstatus as ws
from manager.federation.decisions import checkstatus
from manager.federation.settings import FederationSettings
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.informer import Event, Informer

FAST_FAILOVER = {
    "worker-request-timeout": 1.0,
    "worker-lease-duration": 3.0,
    "worker-lease-renew-period": 0.5,
    "fence-grace": 1.5,
}
"""The manager's failover flags for the drills (the federation tests' FAST settings)."""
STEP_TIMEOUT = 120.0


def failover_settings(fast: bool) -> dict[str, float]:
    """The flags' values and the fenced-failover window they give: after the start of the
    last lease renewal that may have reached the worker, request timeout + lease duration +
    grace must pass before the manager runs the worker's jobs elsewhere."""
    if fast:
        values = dict(FAST_FAILOVER)
    else:
        d = FederationSettings()
        values = {
            "worker-request-timeout": d.request_timeout,
            "worker-lease-duration": d.lease_duration,
            "worker-lease-renew-period": d.lease_renew_period,
            "fence-grace": d.fence_grace,
        }
    values["window_seconds"] = (
        values["worker-request-timeout"] + values["worker-lease-duration"] + values["fence-grace"]
    )
    return values


def failover_flags(settings: dict[str, float], *, fast: bool) -> list[str]:
    if not fast:
        return []
    return [arg for name in FAST_FAILOVER for arg in (f"--{name}", f"{settings[name]:g}")]


class DrillWatches:
    """Manager Workloads; and on every worker directly, the probe's pods and the copies."""

    def __init__(self, bed: Bed) -> None:
        self.manager = Informer(bed.manager, R.WORKLOADS, namespace=NAMESPACE)
        self.pods: dict[str, Informer] = {}
        self.copies: dict[str, Informer] = {}
        self.current: RunningPods | None = None
        for worker, api in bed.worker_apis.items():
            pods = Informer(api, R.PODS, namespace=NAMESPACE, label_selector=f"{BENCH_LABEL}=probe")
            pods.subscribe(self._pod_handler(worker))
            self.pods[worker] = pods
            self.copies[worker] = Informer(
                api, R.WORKLOADS, namespace=NAMESPACE, label_selector=ORIGIN_SELECTOR
            )
        self._tasks: list[asyncio.Task[None]] = []

    def _pod_handler(self, worker: str) -> Callable[[Event], None]:
        def handle(event: Event) -> None:
            if self.current is not None:
                self.current.pod_event(worker, event.type, event.obj, time.monotonic())

        return handle

    @property
    def informers(self) -> list[Informer]:
        return [self.manager, *self.pods.values(), *self.copies.values()]

    async def start(self) -> None:
        self._tasks = [asyncio.create_task(i.run(), name=repr(i)) for i in self.informers]
        await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in self.informers)), 60)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def placed_on(self, job: str) -> str | None:
        """The worker the manager placed the Job's workload on (check Ready), if any."""
        for obj in self.manager.items():
            if (
                ws.owner_job(obj) == f"{NAMESPACE}/{job}"
                and checkstatus.check_state(obj, CHECK)[0] == "Ready"
            ):
                cluster = ws.status_of(obj).get("clusterName")
                return str(cluster) if cluster else None
        return None

    def copies_of(self, job: str, worker: str | None = None) -> int:
        informers = [self.copies[worker]] if worker else list(self.copies.values())
        return sum(
            1 for i in informers for obj in i.items() if ws.owner_job(obj) == f"{NAMESPACE}/{job}"
        )

    def gone_everywhere(self, job: str) -> bool:
        on_manager = any(ws.owner_job(o) == f"{NAMESPACE}/{job}" for o in self.manager.items())
        pods = sum(
            1
            for i in self.pods.values()
            for p in i.items()
            if ((p.get("metadata") or {}).get("labels") or {}).get("job-name") == job
        )
        return not on_manager and pods == 0 and self.copies_of(job) == 0


async def one_drill(
    bed: Bed,
    watches: DrillWatches,
    manager: ManagedProcess,
    port: int,
    index: int,
    shape: JobShape,
    *,
    failover_timeout: float,
) -> DrillResult:
    probe, flavor = probe_name(index), probe_flavor(index)
    tracker = RunningPods(probe)
    watches.current = tracker
    drill = DrillResult(index, probe, flavor)
    try:
        await bed.manager.create(R.JOBS, probe_job(index, shape), NAMESPACE)
        first = await wait_for(
            lambda: watches.placed_on(probe), timeout=STEP_TIMEOUT, what=f"{probe} placed"
        )
        assert first is not None  # wait_for returns the first truthy value
        drill.from_cluster = first
        await wait_for(
            lambda: tracker.running.get(first), timeout=STEP_TIMEOUT, what=f"{probe} on {first}"
        )
        cut_at = time.monotonic()
        bed.proxies[first].cut()
        try:
            moved = await wait_for(
                lambda: tracker.running_elsewhere_since(first, cut_at),
                timeout=failover_timeout,
                what=f"{probe} running on another worker than {first}",
                interval=0.02,
            )
        finally:
            bed.proxies[first].heal()
        assert moved is not None
        drill.failover_seconds = moved - cut_at
        drill.to_cluster = min(
            (at, w) for w, at in tracker.first_running_at.items() if w != first and at >= cut_at
        )[1]
        stopped = tracker.stopped_at.get(first)
        if stopped is not None and stopped >= cut_at:
            drill.fenced_seconds = stopped - cut_at
        await wait_for(
            lambda: watches.copies_of(probe, first) == 0,
            timeout=STEP_TIMEOUT,
            what=f"the stale copy of {probe} removed from {first} after healing",
        )
    except (WaitTimeout, errors.KubeError) as err:
        drill.error = str(err)
        for proxy in bed.proxies.values():
            proxy.heal()
    finally:
        with contextlib.suppress(errors.NotFound):
            await bed.manager.delete(R.JOBS, probe, NAMESPACE, propagation="Background")
        await wait_for(
            lambda: watches.gone_everywhere(probe),
            timeout=STEP_TIMEOUT,
            what=f"{probe} gone from every cluster",
        )
        await processes.wait_manager_ready(manager, port, bed.workers, fencing=True)
        await bed.wait_unfenced()
        watches.current = None
        drill.max_clusters, drill.samples = tracker.max_clusters, tracker.samples
    return drill


def plan(bed: Bed, *, fast: bool, extra: Sequence[str] = ()) -> tuple[list[str], DrillsResult]:
    """The drills' manager command line, and their (empty) result with the settings."""
    settings = failover_settings(fast)
    args = processes.manager_args(
        bed.fed.kubeconfig(MANAGER),
        "capacity-aware",
        [*failover_flags(settings, fast=fast), *extra],
    )
    return args, DrillsResult(manager_args=args[2:], failover_settings=settings)


async def run_drills(
    bed: Bed, args: list[str], result: DrillsResult, count: int, shape: JobShape
) -> None:
    """Appends each drill to ``result`` as it ends (a bed that cannot be cleaned up between
    drills ends the run with an error; the drills so far are reported)."""
    settings = result.failover_settings
    await bed.register(via_proxies=True)
    manager = processes.start_manager("drills", args, bed.logs)
    watches = DrillWatches(bed)
    try:
        port = await processes.listening_port(manager)
        await processes.wait_manager_ready(manager, port, bed.workers, fencing=True)
        await bed.wait_unfenced()
        await watches.start()
        say(
            f"-- drills: manager ready with {' '.join(args[2:])}; "
            f"fenced-failover window {settings['window_seconds']:.1f}s"
        )
        for index in range(count):
            drill = await one_drill(
                bed,
                watches,
                manager,
                port,
                index,
                shape,
                failover_timeout=settings["window_seconds"] + 90,
            )
            result.drills.append(drill)
            outcome = (
                f"{drill.from_cluster} -> {drill.to_cluster} in {drill.failover_seconds:.2f}s"
                if drill.failover_seconds is not None
                else f"FAILED: {drill.error}"
            )
            say(
                f"   drill {index + 1}/{count} ({drill.flavor}): {outcome}; "
                f"most workers running it at once: {drill.max_clusters}"
            )
    finally:
        await watches.stop()
        await bed.stop_manager(manager)
