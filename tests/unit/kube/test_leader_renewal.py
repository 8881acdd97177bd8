"""The leader's renewals, timed as client-go's: an attempt may take until the renew deadline
(a slow API server on a busy machine keeps its leader), and leadership is given up once no
renewal succeeded within it. Lost here before: each attempt was cut at twice the retry
period, and the manager of the 20-worker scale point gave up leading while its API server
was only slow. The Lease itself is tested on a real API server (integration/kube/test_leader)."""

from __future__ import annotations

import asyncio
import time
from typing import cast

from e2e.waiting import wait_for
from manager.kube.api import KubeApi
from manager.kube.leader import LeaderElectionConfig, LeaderElector

CONFIG = LeaderElectionConfig(
    namespace="kfed-system",
    name="kfed-manager",
    identity="a",
    lease_duration=3,
    renew_deadline=2,
    retry_period=0.3,
)


class Answering(LeaderElector):
    """Renewals that succeed after ``delay`` seconds (None: never answer)."""

    def __init__(self, delay: float | None) -> None:
        super().__init__(cast(KubeApi, None), CONFIG)
        self.delay = delay
        self.renewed = 0

    async def _try_acquire_or_renew(self) -> bool:
        if self.delay is None:
            await asyncio.Event().wait()
        await asyncio.sleep(self.delay or 0)
        self.renewed += 1
        return True


async def test_renewals_slower_than_twice_the_retry_period_keep_the_lead() -> None:
    elector = Answering(delay=1.0)  # > 2 x retry_period, < renew_deadline
    task = asyncio.create_task(elector._renew_until_lost())
    try:

        async def renewed_four_times_and_still_leading() -> bool:
            assert not task.done(), "gave up leading though every renewal succeeded in time"
            return elector.renewed >= 4

        await wait_for(renewed_four_times_and_still_leading, timeout=15, what="4 renewals")
    finally:
        task.cancel()


async def test_no_answer_within_the_renew_deadline_gives_up_the_lead() -> None:
    elector = Answering(delay=None)
    started = time.monotonic()

    async with asyncio.timeout(10):
        await elector._renew_until_lost()

    assert time.monotonic() - started >= CONFIG.renew_deadline
    assert elector.renewed == 0
