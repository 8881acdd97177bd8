"""Process plumbing shared by the manager and the worker shim: logging, the garbage
collector's pace, and running a main coroutine until SIGTERM or SIGINT, then cancelling it so
every ``finally`` runs."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from collections.abc import Coroutine
from typing import Any


def configure_logging(level: str = "INFO") -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


YOUNG_COLLECTION_EVERY = 10_000
"""Container allocations (net of frees) between two collections of the youngest generation;
CPython's default is 700."""


def pace_garbage_collector(young_every: int = YOUNG_COLLECTION_EVERY) -> None:
    """Collect cycles less often than CPython's defaults do.

    A controller holds every object it watches and replaces one with each event, so most of
    what it allocates lives long, and the defaults scan the whole heap every ~70,000 net
    allocations: under upstream's scheduler benchmark (15,000 Workloads) the collector took
    24 % of the controller's CPU, in 31 full collections of ~0.4 s each, every one a stall
    of the event loop. Fourteen times fewer young collections make the older generations'
    turns that much rarer too (each waits for ten of the generation below): in the same
    benchmark the collector's share fell to ~10 %, with one full collection in the run
    (measured with ``gc.callbacks``; docs/performance.md). Garbage without cycles is
    freed at once either way (reference counting); only cycles wait longer."""
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(young_every, older, oldest)


async def run_until_signalled(main: Coroutine[Any, Any, None]) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    task = asyncio.create_task(main, name="main")
    stopper = asyncio.create_task(stop.wait(), name="signals")
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (task, stopper):
            t.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stopper
        with contextlib.suppress(asyncio.CancelledError):
            await task
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
