"""The elector's loop of terms: a replica whose API server goes away for longer than the
renew deadline stops everything it ran as leader, stands by, and leads again once it wins
the Lease back, in the same process (before, ``run`` returned and the manager exited). A
failing ``lead()`` gives the Lease up and is tried again, backing off; a cancel (SIGTERM)
stops the leader's work and releases the Lease, whatever the state. The Lease itself is
tested on a real API server (integration/kube/test_leader, test_manager_standby)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import cast

import pytest

from e2e.waiting import wait_for
from manager.kube import errors
from manager.kube.api import KubeApi
from manager.kube.leader import LeaderElectionConfig, LeaderElector
from manager.kube.lease import LeaseRecord
from manager.observability.sources import ManagerSource
from manager.telemetry.metrics import Metrics

CONFIG = LeaderElectionConfig(
    namespace="kfed-system",
    name="kfed-manager",
    identity="a",
    lease_duration=0.8,
    renew_deadline=0.5,
    retry_period=0.1,
)


class FakeLease(LeaderElector):
    """A Lease on an API server that is up (every attempt wins) or away (every attempt fails
    as a refused connection would); ``release`` is counted, not written."""

    def __init__(self) -> None:
        super().__init__(cast(KubeApi, None), CONFIG)
        self.up = True
        self.releases = 0
        self.attempts = 0

    async def _try_acquire_or_renew(self) -> bool:
        self.attempts += 1
        if not self.up:
            raise errors.Unreachable("manager: ClientConnectorError: connection refused")
        self.observer.observe(LeaseRecord(CONFIG.identity, 1, "", "", 0))
        self.known.set()
        return True

    async def release(self) -> None:
        self.releases += 1
        self.is_leader = False


class Terms:
    """A ``lead()`` that counts its terms and, per term, its ticks (as worker lease renewals
    would), and records when each term stopped."""

    def __init__(self, fail_first: int = 0) -> None:
        self.started = 0
        self.stopped = 0
        self.ticks: list[int] = []
        self.fail_first = fail_first

    async def lead(self) -> None:
        self.started += 1
        term = self.started
        self.ticks.append(0)
        try:
            if term <= self.fail_first:
                raise RuntimeError(f"term {term} fails")
            while True:
                self.ticks[term - 1] += 1
                await asyncio.sleep(0.02)
        finally:
            self.stopped += 1


def role(elector: LeaderElector) -> tuple[bool, bool, str | None]:
    """Leading, knowing who leads, and who (as /readyz and the dashboard show them)."""
    return elector.is_leader, elector.known.is_set(), elector.leader


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_losing_the_lease_stops_the_term_and_the_same_process_leads_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="manager.kube.leader")
    elector, terms = FakeLease(), Terms()
    task = asyncio.create_task(elector.run(terms.lead))
    try:
        await wait_for(lambda: terms.started == 1 and terms.ticks[0] > 3, timeout=5, what="lead")
        assert role(elector) == (True, True, "a")

        elector.up = False  # its API server goes away
        await wait_for(lambda: terms.stopped == 1, timeout=5, what="the first term stopped")
        assert not task.done(), "run() must not return when leadership is lost"
        assert role(elector) == (False, False, None), "stale: not leading, nor knowing who"
        ticks = terms.ticks[0]

        async def standing_by_through_the_outage() -> bool:
            # Several failed attempts to take the lead again while the API server is away.
            return caplog.text.count("connection refused") >= 8

        await wait_for(standing_by_through_the_outage, timeout=10, what="attempts to lead")
        assert terms.ticks[0] == ticks, "the lost term still acted"
        assert terms.started == 1 and role(elector)[0] is False and not task.done()

        elector.up = True  # back
        await wait_for(lambda: terms.started == 2, timeout=5, what="a second term")
        assert role(elector) == (True, True, "a") and elector.terms == 2
        await wait_for(lambda: terms.ticks[1] > 3, timeout=5, what="the second term acts")
        assert terms.ticks[0] == ticks, "only the current term acts"
        assert elector.releases == 0, "a lost Lease is never released: it may be another's"
        assert "a: leadership lost" in caplog.text and "standing by" in caplog.text
        assert "a leading again" in caplog.text
    finally:
        await _stop(task)
    assert terms.stopped == 2 and elector.releases == 1


async def test_a_failing_lead_gives_the_lease_up_and_is_tried_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    elector, terms = FakeLease(), Terms(fail_first=2)
    task = asyncio.create_task(elector.run(terms.lead))
    try:
        await wait_for(lambda: terms.started == 3, timeout=10, what="a third term")
        await wait_for(lambda: terms.ticks[2] > 3, timeout=5, what="the third term acts")
        assert elector.is_leader and not task.done()
        assert elector.releases == 2, "each failed term gives the Lease up"
        assert caplog.text.count("leading failed: RuntimeError") == 2
    finally:
        await _stop(task)


async def test_sigterm_while_standing_by_releases_and_ends() -> None:
    elector, terms = FakeLease(), Terms()
    elector.up = False  # the API server is not up at start-up
    task = asyncio.create_task(elector.run(terms.lead))
    await wait_for(lambda: elector.attempts >= 2, timeout=5, what="attempts to lead")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert terms.started == 0 and elector.releases == 1


async def test_sigterm_while_leading_stops_the_term_then_releases() -> None:
    elector, terms = FakeLease(), Terms()
    task = asyncio.create_task(elector.run(terms.lead))
    await wait_for(lambda: terms.started == 1, timeout=5, what="lead")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert terms.stopped == 1 and elector.releases == 1 and not elector.is_leader


async def test_readiness_and_dashboard_follow_the_terms() -> None:
    """/readyz and the dashboard: the leader while it leads; after a loss, a standby that
    does not claim to know who leads (not itself), and no federation shown."""
    elector, terms = FakeLease(), Terms()
    source = ManagerSource(Metrics(), identity="a", elector=elector)
    task = asyncio.create_task(elector.run(terms.lead))
    try:
        await wait_for(lambda: elector.is_leader, timeout=5, what="lead")
        assert source.snapshot().is_leader and source.leader == "a"
        elector.up = False
        await wait_for(lambda: terms.stopped == 1, timeout=5, what="the term stopped")
        assert source.readiness() == (False, "standby: leadership lost, the Lease not read since")
        snapshot = source.snapshot()
        assert (snapshot.is_leader, snapshot.leader) == (False, None)
        registry = source.metrics.registry

        def multikueue_samples() -> int:
            return sum(len(m.samples) for m in registry.collect() if "multikueue" in m.name)

        source.metrics.set_multikueue_clusters([("cq", "w1", "True")])  # the last term's
        assert multikueue_samples() > 0
        source.refresh_metrics()
        assert registry.get_sample_value("kfed_leader", {"identity": "a"}) == 0
        assert multikueue_samples() == 0, "a standby shows no state of its lost term"
        elector.up = True
        await wait_for(lambda: terms.started == 2, timeout=5, what="a second term")
        assert source.snapshot().is_leader
    finally:
        await _stop(task)


class SlowLease(FakeLease):
    """A Lease on an API server that answers, but slower than two retry periods (a busy
    machine), as long as a renewal may take."""

    async def _try_acquire_or_renew(self) -> bool:
        await asyncio.sleep(CONFIG.retry_period * 3)
        return await super()._try_acquire_or_renew()


async def test_a_slow_api_server_is_no_reason_to_stand_by_for_ever() -> None:
    """Found at a load of 16 (docs/sizing.md): every acquire attempt was cut at 2 retry
    periods, so a replica whose API server answered in 3 never led again."""
    elector = SlowLease()
    await asyncio.wait_for(elector.acquire(), timeout=5)
    assert elector.is_leader and elector.terms == 1


async def test_a_leaders_work_slow_to_stop_is_said_with_where_it_waits(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lost term whose work does not stop keeps this replica from leading again (it must
    never act twice): the log says so, and where that work waits, instead of silence."""
    monkeypatch.setattr("manager.kube.leader.STOP_WARNING", 0.05)
    caplog.set_level(logging.INFO, logger="manager.kube.leader")
    elector, release = FakeLease(), asyncio.Event()

    async def stubborn_shutdown() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await release.wait()  # its clean-up hangs until released

    task = asyncio.create_task(elector.run(stubborn_shutdown))
    try:
        await wait_for(lambda: elector.is_leader, timeout=5, what="leading")
        elector.up = False
        await wait_for(
            lambda: "has not stopped after" in caplog.text, timeout=5, what="the warning"
        )
        assert "stubborn_shutdown" in caplog.text, "the warning names where the work waits"
        assert elector.terms == 1
    finally:
        release.set()
        await _stop(task)
