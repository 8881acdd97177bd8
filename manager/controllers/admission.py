"""The scheduling loop: one task that runs the core's cycle whenever something changed, and
applies its decisions through the API.

Admissions are already assumed in the core when the cycle returns them (the next cycle sees
their usage); here each is written with a resourceVersion-guarded patch, then confirmed, or
forgotten when the write fails or no longer applies (the workload goes back to its queue).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from manager import core
from manager.api import constants as C
from manager.api.view import at, labels_of
from manager.controllers import conditions, spans
from manager.controllers import eventreasons as told
from manager.controllers import workloadstatus as ws
from manager.controllers.pacing import CyclePacing
from manager.controllers.pendingstatus import PendingStatusWriter
from manager.controllers.settings import ControllerSettings
from manager.controllers.state import ClusterState
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.tasks import wait_event
from manager.kube.update import Mutate, patch_guarded

log = logging.getLogger(__name__)

AdmitHook = Callable[[str, core.Admit], Awaitable[None] | None]


class AdmissionLoop:
    def __init__(self, state: ClusterState, settings: ControllerSettings) -> None:
        self.state = state
        self.settings = settings
        self.in_flight: set[str] = set()
        """Workloads whose admission write is on its way: reconcilers leave them alone."""
        self._writes = asyncio.Semaphore(settings.write_concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self.cycles = 0
        self.pacing = CyclePacing()
        self.on_admit: list[AdmitHook] = []
        self.resync: Callable[[str], None] | None = None
        """Asks the Workload controller to reconcile a workload (see ``_admit``)."""
        self.pending_status = PendingStatusWriter(
            state,
            concurrency=settings.pending_status_concurrency,
            qps=settings.pending_status_qps,
            burst=settings.pending_status_burst,
        )

    async def run(self) -> None:
        state = self.state
        self._spawn(self.pending_status.run())
        try:
            while True:
                timeout = None
                wake_at = state.core.next_requeue_at()
                if wake_at is not None:
                    timeout = max(0.0, wake_at - time.time())
                await wait_event(state.changed, timeout)
                state.changed.clear()
                while True:
                    started = time.perf_counter()
                    result = state.core.schedule(time.time())
                    if result.evaluated:
                        state.metrics.scheduling_cycle(
                            admitted=len(result.admitted), seconds=time.perf_counter() - started
                        )
                    self.cycles += 1
                    self._apply(result)
                    # Also lets watch events and writes in between cycles (a pause of 0). A
                    # cycle without heads says nothing about the backlog: no pacing.
                    pause = (
                        self.pacing.after_cycle(bool(result.admitted)) if result.evaluated else 0
                    )
                    await asyncio.sleep(pause)
                    if not result.more:
                        break
        finally:
            for task in list(self._tasks):
                task.cancel()

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _apply(self, result: core.CycleResult) -> None:
        for admit in result.admitted:
            self.in_flight.add(admit.workload)
            self._spawn(self._admit(admit))
        for preempt in result.preempted:
            preemptor = self.state.workloads.get(preempt.preemptor)
            preemptor_meta = at(preemptor, "metadata")
            for victim in preempt.victims:
                message = told.preemption_message(
                    preemptor_uid=preemptor_meta.get("uid", ""),
                    preemptor_job_uid=labels_of(preemptor).get(C.JOB_UID_LABEL, ""),
                    reason=victim.reason.human,
                    preemptor_path=self.state.core.cluster_queue_path(preempt.cluster_queue),
                    preemptee_path=self.state.core.cluster_queue_path(victim.cluster_queue),
                )
                self._spawn(
                    self._evict(
                        victim.workload,
                        C.REASON_EVICTED_BY_PREEMPTION,
                        message,
                        preempted_reason=str(victim.reason),
                        preemptor=preemptor,
                        preempting_cluster_queue=preempt.cluster_queue,
                    )
                )
        for evict in result.evicted:
            self._spawn(self._evict(evict.workload, str(evict.reason), evict.message))
        for p in result.pending:
            self.pending_status.report(p.workload, p.reason)

    async def _write(self, key: str, mutate: Mutate) -> dict[str, Any] | None:
        obj = self.state.workloads.get(key)
        if obj is None:
            raise errors.NotFound(404, "NotFound", f"workload {key} is not known")
        async with self._writes:
            return await patch_guarded(
                self.state.api, R.WORKLOADS, obj, mutate, subresource="status"
            )

    async def _admit(self, admit: core.Admit) -> None:
        key = admit.workload
        checks = self.state.admission_check_names(admit.cluster_queue)
        core_ = self.state.core
        base = self.state.workloads.get(key)
        failed = False
        try:
            written = await self._write(key, lambda o: ws.reserve(o, admit.admission, checks))
        except errors.KubeError as err:
            log.info("admitting %s failed (%s); requeued", key, err)
            written, failed = None, True
        finally:
            self.in_flight.discard(key)
        if failed:
            core_.forget(key)  # queued again; the loop looks again after a pause
            asyncio.get_running_loop().call_later(
                self.settings.requeue_base_seconds, self.state.kick
            )
            if self.resync is not None:
                self.resync(key)
            return
        if written is None:
            # Not written: the core's view of this workload may be stale (its object already
            # holds a reservation, finished, was deactivated). Only its reconcile can tell,
            # and no event may be coming to start one: ask for it. Meanwhile the workload is
            # out of the core: back in its queue, it would be the head again at once and,
            # with others waiting behind it, admitted again in the very next cycle, its
            # reconcile always finding that admission in flight (a loop at 100 % CPU that
            # admitted nothing else, found by e2e/bench/multikueue).
            if self.resync is not None:
                core_.delete_workload(key)
                self.resync(key)
            else:
                core_.forget(key)
            return
        core_.confirm(key)
        if not checks:
            core_.set_admitted(key)
        self.state.workloads.remember_written(key, base, written)
        waited = time.time() - queued_since(written)
        self.state.metrics.quota_reserved(admit.cluster_queue, waited=waited, workload=written)
        told.quota_reserved(self.state.events, written, admit.cluster_queue, waited)
        if not checks:
            self.state.metrics.admitted(
                admit.cluster_queue,
                waited=waited,
                workload=written,
                cohorts=self.state.cohorts_of(admit.cluster_queue),
            )
            told.admitted(self.state.events, written, admit.cluster_queue, 0.0)
        self._trace_admission(written, admit)
        for hook in self.on_admit:
            outcome = hook(key, admit)
            if outcome is not None:
                await outcome

    def _trace_admission(self, written: dict[str, Any], admit: core.Admit) -> None:
        role = self.settings.role
        spans.record(role, "queueing", written, start=queued_since(written))
        spans.record(
            role,
            "admission",
            written,
            attributes=spans.admission_attributes(admit.admission, admit.borrowing),
        )

    async def _evict(
        self,
        key: str,
        reason: str,
        message: str,
        *,
        preempted_reason: str | None = None,
        preemptor: dict[str, Any] | None = None,
        preempting_cluster_queue: str = "",
    ) -> None:
        try:
            written = await self._write(
                key, lambda o: ws.evict(o, reason, message, preempted_reason=preempted_reason)
            )
            if written is not None:
                self.state.metrics.evicted(ws.cluster_queue_of(written), reason, workload=written)
                if preempted_reason is not None:
                    self.state.metrics.preempted(preempting_cluster_queue, preempted_reason)
                if preempted_reason is None:
                    told.evicted(self.state.events, written, reason, message)
                else:
                    told.preempted(
                        self.state.events,
                        written,
                        preemptor,
                        message,
                        cluster_queue=ws.cluster_queue_of(written),
                    )
                spans.record(
                    self.settings.role,
                    "eviction",
                    written,
                    attributes={"kueue.eviction.reason": reason, "kueue.eviction.message": message},
                )
        except errors.KubeError as err:
            log.info("evicting %s failed (%s)", key, err)
            self.state.core.cancel_eviction(core.WorkloadKey(key))
            self.state.kick()


def queued_since(obj: dict[str, Any]) -> float:
    """When a workload started waiting: its creation, or its last requeue after an eviction
    (Kueue measures wait times from there)."""
    requeued = conditions.find(ws.status_of(obj).get("conditions"), C.REQUEUED)
    since = ws.parse_time(requeued.get("lastTransitionTime")) if requeued else None
    return since or ws.creation_time(obj)
