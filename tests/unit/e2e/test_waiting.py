"""Deadlines stretch by $KFED_DEADLINE_SCALE; a wait that holds returns at once."""

from __future__ import annotations

import pytest

from e2e import waiting
from e2e.waiting import WaitTimeout, wait_for, wait_for_sync


async def test_a_deadline_is_stretched_by_the_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(waiting.DEADLINE_SCALE_ENV, "3")
    with pytest.raises(WaitTimeout, match=r"timed out after 0\.3s waiting for never"):
        await wait_for(lambda: False, timeout=0.1, what="never", interval=0.01)
    with pytest.raises(WaitTimeout, match=r"timed out after 0\.3s waiting for never"):
        wait_for_sync(lambda: False, timeout=0.1, what="never", interval=0.01)


async def test_a_wait_that_holds_returns_its_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(waiting.DEADLINE_SCALE_ENV, "1000")
    assert await wait_for(lambda: "here", timeout=1, what="here") == "here"


@pytest.mark.parametrize("raw", ["fast", "0", "-1"])
def test_a_bad_scale_is_refused_saying_so(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv(waiting.DEADLINE_SCALE_ENV, raw)
    with pytest.raises(ValueError, match="KFED_DEADLINE_SCALE"):
        waiting.deadline_scale()


def test_unset_means_the_deadline_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(waiting.DEADLINE_SCALE_ENV, raising=False)
    assert waiting.deadline_scale() == 1.0
