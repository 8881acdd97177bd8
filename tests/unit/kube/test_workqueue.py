"""The work queue's promises: one entry per key, never two workers on one key, timers, and
per-key backoff."""

from __future__ import annotations

import asyncio

import pytest

from manager.kube.workqueue import QueueClosed, WorkQueue


async def test_a_key_waits_once_however_often_it_is_added() -> None:
    q = WorkQueue()
    for key in ["a", "b", "a", "a"]:
        q.add(key)
    assert len(q) == 2
    assert [await q.get(), await q.get()] == ["a", "b"]


async def test_a_key_added_while_in_flight_comes_back_after_done() -> None:
    q = WorkQueue()
    q.add("a")
    assert await q.get() == "a"
    q.add("a")
    assert len(q) == 0, "never handed to a second worker while in flight"
    q.done("a")
    assert await q.get() == "a"


async def test_add_after_keeps_the_earliest_time() -> None:
    q = WorkQueue()
    q.add_after("late", 30)
    q.add_after("soon", 0.05)
    q.add_after("late", 0.1)
    got = await asyncio.wait_for(q.get(), timeout=5)
    assert got == "soon"
    assert await asyncio.wait_for(q.get(), timeout=5) == "late"


async def test_retry_backs_off_per_key_and_forget_resets() -> None:
    q = WorkQueue(backoff_initial=0.01, backoff_cap=1.0)
    delays = [q.retry("a") for _ in range(5)]
    assert q.failures("a") == 5
    assert delays[-1] > delays[0]
    assert all(d <= 1.0 + 0.01 for d in delays), "capped (plus jitter)"
    q.forget("a")
    assert q.failures("a") == 0


async def test_close_wakes_idle_workers() -> None:
    q = WorkQueue()
    worker = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.close()
    with pytest.raises(QueueClosed):
        await asyncio.wait_for(worker, timeout=5)
