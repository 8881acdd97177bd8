"""The scheduler benchmark's runner: it plays upstream's runner against kfed's controllers.

- creates the ResourceFlavor, the namespaces, ClusterQueues and LocalQueues, then every
  workload stream (one per ClusterQueue and class) at its pace, all streams at once;
- watches Workloads and ClusterQueues and feeds the ``Recorder``;
- "runs" each admitted workload: ``runtime`` after it saw it Admitted, it marks it Finished
  (unless it was evicted meanwhile; kfed requeues an evicted workload by itself, since no Job
  owns it);
- ends when every workload is finished and every ClusterQueue's status shows nothing pending
  or reserving, as upstream's recorder does.

Pacing, as upstream's generator does it: each stream waits one interval, creates a workload
and waits for the API's answer, then waits the next interval; so a slow API also slows the
arrivals (upstream's thresholds were set that way). ``absolute_pace`` instead sends workload
i of a stream at (i+1) x interval after the start, late ones at once: the scenario's offered
load whatever the API's latency, a stricter test.

Creates and finish writes may each have up to 256 requests in flight: the runner stands for
many independent users and jobs, and must not itself be what limits the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from e2e.bench.scheduler import generator as g
from e2e.bench.scheduler.recorder import Recorder, condition_true
from manager.api import constants as C
from manager.controllers import conditions
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj
from manager.kube.informer import Event, Informer
from manager.kube.update import patch_guarded

log = logging.getLogger(__name__)


def finish_patch(obj: Obj) -> dict[str, Any] | None:
    """Finished=True, for a workload that is still admitted and not evicted."""
    if (
        not condition_true(obj, C.ADMITTED)
        or condition_true(obj, C.EVICTED)
        or condition_true(obj, C.FINISHED)
    ):
        return None
    conds: conditions.Conditions = list((obj.get("status") or {}).get("conditions") or [])
    conditions.set_condition(
        conds, C.FINISHED, True, C.REASON_SUCCEEDED, "Finished by the benchmark runner"
    )
    return {"status": {"conditions": conds}}


class Runner:
    def __init__(
        self,
        api: KubeApi,
        scenario: g.Scenario,
        *,
        create_concurrency: int = 256,
        write_concurrency: int = 256,
        progress: Callable[[str], None] | None = None,
        absolute_pace: bool = False,
    ) -> None:
        self.api = api
        self.scenario = scenario
        self.absolute_pace = absolute_pace
        self.recorder = Recorder(expected_workloads=scenario.workload_count)
        self.workloads = Informer(api, R.WORKLOADS)
        self.cluster_queues = Informer(api, R.CLUSTER_QUEUES)
        self.workloads.subscribe(self._on_workload)
        self.cluster_queues.subscribe(self._on_cluster_queue)
        self._creates = asyncio.Semaphore(create_concurrency)
        self._writes = asyncio.Semaphore(write_concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._generation_done = False
        self._done = asyncio.Event()
        self.created = 0
        self.finish_writes = 0
        self.finish_write_seconds: list[float] = []
        """How long each finish write took (the API server's latency as the runner sees it)."""
        self.finish_failures = 0
        self.generation_seconds = 0.0
        self.timed_out = False
        self._say = progress or (lambda line: print(line, file=sys.stderr, flush=True))

    # -- events ----------------------------------------------------------------------------

    def _on_workload(self, event: Event) -> None:
        if event.type == "DELETED":
            return
        labels = (event.obj.get("metadata") or {}).get("labels") or {}
        name = labels.get(g.CLASS_LABEL)
        if name is None:
            return
        cls = self.scenario.workload_class(name)
        now = time.monotonic()
        outcome = self.recorder.workload_event(
            event.key, event.obj, now, cpu=cls.cpu, class_name=name
        )
        if outcome == "admitted":
            loop = asyncio.get_running_loop()
            self._timers[event.key] = loop.call_later(
                cls.runtime_ms / 1000, self._spawn_finish, event.key
            )
        elif outcome == "unadmitted":
            timer = self._timers.pop(event.key, None)
            if timer is not None:
                timer.cancel()
        self._check_done()

    def _on_cluster_queue(self, event: Event) -> None:
        if event.type == "DELETED":
            return
        self.recorder.queue_event(event.key, event.obj, time.monotonic())
        self._check_done()

    def _check_done(self) -> None:
        if self._generation_done and self.recorder.done:
            self._done.set()

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _spawn_finish(self, key: str) -> None:
        self._timers.pop(key, None)
        self._spawn(self._finish(key))

    async def _finish(self, key: str) -> None:
        obj = self.workloads.get(key)
        if obj is None:
            return
        async with self._writes:
            started = time.monotonic()
            try:
                written = await patch_guarded(
                    self.api, R.WORKLOADS, obj, finish_patch, subresource="status"
                )
            except errors.KubeError as err:
                self.finish_failures += 1
                log.warning("finishing %s failed: %s", key, err)
                return
            self.finish_write_seconds.append(time.monotonic() - started)
        if written is not None:
            self.finish_writes += 1

    # -- objects ---------------------------------------------------------------------------

    async def _create(self, res: R.Resource, body: Obj) -> None:
        async with self._creates:
            with contextlib.suppress(errors.AlreadyExists):  # a retried create that landed
                await self.api.create(res, body)

    async def setup(self) -> None:
        s = self.scenario
        queues = s.queues()
        await self._create(R.RESOURCE_FLAVORS, g.flavor_object())
        await asyncio.gather(*(self._create(R.NAMESPACES, g.namespace_object(q)) for q in queues))
        await asyncio.gather(
            *(self._create(R.CLUSTER_QUEUES, g.cluster_queue_object(s, q)) for q in queues)
        )
        await asyncio.gather(
            *(self._create(R.LOCAL_QUEUES, g.local_queue_object(q)) for q in queues)
        )

    async def _stream(self, queue: g.QueueRef, cls: g.WorkloadClass, start: float) -> None:
        interval = cls.interval_ms / 1000
        for index, offset in enumerate(cls.creation_offsets()):
            delay = start + offset - time.monotonic() if self.absolute_pace else interval
            if delay > 0:
                await asyncio.sleep(delay)
            await self._create(R.WORKLOADS, g.workload_object(queue, cls, index))
            self.created += 1

    async def generate(self) -> None:
        start = time.monotonic()
        await asyncio.gather(
            *(
                self._stream(queue, cls, start)
                for queue in self.scenario.queues()
                for cls in self.scenario.classes
            )
        )
        self.generation_seconds = time.monotonic() - start
        self._generation_done = True
        self._check_done()

    def unfinished_summary(self) -> str:
        r = self.recorder
        busy = [
            f"{name} (pending {q.pending}, reserving {q.reserving})"
            for name, q in sorted(r.queues.items())
            if q.pending or q.reserving or not q.status_seen
        ]
        return (
            f"{r.finished}/{r.expected_workloads} workloads finished; ClusterQueues whose status "
            f"is not idle: {', '.join(busy) or 'none'}"
        )

    # -- the run ---------------------------------------------------------------------------

    async def _report_progress(self, every: float) -> None:
        started = time.monotonic()
        while True:
            await asyncio.sleep(every)
            r = self.recorder
            admitted = sum(1 for w in r.workloads.values() if w.admitted)
            self._say(
                f"[{time.monotonic() - started:6.1f}s] created {self.created}"
                f"/{self.scenario.workload_count}, running {admitted}, finished {r.finished}, "
                f"evictions {sum(w.evictions for w in r.workloads.values())}"
            )

    async def _generate_then_wait(self) -> None:
        await self.generate()
        await self._done.wait()

    async def run(self, *, timeout: float, progress_every: float = 10.0) -> None:
        """Set up, generate and wait until done; raises TimeoutError after ``timeout`` s."""
        informers = [
            asyncio.create_task(i.run(), name=repr(i))
            for i in (self.workloads, self.cluster_queues)
        ]
        reporter = asyncio.create_task(self._report_progress(progress_every))
        try:
            await asyncio.wait_for(
                asyncio.gather(self.workloads.synced.wait(), self.cluster_queues.synced.wait()),
                timeout=60,
            )
            await self.setup()
            try:
                await asyncio.wait_for(self._generate_then_wait(), timeout=timeout)
            except TimeoutError:
                self.timed_out = True
                self._say(f"timed out after {timeout:.0f}s; {self.unfinished_summary()}")
        finally:
            for timer in self._timers.values():
                timer.cancel()
            for task in [*informers, reporter, *self._tasks]:
                task.cancel()
            for task in [*informers, reporter, *list(self._tasks)]:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
