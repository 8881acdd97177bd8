"""The pending-status writer's pacer: a burst at once, then at most ``rate`` per second."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from manager.controllers import pendingstatus
from manager.controllers.pendingstatus import Pacer


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(pendingstatus, "time", SimpleNamespace(monotonic=fake))
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
