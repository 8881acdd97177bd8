"""The Workload controller: keeps the admission core in step with Workload objects, and
moves each workload through its life (pending, reserved, admitted, evicted and requeued,
finished) by writing its status.

One reconcile per key at a time (the work queue's promise); a reconcile reads the informer's
copy, decides, writes at most one status patch, and updates the core.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any

import pydantic

from manager import core
from manager.api import constants as C
from manager.api.view import at
from manager.api.workload import Workload
from manager.controllers import convert, ignored, spans
from manager.controllers import eventreasons as told
from manager.controllers import workloadstatus as ws
from manager.controllers.admission import AdmissionLoop, queued_since
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.settings import ControllerSettings
from manager.controllers.state import ClusterState, one_line
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.informer import Event
from manager.kube.update import Mutate, patch_guarded
from manager.kube.workqueue import WorkQueue
from manager.telemetry import tracing

log = logging.getLogger(__name__)

IN_FLIGHT_RECHECK_SECONDS = 0.2


def priority_of(wl: Workload, priority_class_value: Callable[[str], int | None]) -> int:
    """The priority the core gets for a Workload: its ``spec.priority``, else the value of its
    WorkloadPriorityClass (looked up by name), else 0."""
    if wl.spec.priority is not None:
        return wl.spec.priority
    ref = wl.spec.priority_class_ref
    if ref is not None and str(ref.kind) == "WorkloadPriorityClass":
        return core.resolve_priority(workload_priority_class_value=priority_class_value(ref.name))
    return 0


class WorkloadController:
    def __init__(
        self, state: ClusterState, admission: AdmissionLoop, settings: ControllerSettings
    ) -> None:
        self.state = state
        self.admission = admission
        self.settings = settings
        self.queue = WorkQueue(name="workloads")
        self.stop_checks: list[Callable[[dict[str, Any]], bool]] = []
        """Extra conditions for "the job has stopped" (the federation adds: no remote copy
        can still run) before an evicted workload gives its quota back."""
        state.workloads.subscribe(self._on_event)
        state.job_kinds.subscribe(self._on_job)

    def _on_event(self, event: Event) -> None:
        if event.type == "ADDED":
            for reason, message in ignored.workload_notes(event.obj):
                self.state.events.warning(event.obj, reason, message)
        self.queue.add(event.key)

    def _on_job(self, kind: JobKind, event: Event) -> None:
        """A job that stopped may let its evicted workload release quota."""
        key = kind.workload_key(event.obj)
        wl = self.state.workloads.get(key)
        if wl is not None and ws.is_evicted(wl):
            self.queue.add(key)

    def job_stopped(self, obj: dict[str, Any]) -> bool:
        if not all(check(obj) for check in self.stop_checks):
            return False
        found = self.state.job_of(obj)
        if found is None:
            return True
        kind, job = found
        if job is None or not kind.suspendable:
            return True  # a kind kfed cannot suspend: its own controller stops it
        if kind.managed_by(job) == C.MULTIKUEUE_MANAGED_BY:
            # Its pods run on a worker: the stop checks above say whether they are gone.
            return kind.is_suspended(job)
        return kind.is_suspended(job) and not kind.is_active(job)

    def priority_of(self, wl: Workload) -> int:
        return priority_of(wl, self.state.priority_class_value)

    def left_to_check(self, obj: dict[str, Any]) -> str | None:
        """The check controller its job is left to: a job ``managedBy`` MultiKueue runs only
        where a MultiKueue check places it (the core keeps it out of other ClusterQueues)."""
        found = self.state.job_of(obj)
        if found is None:
            return None
        kind, job = found
        if job is not None and kind.managed_by(job) == C.MULTIKUEUE_MANAGED_BY:
            return C.MULTIKUEUE_CONTROLLER_NAME
        return None

    def to_core(self, model: Workload, obj: dict[str, Any]) -> core.Workload:
        return convert.workload(
            model,
            priority=self.priority_of(model),
            creation_time=ws.creation_time(obj),
            left_to_check=self.left_to_check(obj),
        )

    async def _write(self, obj: dict[str, Any], mutate: Mutate) -> dict[str, Any] | None:
        try:
            written = await patch_guarded(
                self.state.api, R.WORKLOADS, obj, mutate, subresource="status"
            )
        except errors.NotFound:
            return None
        if written is not None:
            self.state.workloads.remember_written(ws.key_of(written), obj, written)
        return written

    def _requeue_delay(self, obj: dict[str, Any]) -> float | None:
        if _evicted_reason(obj) == C.REASON_EVICTED_BY_PREEMPTION:
            return None
        count = int(at(ws.status_of(obj), "requeueState").get("count") or 0)
        delay: float = self.settings.requeue_base_seconds * 2.0**count
        return min(self.settings.requeue_max_seconds, delay) * random.uniform(0.9, 1.1)

    async def reconcile(self, key: str) -> float | None:
        """Returns seconds after which to look again, or None."""
        with tracing.workload_context(self.state.workloads.get(key)):
            return await self._reconcile(key)

    async def _reconcile(self, key: str) -> float | None:
        state, core_ = self.state, self.state.core
        wkey = core.WorkloadKey(key)
        if key in self.admission.in_flight:
            # Events that arrive while its admission is being written are not lost: look
            # again once the write is likely done.
            return IN_FLIGHT_RECHECK_SECONDS
        obj = state.workloads.get(key)
        if obj is None:
            core_.delete_workload(wkey)
            state.invalid.pop(f"Workload/{key}", None)
            state.kick()
            return None
        if ws.is_finished(obj) or obj["metadata"].get("deletionTimestamp"):
            held = core_.admission(wkey)
            if core_.finish(wkey):
                if held is not None and ws.is_finished(obj):
                    state.metrics.finished(held.cluster_queue, workload=obj)
                state.kick()
            return None
        try:
            model = Workload.model_validate(obj)
        except pydantic.ValidationError as err:
            # Stored as upstream stores it (its schema allows it), but nothing kfed can act on.
            state.invalid[f"Workload/{key}"] = one_line(err)
            log.warning("workload %s cannot be parsed, left alone: %s", key, one_line(err))
            return None
        state.invalid.pop(f"Workload/{key}", None)

        if ws.has_reservation(obj):
            return await self._reconcile_reserved(key, obj, model)

        # Pending (never admitted, or evicted and released).
        if not ws.is_active(obj):
            core_.delete_workload(wkey)
            state.kick()
            return None
        requeue_at = ws.requeue_at(obj)
        now = time.time()
        if (
            requeue_at is not None
            and requeue_at <= now
            and await self._write(obj, ws.backoff_finished)
        ):
            return None
        workload = self.to_core(model, obj)
        if core_.workload_state(wkey) in (
            core.WorkloadState.QUOTA_RESERVED,
            core.WorkloadState.ADMITTED,
        ):
            core_.evict(wkey, now=ws.eviction_time(obj) or now, requeue_at=requeue_at)
        elif not core_.add_workload(
            workload, requeue_at=requeue_at, order_time=ws.eviction_time(obj)
        ):
            # The same workload, queued already (its status changed, e.g. the pending
            # reason just written): a cycle now would decide what the last one did.
            return None
        state.kick()
        return None

    async def _reconcile_reserved(
        self, key: str, obj: dict[str, Any], model: Workload
    ) -> float | None:
        state, core_ = self.state, self.state.core
        wkey = core.WorkloadKey(key)
        admission = convert.admission_from_status(ws.status_of(obj)["admission"])

        if ws.is_evicted(obj) or not ws.is_active(obj):
            if not ws.is_evicted(obj):
                why = _deactivation_message(obj)
                written = await self._write(obj, lambda o: ws.evict(o, C.REASON_DEACTIVATED, why))
                if written is not None:
                    state.metrics.evicted(
                        admission.cluster_queue,
                        C.REASON_DEACTIVATED,
                        workload=written,
                        underlying_cause=_underlying_cause(obj),
                    )
                    told.evicted(state.events, written, _deactivated_reason(obj), why)
                    # Deactivated: by a user, a rejected check, or (on a worker) fencing.
                    spans.record(
                        self.settings.role,
                        "eviction",
                        written,
                        attributes={
                            "kueue.eviction.reason": C.REASON_DEACTIVATED,
                            "kueue.eviction.message": why,
                        },
                    )
                return None
            if not self.job_stopped(obj):
                # The Job controller suspends it and its event brings us back; a copy on a
                # lost worker stops only with time, so look again in a while regardless.
                return 1.0
            delay = self._requeue_delay(obj)
            now = time.time()
            requeue_at = now + delay if delay else None
            fine = state.unadmitted_workloads_observability
            if (
                await self._write(
                    obj, lambda o: ws.release(o, requeue_at=requeue_at, now=now, fine=fine)
                )
                is not None
            ):
                evicted_at = ws.eviction_time(obj)
                if evicted_at is not None:
                    state.metrics.eviction_released(
                        admission.cluster_queue, _evicted_reason(obj), seconds=now - evicted_at
                    )
                spans.record(
                    self.settings.role,
                    "requeue",
                    obj,
                    attributes={
                        "kueue.requeue_at": requeue_at,
                        "kueue.eviction.reason": _evicted_reason(obj),
                    },
                )
                if core_.workload_state(wkey) is None:
                    core_.add_admitted(
                        self.to_core(model, obj),
                        admission,
                        reserved_at=now,
                    )
                if not ws.is_active(obj):
                    core_.finish(wkey)
                else:
                    core_.evict(wkey, now=now, requeue_at=requeue_at)
                state.kick()
            return None

        if core_.workload_state(wkey) in (None, core.WorkloadState.PENDING):
            # Reserved before we saw it (restart, or another replica), or the core still
            # queues it (a stale view, see AdmissionLoop._admit): account for it once.
            core_.add_admitted(
                self.to_core(model, obj),
                admission,
                reserved_at=ws.reservation_time(obj) or time.time(),
                admitted=ws.is_admitted(obj),
            )
            state.kick()

        checks = state.admission_check_names(admission.cluster_queue)
        if await self._write(obj, lambda o: ws.sync_checks(o, checks)) is not None:
            return None
        states = ws.check_states(obj)
        if any(s == "Retry" for s in states.values()):
            message = "; ".join(
                f"{c['name']}: {c.get('message', '')}"
                for c in ws.status_of(obj).get("admissionChecks") or []
                if c.get("state") == "Retry"
            )
            reason = f"At least one admission check is false: {message}"
            evicted = await self._write(
                obj, lambda o: ws.evict(o, C.REASON_EVICTED_BY_ADMISSION_CHECK, reason)
            )
            if evicted is not None:
                state.metrics.evicted(
                    admission.cluster_queue, C.REASON_EVICTED_BY_ADMISSION_CHECK, workload=evicted
                )
                told.evicted(state.events, evicted, C.REASON_EVICTED_BY_ADMISSION_CHECK, reason)
                spans.record(
                    self.settings.role,
                    "eviction",
                    obj,
                    attributes={
                        "kueue.eviction.reason": C.REASON_EVICTED_BY_ADMISSION_CHECK,
                        "kueue.eviction.message": reason,
                    },
                )
            return None
        if any(s == "Rejected" for s in states.values()):
            for check in ws.status_of(obj).get("admissionChecks") or []:
                if check.get("state") == "Rejected":
                    told.check_rejected(
                        state.events, obj, str(check.get("name")), str(check.get("message", ""))
                    )
                    break
            await self._deactivate(obj)
            return None
        if ws.is_admitted(obj):
            core_.set_admitted(wkey)
        elif (admitted := await self._write(obj, ws.admit)) is not None:
            core_.set_admitted(wkey)
            reserved = ws.reservation_time(obj)
            since = time.time() - reserved if reserved else 0.0
            state.metrics.admitted(
                admission.cluster_queue,
                waited=time.time() - queued_since(obj),
                workload=admitted,
                checks_waited=since,
                cohorts=state.cohorts_of(admission.cluster_queue),
            )
            told.admitted(state.events, admitted, admission.cluster_queue, since)
        return None

    async def _deactivate(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        try:
            await self.state.api.patch(
                R.WORKLOADS, meta["name"], {"spec": {"active": False}}, meta["namespace"]
            )
        except errors.NotFound:
            return


def _deactivation_message(obj: dict[str, Any]) -> str:
    """Why it was deactivated, kept in its Evicted condition: the checks' states are reset
    when its quota is released, so a rejection's reason would otherwise be lost."""
    rejected = [
        f"{c.get('name')}: {c.get('message', '')}"
        for c in ws.status_of(obj).get("admissionChecks") or []
        if c.get("state") == "Rejected"
    ]
    if rejected:
        return "The workload is deactivated: admission check rejected it: " + "; ".join(rejected)
    return "The workload is deactivated"


def _deactivated_reason(obj: dict[str, Any]) -> str:
    """Kueue's eviction reason of a deactivation, with its cause when kfed knows it."""
    if any(c.get("state") == "Rejected" for c in ws.status_of(obj).get("admissionChecks") or []):
        return f"{C.REASON_DEACTIVATED}DueTo{C.REASON_EVICTED_BY_ADMISSION_CHECK}"
    return C.REASON_DEACTIVATED


def _underlying_cause(obj: dict[str, Any]) -> str:
    """Upstream's ``underlying_cause`` of a deactivation's eviction: ``AdmissionCheck`` when a
    rejected check deactivated it, else "" (the reason is the cause)."""
    if _deactivated_reason(obj) != C.REASON_DEACTIVATED:
        return C.REASON_EVICTED_BY_ADMISSION_CHECK
    return ""


def _evicted_reason(obj: dict[str, Any]) -> str:
    for c in ws.status_of(obj).get("conditions") or []:
        if c.get("type") == C.EVICTED:
            return str(c.get("reason") or "")
    return ""
