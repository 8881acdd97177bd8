"""Leader election on a coordination.k8s.io Lease (client-go's algorithm), so that several
manager replicas can run and exactly one of them acts.

``run(lead)`` blocks: it acquires the Lease (retrying every ``retry_period``, jittered), runs
``lead()`` while it keeps renewing, and returns when leadership is lost (``lead`` is cancelled
first); the caller should then exit, as controller-runtime does, and start afresh. When
cancelled (SIGTERM), it releases the Lease so a standby takes over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from typing import Any

from manager.kube import errors, lease
from manager.kube.api import KubeApi

log = logging.getLogger(__name__)


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
        self.is_leader = False
        self.known = asyncio.Event()
        """Set once we know who leads (us or someone else): /readyz waits for it."""

    @property
    def leader(self) -> str | None:
        record = self.observer.record
        return record.holder if record and record.holder else None

    async def _try_acquire_or_renew(self) -> bool:
        cfg = self.config
        record, current = await lease.read(self.api, cfg.namespace, cfg.name)
        self.observer.observe(record)
        self.known.set()
        if self.observer.held_by_other(cfg.identity):
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
        within = self.config.retry_period * 2
        while not await self._attempt(within):  # noqa: ASYNC110 - polling is the algorithm
            await asyncio.sleep(self._jittered(self.config.retry_period))
        self.is_leader = True
        log.info(
            "%s became leader of %s/%s",
            self.config.identity,
            self.config.namespace,
            self.config.name,
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
                    "%s lost leadership (no renewal for %.1fs)",
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

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        try:
            await self.acquire()
        except asyncio.CancelledError:
            await self.release()
            raise
        leading = asyncio.create_task(lead(), name="leading")
        renewing = asyncio.create_task(self._renew_until_lost(), name="renewing")
        try:
            await asyncio.wait({leading, renewing}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            await _cancel(leading, renewing)
            await self.release()
            raise
        await _cancel(leading, renewing)
        self.is_leader = False
        if not leading.cancelled() and leading.exception() is not None:
            raise leading.exception()  # type: ignore[misc]


async def _cancel(*tasks: asyncio.Task[None]) -> None:
    """Stop ``tasks`` and raise the first one's failure; a cancel of the caller propagates
    (``asyncio.wait`` never swallows it, unlike suppressing CancelledError around ``await``)."""
    for task in tasks:
        task.cancel()
    await asyncio.wait(tasks)
    for task in tasks:
        if not task.cancelled() and (err := task.exception()) is not None:
            raise err
