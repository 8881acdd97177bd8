"""The client-side rate limit (API clients' qps/burst, pending-status writes): a burst at
once, then at most ``rate`` per second."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from manager.kube import pacing
from manager.kube.api import KubeApi
from manager.kube.pacing import Pacer


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(pacing, "time", SimpleNamespace(monotonic=fake))
    return fake


def test_a_burst_goes_at_once_then_grants_are_spaced(clock: Clock) -> None:
    pacer = Pacer(rate=10.0, burst=3)

    assert [pacer.delay() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert pacer.delay() == pytest.approx(0.1)
    assert pacer.delay() == pytest.approx(0.2)


def test_idle_time_refills_the_burst_but_no_more(clock: Clock) -> None:
    pacer = Pacer(rate=10.0, burst=3)
    for _ in range(5):
        pacer.delay()

    clock.now += 60.0

    assert [pacer.delay() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert pacer.delay() == pytest.approx(0.1)


def test_no_rate_means_no_waiting(clock: Clock) -> None:
    pacer = Pacer(rate=0.0, burst=1)

    assert [pacer.delay() for _ in range(100)] == [0.0] * 100


async def test_a_rate_limited_client_makes_requests_wait_their_turn(clock: Clock) -> None:
    """``KubeApi.limit_rate`` (Kueue's clientConnection): past the burst each request waits
    for its grant before it is sent; no limit sends at once."""
    sent: list[str] = []

    class Client:
        configuration = SimpleNamespace(host="https://127.0.0.1:6443")

    class Recording(KubeApi):
        async def _http(self, method: str, path: str, *_: object) -> Any:
            sent.append(path)
            return SimpleNamespace(status=200, read=_empty, release=lambda: None)

    api = Recording(cast(Any, Client()), name="paced")
    for _ in range(3):
        await api.request("GET", "/api")
    assert api.paced_seconds == 0.0

    api.limit_rate(10.0, 2)
    for _ in range(4):
        await api.request("GET", "/api")
    assert len(sent) == 7
    assert api.paced_seconds == pytest.approx(0.1 + 0.2)  # grants 3 and 4 of a burst of 2


async def _empty() -> bytes:
    return b"{}"
