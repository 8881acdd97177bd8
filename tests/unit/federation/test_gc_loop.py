"""The garbage collection's loop outlives a sweep that fails (manager/federation/runtime.py):
in a full run a sweep met a worker connection closed under it, and its error ended the
loop and, through it, the whole federation (no worker was ever marked lost again)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, cast

import pytest

from manager.federation.runtime import FederationController
from manager.federation.settings import FederationSettings
from manager.kube import errors


class Sweeps:
    """A dispatcher's ``collect_garbage``: fails in the ways given, then counts clean sweeps."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.clean = asyncio.Event()

    async def collect_garbage(self) -> int:
        if self.failures:
            raise self.failures.pop(0)
        self.clean.set()
        return 0


async def test_a_failed_sweep_is_logged_and_the_next_one_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sweeps = Sweeps(RuntimeError("Session is closed"), errors.Unreachable("worker-2: timed out"))
    controller = cast(Any, FederationController.__new__(FederationController))
    controller.settings = dataclasses.replace(FederationSettings(), gc_interval=0.01)
    controller.dispatcher = sweeps
    loop = asyncio.create_task(controller._gc_loop())
    try:
        await asyncio.wait_for(sweeps.clean.wait(), timeout=5)
        assert not loop.done()
    finally:
        loop.cancel()
    assert "garbage collection failed" in caplog.text and "Session is closed" in caplog.text
