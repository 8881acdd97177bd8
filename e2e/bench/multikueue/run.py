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
from e2e.bench.scheduler.compare import settle
from e2e.local import upstream_kueue
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
    settle_seconds: float = 0.0
    """How long the run waited for the load average to fall before it started."""
    idle_seconds: float = 0.0
    """The idle window before the Jobs (0: none measured)."""
    idle_cpu: dict[str, float] = field(default_factory=dict)
    """Process -> CPU seconds over the idle window."""
    idle_requests: dict[str, dict[str, int]] = field(default_factory=dict)
    """cluster -> ``VERB resource`` -> requests over the idle window."""
    measured_seconds: float = 0.0
    """The measured window: the counters read before the first create to after the last
    admission."""
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
        counted = _count(self.requests.get(cluster, {}), writes_only=writes_only)
        return counted / self.workloads if self.workloads else 0.0

    @property
    def background_scale(self) -> float:
        """The measured window's length over the idle window's (0: no idle window)."""
        return self.measured_seconds / self.idle_seconds if self.idle_seconds > 0 else 0.0

    def net_per_workload(self, cluster: str, *, writes_only: bool = False) -> float:
        """``per_workload`` less what the API server served at rest over as long; reads
        and writes each net of their own background, so writes never exceed the whole."""
        if not self.workloads:
            return 0.0
        counts, idle = self.requests.get(cluster, {}), self.idle_requests.get(cluster, {})
        writes, idle_writes = _count(counts, writes_only=True), _count(idle, writes_only=True)
        net = max(0.0, writes - idle_writes * self.background_scale)
        if not writes_only:
            reads = _count(counts, writes_only=False) - writes
            idle_reads = _count(idle, writes_only=False) - idle_writes
            net += max(0.0, reads - idle_reads * self.background_scale)
        return net / self.workloads

    def net_cpu_seconds(self, process: str) -> float:
        """A process's CPU over the measured window less what it spent at rest over as long."""
        spent = self.processes[process].cpu_seconds
        return max(0.0, spent - self.idle_cpu.get(process, 0.0) * self.background_scale)

    def event_writes(self, cluster: str) -> int:
        """Kubernetes Events written on ``cluster`` (created, or a repeat's count patched)."""
        counts = self.requests.get(cluster, {})
        return sum(
            n
            for key, n in counts.items()
            if key.split(" ", 1)[0] in WRITE_VERBS and key.split(" ", 1)[1] == "events"
        )

    def writes(self, cluster: str) -> int:
        return _count(self.requests.get(cluster, {}), writes_only=True)


WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"})
"""``APPLY``: a server-side apply, as the API server counts it (upstream Kueue writes its
Workloads' status so)."""


def _count(counts: dict[str, int], *, writes_only: bool) -> int:
    """Requests of ``VERB resource`` counts, or the writes alone."""
    return sum(
        n for key, n in counts.items() if not writes_only or key.split(" ", 1)[0] in WRITE_VERBS
    )


UPSTREAM_KUEUE = "upstream kueue"
"""Upstream Kueue's process on a cluster, named ``upstream kueue <cluster>``."""


def processes_of(bed: Bed, manager: Any) -> dict[str, int]:
    """Name -> pid of every process whose cost the report shows."""
    pids: dict[str, int] = {}
    if manager is not None and manager.pid is not None:
        pids["kfed manager"] = manager.pid
    for worker, shim in sorted(bed.shims.items()):
        if shim.pid is not None:
            pids[f"kfed shim {worker}"] = shim.pid
    for cluster in bed.fed:
        for role, proc in sorted(cluster.processes.items()):
            if proc.pid is None:
                continue
            if role in ("kube-apiserver", "etcd"):
                pids[f"{role} {cluster.name}"] = proc.pid
            elif role == upstream_kueue.ROLE:
                pids[f"{UPSTREAM_KUEUE} {cluster.name}"] = proc.pid
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


@dataclass
class Controllers:
    """What the measured window needs of the controllers under test, whoever's they are."""

    pids: dict[str, int]
    """Name -> pid of every process whose cost the report shows."""
    alive: Callable[[], bool]
    """False once the federating manager has exited (nothing restarts it here)."""
    last_words: Callable[[], str]
    """The manager's log tail, for a run it ended by exiting."""
    profile_pid: int | None = None
    """The process py-spy samples with ``--profile`` (kfed's manager)."""


@dataclass(frozen=True)
class Quiet:
    """Each run starts once the 1-minute load average is below ``load`` or ``patience``
    seconds have passed (0: at once), so that one run's tail does not load the next; then
    ``idle`` seconds with nothing submitted measure what every process spends and every
    API server serves at rest (the background a longer run pays for longer)."""

    load: float = 1.5
    patience: float = 0.0
    idle: float = 0.0


NO_WAIT = Quiet()


async def run_mode(
    bed: Bed,
    mode: str,
    *,
    count: int,
    creators: int,
    timeout: float,
    extra: Sequence[str] = (),
    profile_dir: Path | None = None,
    quiet: Quiet = NO_WAIT,
) -> ModeResult:
    """The bed is up; configures it with kfed's manager in ``mode`` and its shims, runs the
    generator and returns what was measured (also when it failed part way: ``error`` says
    how)."""
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
        running = manager
        controllers = Controllers(
            pids=processes_of(bed, manager),
            alive=lambda: running.alive,
            last_words=lambda: running.log_tail(30),
            profile_pid=manager.pid,
        )
        await measure(
            bed, result, controllers, timeout=timeout, profile_dir=profile_dir, quiet=quiet
        )
    finally:
        if manager is not None:
            await bed.stop_manager(manager)
        await bed.close()
    return result


async def measure(
    bed: Bed,
    result: ModeResult,
    controllers: Controllers,
    *,
    timeout: float,
    profile_dir: Path | None = None,
    quiet: Quiet = NO_WAIT,
) -> None:
    """The measured window, the same for every controller: the bed's queues and
    controllers are ready; waits for a quiet machine, reads the counters, creates the Jobs,
    watches the manager's Workloads until every one is admitted, reads the counters again
    and fills ``result``."""
    mode, count, creators = result.mode, result.workloads, result.creators
    namespace = shape.namespace_of(mode)
    rec = AdmissionRecorder(CHECK)
    watch = Informer(bed.manager, R.WORKLOADS, namespace=namespace)
    watch.subscribe(lambda e: rec.manager_event(e.obj, time.monotonic()))
    task = asyncio.create_task(watch.run(), name="mk-watch")
    try:
        await asyncio.wait_for(watch.synced.wait(), 60)
        if quiet.patience > 0:
            waited = time.monotonic()
            await asyncio.to_thread(settle, quiet.load, patience=quiet.patience)
            result.settle_seconds = round(time.monotonic() - waited, 1)
        pids = controllers.pids
        if quiet.idle > 0:
            await _idle(bed, result, pids, quiet.idle)
        before = await bed.api_requests()
        cpu_before = _cpu(pids)
        window_started = time.monotonic()
        result.load_average_before = os.getloadavg()
        sampler = None
        if profile_dir is not None and controllers.profile_pid is not None:
            sampler = profiling.Sampler(
                controllers.profile_pid, profile_dir / f"manager-{mode}.txt"
            )
        say(f"-- {mode}: creating {count} Jobs with {creators} generator(s)")
        started = time.monotonic()
        result.generation_seconds = await _generate(bed, namespace, mode, count, creators, rec)
        say(f"   created in {result.generation_seconds:.1f}s")
        try:
            await _wait_admitted(
                rec, count, deadline=started + timeout, manager_alive=controllers.alive
            )
        except TimeoutError as err:
            result.error = str(err)
            result.stuck = [_state_of(o) for o in watch.items() if not ws.is_admitted(o)]
        cpu_after = _cpu(pids)
        result.measured_seconds = time.monotonic() - window_started
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
    if not controllers.alive():
        result.error = f"the manager exited during the run:\n{controllers.last_words()}"
    _fill(result, rec, before, after, cpu_before, cpu_after, pids)


async def _idle(bed: Bed, result: ModeResult, pids: dict[str, int], seconds: float) -> None:
    """Every process's CPU and every API server's requests over ``seconds`` at rest."""
    say(f"   {seconds:.0f} s at rest, for the background")
    requests_before, cpu_before = await bed.api_requests(), _cpu(pids)
    started = time.monotonic()
    await asyncio.sleep(seconds)  # a measured window, not a wait for a condition
    requests_after, cpu_after = await bed.api_requests(), _cpu(pids)
    result.idle_seconds = time.monotonic() - started
    result.idle_cpu = {n: cpu_after[n] - cpu_before.get(n, 0.0) for n in cpu_after}
    for cluster, snapshot in requests_after.items():
        idle = apirequests.window(requests_before[cluster], snapshot)
        result.idle_requests[cluster] = dict(sorted(idle.requests.items()))


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
