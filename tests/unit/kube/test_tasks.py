"""Waiting and stopping keep every cancellation (manager/kube/tasks.py).

The first test shows the Python 3.11 behaviour the module exists for: a loop around
``asyncio.wait_for(event.wait(), t)`` swallows a cancel that arrives as the event fires, and
never ends. That is how scenario F's registry hung its test's teardown.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

import pytest

from manager.kube.tasks import stop_tasks, wait_event


async def _cancel_as_the_event_fires(wait: object) -> bool:
    """Run a loop waiting on an event with ``wait``; set the event and cancel the loop in
    the same iteration; True when the loop ended."""
    event = asyncio.Event()

    async def loop() -> None:
        while True:
            await wait(event)  # type: ignore[operator]
            event.clear()

    task = asyncio.create_task(loop())
    await asyncio.sleep(0.01)
    event.set()
    await asyncio.sleep(0)  # the event's waiter completes; the loop's wake-up is queued
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2)
    if not done:
        task.cancel()
        await asyncio.wait({task}, timeout=2)
    return bool(done)


async def _wait_for(event: asyncio.Event) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), 1.0)


async def _wait_event(event: asyncio.Event) -> None:
    await wait_event(event, 1.0)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12 rewrote wait_for on timeouts")
async def test_wait_for_loses_a_cancel_that_arrives_as_the_event_fires_on_311() -> None:
    assert not await _cancel_as_the_event_fires(_wait_for)


async def test_wait_event_keeps_a_cancel_that_arrives_as_the_event_fires() -> None:
    assert await _cancel_as_the_event_fires(_wait_event)


async def test_wait_event_returns_whether_the_event_was_set() -> None:
    event = asyncio.Event()
    assert await wait_event(event, 0.01) is False
    event.set()
    assert await wait_event(event, 0.01) is True
    event.clear()
    asyncio.get_running_loop().call_later(0.01, event.set)
    assert await wait_event(event, None) is True


async def test_stop_tasks_keeps_the_callers_own_cancel() -> None:
    stubborn_started = asyncio.Event()

    async def slow_to_stop() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            stubborn_started.set()
            await asyncio.shield(asyncio.sleep(0.2))  # takes a while to clean up

    child = asyncio.create_task(slow_to_stop())
    await asyncio.sleep(0)

    async def stopper() -> str:
        await stop_tasks([child])
        return "went on after being cancelled"

    outer = asyncio.create_task(stopper())
    await stubborn_started.wait()
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    await asyncio.wait({child})


async def test_stop_tasks_waits_for_every_task_and_survives_one_failing() -> None:
    ended: list[str] = []

    async def ends(name: str, fail: bool) -> None:
        try:
            await asyncio.sleep(60)
        finally:
            ended.append(name)
            if fail:
                raise RuntimeError("broken while stopping")

    tasks = [asyncio.create_task(ends(n, n == "b")) for n in "abc"]
    await asyncio.sleep(0)
    await stop_tasks(tasks)
    assert sorted(ended) == ["a", "b", "c"]
    assert all(t.done() for t in tasks)


async def test_a_child_that_gather_already_cancelled_is_not_cancelled_again() -> None:
    """``gather`` cancels its children when its caller is cancelled; stopping them again in
    the caller's ``finally`` must not interrupt their own clean-up (closing sessions)."""
    cleaned: list[bool] = []

    async def child() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(0.05)  # clean-up that awaits, like closing a client session
            cleaned.append(True)

    started = asyncio.Event()

    async def parent() -> None:
        task = asyncio.create_task(child())
        try:
            started.set()
            await asyncio.gather(task)
        finally:
            await stop_tasks([task])

    outer = asyncio.create_task(parent())
    await started.wait()
    await asyncio.sleep(0)
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert cleaned == [True]
