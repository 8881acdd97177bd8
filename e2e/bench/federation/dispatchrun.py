"""One dispatch mode, measured: start the manager in that mode, watch the manager and the
workers, wait an idle window with nothing submitted, submit the Jobs at a steady rate, wait
until every workload has finished and its remote copies are gone, read the CPU time of every
process, every apiserver's request counter (also before and after the idle window: its
background) and the manager's metrics, then clean the namespace everywhere and stop the
manager (the next mode starts a fresh one on equal ground)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence

from e2e.bench.federation import apirequests, managermetrics, processes
from e2e.bench.federation.bed import Bed
from e2e.bench.federation.jobs import BENCH_LABEL, NAMESPACE, submission_offsets
from e2e.bench.federation.recorder import DispatchRecorder
from e2e.bench.federation.report import ModeResult
from e2e.bench.federation.stats import Summary
from e2e.bench.federation.topology import CHECK, ORIGIN_SELECTOR
from e2e.local.federation import MANAGER
from e2e.waiting import wait_for
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj
from manager.kube.informer import Event, Informer

CREATE_CONCURRENCY = 16
"""Create calls in flight at once: enough to keep the schedule on a slow apiserver."""


def say(message: str) -> None:
    print(message, flush=True)


class Watches:
    """The benchmark's informers: manager Workloads and, on every worker directly, the
    remote copies (origin label), each event stamped on arrival."""

    def __init__(self, bed: Bed, recorder: DispatchRecorder) -> None:
        self.manager = Informer(bed.manager, R.WORKLOADS, namespace=NAMESPACE)
        self.manager.subscribe(lambda e: recorder.manager_event(e.type, e.obj, time.monotonic()))
        self.workers: dict[str, Informer] = {}
        for worker, api in bed.worker_apis.items():
            informer = Informer(
                api, R.WORKLOADS, namespace=NAMESPACE, label_selector=ORIGIN_SELECTOR
            )
            informer.subscribe(self._to_recorder(recorder, worker))
            self.workers[worker] = informer
        self._tasks: list[asyncio.Task[None]] = []

    @staticmethod
    def _to_recorder(recorder: DispatchRecorder, worker: str) -> Callable[[Event], None]:
        return lambda e: recorder.worker_event(worker, e.type, e.obj, time.monotonic())

    async def start(self) -> None:
        informers = [self.manager, *self.workers.values()]
        self._tasks = [asyncio.create_task(i.run(), name=repr(i)) for i in informers]
        await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in informers)), 60)

    def remote_copies(self) -> int:
        return sum(len(i.cache) for i in self.workers.values())

    def leftover_copies(self, limit: int = 10) -> list[str]:
        return [f"{w}: {key}" for w, i in self.workers.items() for key in i.cache][:limit]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def submit(
    api: KubeApi, jobs: Sequence[Obj], rate: float, recorder: DispatchRecorder
) -> float:
    """Create every Job on its absolute schedule; returns the seconds it took."""
    started = time.monotonic()
    slots = asyncio.Semaphore(CREATE_CONCURRENCY)
    tasks: set[asyncio.Task[None]] = set()

    async def create(job: Obj) -> None:
        try:
            await api.create(R.JOBS, job, NAMESPACE)
            recorder.submitted(job["metadata"]["name"], time.monotonic())
        except errors.KubeError as err:
            recorder.submit_errors.append(f"{job['metadata']['name']}: {err}")
        finally:
            slots.release()

    for job, offset in zip(jobs, submission_offsets(len(jobs), rate), strict=True):
        due = started + offset - time.monotonic()
        if due > 0:
            await asyncio.sleep(due)  # pacing the offered load, not waiting on a condition
        await slots.acquire()
        task = asyncio.create_task(create(job))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.gather(*tasks)
    return time.monotonic() - started


async def nothing_left(api: KubeApi, res: R.Resource) -> bool:
    page = await api.request("GET", res.path(NAMESPACE), query={"limit": 1})
    return not page.get("items")


async def clean_namespace(bed: Bed, *, timeout: float = 600) -> None:
    """Delete the benchmark's Jobs on the manager (its Workloads go with them, and the
    running manager removes any remote copy), then wait until the namespace holds no Job,
    Workload or Pod on any cluster."""
    await bed.manager.request(
        "DELETE",
        R.JOBS.path(NAMESPACE),
        query={"labelSelector": BENCH_LABEL},
        body={"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"},
    )

    async def clean() -> bool:
        checks = [nothing_left(bed.manager, R.JOBS), nothing_left(bed.manager, R.WORKLOADS)]
        for api in bed.worker_apis.values():
            checks += [
                nothing_left(api, R.WORKLOADS),
                nothing_left(api, R.JOBS),
                nothing_left(api, R.PODS),
            ]
        return all(await asyncio.gather(*checks))

    await wait_for(
        clean, timeout=timeout, what=f"namespace {NAMESPACE} empty on every cluster", interval=1
    )


async def wait_done(
    recorder: DispatchRecorder, watches: Watches, jobs: int, *, deadline: float
) -> bool:
    """Every workload finished and no remote copy left; progress every ~15 s."""
    last_report = time.monotonic()
    while time.monotonic() < deadline:
        finished = recorder.finished()
        if finished >= jobs and watches.remote_copies() == 0:
            return True
        if time.monotonic() - last_report >= 15:
            last_report = time.monotonic()
            say(
                f"   {len(recorder.submitted_at)} submitted, "
                f"{sum(1 for t in recorder.workloads.values() if t.reserved_at)} reserved, "
                f"{sum(1 for t in recorder.workloads.values() if t.remote_admitted_at)} admitted "
                f"remotely, {finished} finished, {watches.remote_copies()} copies on workers"
            )
        await asyncio.sleep(0.25)  # polling in-memory counters
    return False


def _per(cluster: apirequests.ClusterRequests) -> str:
    net = cluster.per_workload(cluster.net())
    return "n/a" if net is None else f"{net:.1f}"


async def run_mode(
    bed: Bed,
    mode: str,
    jobs: Sequence[Obj],
    *,
    rate: float,
    timeout: float,
    results: list[ModeResult],
    extra: Sequence[str] = (),
    idle_seconds: float = 0.0,
) -> None:
    """Appends the mode's result to ``results`` as soon as it is measured, so that it is
    reported even if cleaning up afterwards fails."""
    args = processes.manager_args(bed.fed.kubeconfig(MANAGER), mode, extra)
    manager = processes.start_manager(f"dispatch-{mode}", args, bed.logs)
    try:
        port = await processes.listening_port(manager)
        await processes.wait_manager_ready(manager, port, bed.workers, fencing=False)
        await bed.wait_unfenced()
        recorder = DispatchRecorder(CHECK)
        watches = Watches(bed, recorder)
        await watches.start()
        try:
            say(
                f"-- {mode}: manager ready (pid {manager.pid}); idle for {idle_seconds:.0f}s "
                "(the background of API requests and CPU)"
            )
            # The idle window: the background every apiserver serves with no workload.
            idle_reads = await bed.api_requests()
            idle_from, idle_cpu_before = time.monotonic(), bed.cpu_seconds(manager)
            await asyncio.sleep(idle_seconds)  # a window of fixed length, not a condition
            idle_cpu_after = bed.cpu_seconds(manager)
            reads_before = await bed.api_requests()
            idle_to = time.monotonic()
            say(f"   submitting {len(jobs)} jobs at {rate}/s")
            cpu_before = bed.cpu_seconds(manager)
            started = time.monotonic()
            submit_seconds = await submit(bed.manager, jobs, rate, recorder)
            # Wait for the Jobs that were created (a failed create is reported, not awaited).
            complete = await wait_done(
                recorder,
                watches,
                len(recorder.submitted_at),
                deadline=started + submit_seconds + timeout,
            )
            done = time.monotonic()
            cpu_after = bed.cpu_seconds(manager)
            reads_after = await bed.api_requests()
            window_to = time.monotonic()
            metrics_text = await processes.get_text(f"http://127.0.0.1:{port}/metrics")
            leftover = watches.leftover_copies()
        finally:
            await watches.stop()
        if not manager.alive:
            raise RuntimeError(f"the manager exited during the run:\n{manager.log_tail(30)}")
        requests = apirequests.ApiRequests.of(
            {c: (idle_reads[c], reads_before[c], reads_after[c]) for c in reads_after},
            manager=MANAGER,
            workloads=len(recorder.submitted_at),
            placements=recorder.placements(),
            idle_seconds=idle_to - idle_from,
            window_seconds=window_to - idle_to,
        )
        result = ModeResult(
            mode=mode,
            manager_args=args[2:],  # without the kubeconfig path
            jobs=len(jobs),
            submitted=len(recorder.submitted_at),
            finished=recorder.finished(),
            complete=complete,
            submit_seconds=submit_seconds,
            wall_seconds=done - started,
            dispatch=Summary.of(recorder.dispatch_latencies()),
            to_copy=Summary.of(recorder.copy_latencies()),
            copy_to_admitted=Summary.of(recorder.remote_admission_latencies()),
            placement=Summary.of(recorder.placement_latencies()),
            queueing=Summary.of(recorder.queueing_latencies()),
            copies=dict(recorder.copies_per_workload()),
            admitted_copies=dict(recorder.admitted_copies_per_workload()),
            placements=dict(recorder.placements()),
            evictions=recorder.evictions(),
            cpu_seconds={k: cpu_after[k] - cpu_before.get(k, 0.0) for k in cpu_after},
            metrics=managermetrics.parse(metrics_text),
            submit_errors=recorder.submit_errors,
            negative_latencies=recorder.negative_latencies,
            unfinished=recorder.unfinished(),
            leftover_copies=leftover,
            api_requests=requests,
            idle_cpu_seconds={
                k: idle_cpu_after[k] - idle_cpu_before.get(k, 0.0) for k in idle_cpu_after
            },
        )
        say(
            f"   {mode}: {result.finished}/{len(jobs)} finished in {result.wall_seconds:.1f}s; "
            f"dispatch p50 {result.dispatch.p50:.3f}s p99 {result.dispatch.p99:.3f}s; "
            f"{result.copies_per_workload:.2f} copies per workload; "
            f"manager CPU {result.manager_cpu:.1f}s"
        )
        chosen = requests.chosen_worker()
        say(
            f"   API requests per workload: manager {_per(requests.manager)}, "
            f"chosen worker {_per(chosen)} (net of the idle background)"
        )
        results.append(result)
        say("   cleaning the namespace on every cluster")
        await clean_namespace(bed)
    finally:
        await bed.stop_manager(manager)
