"""Process plumbing shared by the manager and the worker shim: logging, and running a main
coroutine until SIGTERM or SIGINT, then cancelling it so every ``finally`` runs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Coroutine
from typing import Any


def configure_logging(level: str = "INFO") -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


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
