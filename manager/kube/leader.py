"""Leader election on a coordination.k8s.io Lease (client-go's algorithm), so that several
manager replicas can run and exactly one of them acts.

``run(lead)`` blocks until cancelled, one term after another: it acquires the Lease
(retrying every ``retry_period``, jittered), runs ``lead()`` while it keeps renewing and,
when leadership is lost (no renewal within ``renew_deadline``: its API server away, say),
cancels ``lead()``, waits until it has stopped and stands by again, to lead again once it
wins the Lease back. A ``lead()`` that fails gives the Lease up and is started again, backing
off. When cancelled (SIGTERM), it releases the Lease so a standby takes over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, replace
from typing import Any

from manager.kube import errors, lease
from manager.kube.api import KubeApi
from manager.kube.backoff import Backoff
from manager.kube.tasks import stop_tasks

log = logging.getLogger(__name__)

STOP_WARNING = 30.0
"""Seconds between the warnings that the leader's work is still stopping."""


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 8.0
    """How long a standby waits after the leader's last renewal before taking over. Shorter
    than the manager's worker lease (10 s), so a standby takes over before a worker fences."""
    renew_deadline: float = 6.0
    """How long the leader keeps trying to renew before it gives up leading."""
    retry_period: float = 1.0
    """How often to try to acquire or renew."""

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > 1.2 * self.retry_period:
            raise ValueError("need lease_duration > renew_deadline > 1.2 * retry_period")


class LeaderElector:
    def __init__(self, api: KubeApi, config: LeaderElectionConfig) -> None:
        self.api = api
        self.config = config
        self.observer = lease.LeaseObserver()
        self._is_leader = False
        self.on_leading_changed: list[Callable[[bool], None]] = []
        """Called with the new value whenever ``is_leader`` changes (the metrics' replica
        role and ``leader_election_master_status``)."""
        self.known = asyncio.Event()
        """Set while we know who leads (us or someone else): /readyz waits for it. Cleared
        when leadership is lost, until the Lease is read again."""
        self.terms = 0
        """Terms this replica began leading, in this process."""

    @property
    def is_leader(self) -> bool:
        return self._is_leader

    @is_leader.setter
    def is_leader(self, leading: bool) -> None:
        changed = leading != self._is_leader
        self._is_leader = leading
        if changed:
            for hook in self.on_leading_changed:
                try:
                    hook(leading)
                except Exception:  # a metrics hook must never break the election
                    log.exception("%s: leadership hook %r failed", self.config.identity, hook)

    @property
    def leader(self) -> str | None:
        record = self.observer.record
        return record.holder if record and record.holder else None

    async def _try_acquire_or_renew(self) -> bool:
        cfg = self.config
        record, current = await lease.read(self.api, cfg.namespace, cfg.name)
        self.observer.observe(record)
        # Who leads is known once another holds the Lease, or once our write of it stands:
        # a Lease not there yet (or lapsed) whose write fails says nothing (/readyz waits).
        if self.observer.held_by_other(cfg.identity):
            self.known.set()
            return False
        now = lease.micro_time()
        if record is not None and record.holder == cfg.identity:
            new = replace(record, renew_time=now, duration_seconds=int(cfg.lease_duration))
        else:
            new = lease.LeaseRecord(
                holder=cfg.identity,
                duration_seconds=int(cfg.lease_duration),
                renew_time=now,
                acquire_time=now,
                transitions=(record.transitions + 1) if record else 0,
            )
        try:
            written = await lease.write(self.api, cfg.namespace, cfg.name, new, current)
        except (errors.Conflict, errors.AlreadyExists):
            return False
        self.observer.observe(lease.LeaseRecord.from_lease(written))
        self.known.set()
        return True

    async def _attempt(self, within: float) -> bool:
        try:
            async with asyncio.timeout(within):
                return await self._try_acquire_or_renew()
        except (errors.KubeError, TimeoutError) as err:
            # A timeout has no message of its own: say what timed out.
            why = str(err) or f"no answer within {within:.1f}s"
            log.info("leader election %s: %s", self.config.name, why)
            return False

    def _jittered(self, period: float) -> float:
        return period * random.uniform(1.0, 1.2)

    async def acquire(self) -> None:
        # An attempt may take as long as a renewal may: on a busy machine an API server that
        # answers in 3 s is slow, not away, and cutting every attempt at 2 s once kept a
        # replica standing by for 8 minutes with nobody else to lead (docs/sizing.md).
        within = self.config.renew_deadline
        while not await self._attempt(within):  # noqa: ASYNC110 - polling is the algorithm
            await asyncio.sleep(self._jittered(self.config.retry_period))
        self.is_leader = True
        self.terms += 1
        cfg = self.config
        if self.terms == 1:
            log.info("%s became leader of %s/%s", cfg.identity, cfg.namespace, cfg.name)
        else:
            log.warning(
                "%s leading again: holds %s/%s (term %d of this process)",
                cfg.identity,
                cfg.namespace,
                cfg.name,
                self.terms,
            )

    async def _renew_until_lost(self) -> None:
        """Renew every ``retry_period``; give up when no renewal succeeded within
        ``renew_deadline``. As client-go's, an attempt may take until that deadline: an API
        server slow to answer (a busy machine) is not a lost lease, and a renewal written
        before the deadline is still inside the lease others see."""
        last_renewal = time.monotonic()
        while True:
            await asyncio.sleep(self.config.retry_period)
            left = self.config.renew_deadline - (time.monotonic() - last_renewal)
            if left > 0 and await self._attempt(left):
                last_renewal = time.monotonic()
            elif time.monotonic() - last_renewal >= self.config.renew_deadline:
                log.warning(
                    "%s: leadership lost (no renewal for %.1fs); standing by",
                    self.config.identity,
                    time.monotonic() - last_renewal,
                )
                return

    async def release(self) -> None:
        cfg = self.config
        with contextlib.suppress(errors.KubeError, TimeoutError):
            async with asyncio.timeout(2):
                record, current = await lease.read(self.api, cfg.namespace, cfg.name)
                if record is not None and record.holder == cfg.identity:
                    await lease.write(
                        self.api,
                        cfg.namespace,
                        cfg.name,
                        replace(
                            record, holder="", duration_seconds=1, renew_time=lease.micro_time()
                        ),
                        current,
                    )
        self.is_leader = False

    def _stand_by(self) -> None:
        """Back to a standby that does not know who leads: our own record has lapsed, and
        another replica may hold the Lease by now; the next read says."""
        self.is_leader = False
        self.known.clear()
        self.observer.observe(None)

    @contextlib.asynccontextmanager
    async def _said_if_slow_to_stop(self, leading: asyncio.Task[None]) -> AsyncIterator[None]:
        """While the leader's work is stopping, say every ``STOP_WARNING`` seconds that it
        has not stopped yet, and where it waits: this replica leads again only after."""

        async def warn() -> None:
            waited = 0.0
            while True:
                await asyncio.sleep(STOP_WARNING)
                waited += STOP_WARNING
                where = "".join(
                    f"\n  {f.f_code.co_filename}:{f.f_lineno} {f.f_code.co_name}"
                    for f in leading.get_stack()
                )
                log.error(
                    "%s: the leader's work has not stopped after %.0fs; it waits in:%s",
                    self.config.identity,
                    waited,
                    where or " (unknown)",
                )

        watchdog = asyncio.create_task(warn(), name="stop-watchdog")
        try:
            yield
        finally:
            await stop_tasks([watchdog])

    async def _lead_one_term(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> bool:
        """Run ``lead()`` while renewing. True when leadership was lost; False when
        ``lead()`` ended on its own (a failure, logged). Either way ``lead()`` has stopped
        when this returns: it can never act as leader past its term."""
        leading = asyncio.create_task(lead(), name="leading")
        renewing = asyncio.create_task(self._renew_until_lost(), name="renewing")
        try:
            await asyncio.wait({leading, renewing}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            # Not the leader from here on, even while lead() is still stopping: /readyz and
            # the dashboard say so at once. Also on a cancel (SIGTERM).
            self.is_leader = False
            async with self._said_if_slow_to_stop(leading):
                await stop_tasks([leading, renewing])
        if renewing.done() and not renewing.cancelled():
            if (err := renewing.exception()) is None:
                return True  # lost, whatever lead() did meanwhile
            log.error("%s: renewing failed: %r", self.config.identity, err, exc_info=err)
            return False
        if leading.cancelled():
            log.error("%s: leading was cancelled from within", self.config.identity)
        elif (err := leading.exception()) is not None:
            log.error("%s: leading failed: %r", self.config.identity, err, exc_info=err)
        else:
            log.error("%s: leading ended on its own", self.config.identity)
        return False

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Lead whenever this replica holds the Lease, until cancelled (module docstring)."""
        # After lead() failed: a growing, jittered, capped pause before trying to lead again.
        failures = Backoff(initial=self.config.retry_period, cap=30.0)
        try:
            while True:
                await self.acquire()
                began = time.monotonic()
                lost = await self._lead_one_term(lead)
                if lost or time.monotonic() - began > failures.cap:
                    failures.reset()  # a term that ran well is no repeated failure
                if lost:
                    self._stand_by()
                    log.info("%s: the leader's work stopped; standing by", self.config.identity)
                    continue
                # Give the Lease up: another replica may lead while this one backs off.
                await self.release()
                self._stand_by()
                delay = failures.next_delay()
                log.warning(
                    "%s standing by; trying to lead again in %.1fs", self.config.identity, delay
                )
                await asyncio.sleep(delay)
        except asyncio.CancelledError:
            await self.release()
            raise
