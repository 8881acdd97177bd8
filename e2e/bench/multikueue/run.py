"""One dispatch mode of the MultiKueue benchmark, on a bed of its own: lite control planes
(etcd + kube-apiserver: upstream's boundary excludes Job and Pod execution, so nothing needs
to run), kfed's CRDs, the workers registered, a shim per worker (each worker's Kueue), the
manager in the mode. Then: the counters read, the Jobs created by ``creators`` concurrent
generators (one, as upstream's baseline), the manager's Workloads watched until every one
is admitted, the counters read again.

Every create is stamped immediately before its request and every Workload event on
arrival (the watch handler does nothing else), as upstream's runner does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.bench import procstats
from e2e.bench.federation import apirequests, processes
from e2e.bench.federation.bed import Bed
from e2e.bench.federation.topology import CHECK
from e2e.bench.multikueue import profile as profiling
from e2e.bench.multikueue import shape
from e2e.bench.multikueue.recorder import AdmissionRecorder, Durations
from e2e.local.federation import MANAGER
from manager.controllers import workloadstatus as ws
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.informer import Informer

MODES = ("capacity-aware", "all-at-once", "incremental")


def say(message: str) -> None:
    print(message, flush=True)


@dataclass
class ProcessFigures:
    cpu_seconds: float
    """Over the measured window."""
    peak_rss_mib: float
    """Since the process started."""


@dataclass
class ModeResult:
    mode: str
    workloads: int
    creators: int
    admitted: int = 0
    throughput: float = 0.0
    generation_seconds: float = 0.0
    total_seconds: float = 0.0
    """First create to last admission."""
    drain_seconds: float = 0.0
    """Last create to last admission."""
    quota_reservation: Durations = field(default_factory=lambda: Durations.of([]))
    admission: Durations = field(default_factory=lambda: Durations.of([]))
    dispatch: Durations = field(default_factory=lambda: Durations.of([]))
    watch_gaps: int = 0
    distribution: dict[str, int] = field(default_factory=dict)
    requests: dict[str, dict[str, int]] = field(default_factory=dict)
    """cluster -> ``VERB resource`` -> requests in the measured window."""
    failed_requests: dict[str, dict[str, int]] = field(default_factory=dict)
    processes: dict[str, ProcessFigures] = field(default_factory=dict)
    load_average_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_average_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    create_errors: list[str] = field(default_factory=list)
    error: str | None = None
    profile_self: list[tuple[str, float]] = field(default_factory=list)
    """The manager's functions by share of samples at the top of the stack (--profile)."""
    profile_inclusive: list[tuple[str, float]] = field(default_factory=list)
    profile_text: str = ""
    stories: dict[str, list[str]] = field(default_factory=dict)
    """The first jobs' Workloads on the manager, one line per write seen."""
    stuck: list[str] = field(default_factory=list)
    """When not all were admitted: the state of each one that was not."""

    @property
    def complete(self) -> bool:
        return self.error is None and self.admitted == self.workloads

    def per_workload(self, cluster: str, *, writes_only: bool = False) -> float:
        counts = self.requests.get(cluster, {})
        picked = [
            n for key, n in counts.items() if not writes_only or key.split(" ", 1)[0] in WRITE_VERBS
        ]
        return sum(picked) / self.workloads if self.workloads else 0.0

    def event_writes(self, cluster: str) -> int:
        """Kubernetes Events written on ``cluster`` (created, or a repeat's count patched)."""
        counts = self.requests.get(cluster, {})
        return sum(
            n
            for key, n in counts.items()
            if key.split(" ", 1)[0] in WRITE_VERBS and key.split(" ", 1)[1] == "events"
        )

    def writes(self, cluster: str) -> int:
        counts = self.requests.get(cluster, {})
        return sum(n for key, n in counts.items() if key.split(" ", 1)[0] in WRITE_VERBS)


WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION"})


def _processes(bed: Bed, manager: Any) -> dict[str, int]:
    """Name -> pid of every process whose cost the report shows."""
    pids: dict[str, int] = {}
    if manager is not None and manager.pid is not None:
        pids["kfed manager"] = manager.pid
    for worker, shim in sorted(bed.shims.items()):
        if shim.pid is not None:
            pids[f"kfed shim {worker}"] = shim.pid
    for cluster in bed.fed:
        for role, proc in sorted(cluster.processes.items()):
            if proc.pid is not None and role in ("kube-apiserver", "etcd"):
                pids[f"{role} {cluster.name}"] = proc.pid
    pids["benchmark (this process)"] = os.getpid()
    return pids


def _cpu(pids: dict[str, int]) -> dict[str, float]:
    samples = {name: procstats.sample(pid) for name, pid in pids.items()}
    return {name: s.cpu_seconds for name, s in samples.items() if s is not None}


async def _generate(
    bed: Bed, namespace: str, mode: str, count: int, creators: int, rec: AdmissionRecorder
) -> float:
    """Create the Jobs, ``creators`` at a time, each generator one after another."""
    started = time.monotonic()

    async def generator(first: int) -> None:
        for index in range(first, count, creators):
            body = shape.job(namespace, index, mode)
            rec.creating(body["metadata"]["name"], time.monotonic())
            try:
                await bed.manager.create(R.JOBS, body, namespace)
            except errors.KubeError as err:
                rec.create_errors.append(f"{body['metadata']['name']}: {err}")

    await asyncio.gather(*(generator(i) for i in range(creators)))
    return time.monotonic() - started


async def _wait_admitted(
    rec: AdmissionRecorder,
    count: int,
    *,
    deadline: float,
    manager_alive: Callable[[], bool],
    progress: float = 10.0,
) -> None:
    """Until every created workload is admitted (the counter, in memory), the deadline, or
    the manager's exit (nothing restarts it here: waiting on would only wait for the
    deadline); progress at every tenth."""
    milestone = 0
    while time.monotonic() < deadline:
        admitted = rec.admitted()
        expected = count - len(rec.create_errors)
        if admitted >= expected:
            return
        if not manager_alive():
            raise TimeoutError(f"{admitted}/{count} admitted when the manager exited")
        if admitted * progress // max(count, 1) > milestone:
            milestone = int(admitted * progress // max(count, 1))
            say(f"   admitted {admitted}/{count}")
        await asyncio.sleep(0.05)  # polling an in-memory counter
    raise TimeoutError(f"{rec.admitted()}/{count} admitted by the deadline")


async def run_mode(
    bed: Bed,
    mode: str,
    *,
    count: int,
    creators: int,
    timeout: float,
    extra: Sequence[str] = (),
    profile_dir: Path | None = None,
) -> ModeResult:
    """The bed is up; configures it, runs ``mode`` and returns what was measured (also
    when it failed part way: ``error`` says how)."""
    result = ModeResult(mode=mode, workloads=count, creators=creators)
    namespace = shape.namespace_of(mode)
    await bed.connect()
    manager = None
    try:
        await bed.configure(
            manager_queues=shape.queues(namespace, count, check=True),
            worker_queues=lambda _worker: shape.queues(namespace, count, check=False),
        )
        args = processes.manager_args(bed.fed.kubeconfig(MANAGER), mode, extra)
        manager = processes.start_manager(f"mk-{mode}", args, bed.logs)
        port = await processes.listening_port(manager)
        await processes.wait_manager_ready(manager, port, bed.workers, fencing=False)
        await bed.wait_unfenced()
        rec = AdmissionRecorder(CHECK)
        watch = Informer(bed.manager, R.WORKLOADS, namespace=namespace)
        watch.subscribe(lambda e: rec.manager_event(e.obj, time.monotonic()))
        task = asyncio.create_task(watch.run(), name="mk-watch")
        try:
            await asyncio.wait_for(watch.synced.wait(), 60)
            pids = _processes(bed, manager)
            before = await bed.api_requests()
            cpu_before = _cpu(pids)
            result.load_average_before = os.getloadavg()
            sampler = None
            if profile_dir is not None and manager.pid is not None:
                sampler = profiling.Sampler(manager.pid, profile_dir / f"manager-{mode}.txt")
            say(f"-- {mode}: creating {count} Jobs with {creators} generator(s)")
            started = time.monotonic()
            result.generation_seconds = await _generate(bed, namespace, mode, count, creators, rec)
            say(f"   created in {result.generation_seconds:.1f}s")
            try:
                await _wait_admitted(
                    rec, count, deadline=started + timeout, manager_alive=lambda: manager.alive
                )
            except TimeoutError as err:
                result.error = str(err)
                result.stuck = [_state_of(o) for o in watch.items() if not ws.is_admitted(o)]
            cpu_after = _cpu(pids)
            result.load_average_after = os.getloadavg()
            if sampler is not None:
                sampler.stop()
                _profiled(result, sampler.output)
            after = await bed.api_requests()
            result.watch_gaps = max(0, watch.stats.lists - 1)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if not manager.alive:
            result.error = f"the manager exited during the run:\n{manager.log_tail(30)}"
        _fill(result, rec, before, after, cpu_before, cpu_after, pids)
    finally:
        if manager is not None:
            await bed.stop_manager(manager)
        await bed.close()
    return result


def _state_of(obj: dict[str, Any]) -> str:
    """One line: a stuck workload's name, true conditions, checks and cluster."""
    status = ws.status_of(obj)
    true = [c["type"] for c in status.get("conditions") or [] if c.get("status") == "True"]
    checks = [f"{c.get('name')}={c.get('state')}" for c in status.get("admissionChecks") or []]
    return (
        f"{obj['metadata']['name']}: conditions {','.join(true) or '-'}; checks "
        f"{','.join(checks) or '-'}; cluster {status.get('clusterName') or '-'}"
    )


def _profiled(result: ModeResult, path: Path) -> None:
    if not path.exists():
        result.profile_text = "  (py-spy wrote no profile)"
        return
    found = profiling.Profile.parse(path.read_text())
    result.profile_self = [(n, round(v, 4)) for n, v in found.top(25, inclusive=False)]
    result.profile_inclusive = [(n, round(v, 4)) for n, v in found.top(60)]
    result.profile_text = found.render()


def _fill(
    result: ModeResult,
    rec: AdmissionRecorder,
    before: dict[str, apirequests.Snapshot],
    after: dict[str, apirequests.Snapshot],
    cpu_before: dict[str, float],
    cpu_after: dict[str, float],
    pids: dict[str, int],
) -> None:
    result.admitted = rec.admitted()
    result.throughput = rec.throughput()
    span = rec.span()
    if span is not None:
        first_create, last_create, last_admission = span
        result.total_seconds = last_admission - first_create
        result.drain_seconds = max(0.0, last_admission - last_create)
    result.quota_reservation = rec.quota_reservation()
    result.admission = rec.admission()
    result.dispatch = rec.dispatch()
    result.distribution = rec.distribution()
    result.create_errors = rec.create_errors[:10]
    result.stories = rec.stories
    for cluster, snapshot in after.items():
        measured = apirequests.window(before[cluster], snapshot)
        result.requests[cluster] = dict(sorted(measured.requests.items()))
        result.failed_requests[cluster] = dict(sorted(measured.failed.items()))
    for name, pid in pids.items():
        sample = procstats.sample(pid)
        if sample is None or name not in cpu_after:
            continue
        result.processes[name] = ProcessFigures(
            cpu_seconds=cpu_after[name] - cpu_before.get(name, 0.0),
            peak_rss_mib=sample.peak_rss_mib,
        )
