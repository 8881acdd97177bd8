"""Wait on a condition with a deadline: the only way tests, the demo and drills wait.

A check returns a truthy value when the condition holds (that value is returned) and a falsy
one otherwise; it may be sync or async. Exceptions from the check propagate unless listed in
``ignore`` (e.g. connection errors while a cluster restarts).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")


class WaitTimeout(TimeoutError):
    """The condition did not hold before the deadline; names what was awaited and the last value."""


@overload
async def wait_for(
    check: Callable[[], Awaitable[T]],
    *,
    timeout: float,
    what: str,
    interval: float = ...,
    ignore: tuple[type[BaseException], ...] = ...,
) -> T: ...


@overload
async def wait_for(
    check: Callable[[], T],
    *,
    timeout: float,
    what: str,
    interval: float = ...,
    ignore: tuple[type[BaseException], ...] = ...,
) -> T: ...


async def wait_for(
    check: Callable[[], Any],
    *,
    timeout: float,
    what: str,
    interval: float = 0.1,
    ignore: tuple[type[BaseException], ...] = (),
) -> Any:
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            result = check()
            if inspect.isawaitable(result):
                result = await result
            last = result
            if result:
                return result
        except ignore as err:
            last = err
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:.1f}s waiting for {what} (last: {last!r})")
        await asyncio.sleep(interval)


def wait_for_sync(
    check: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.1,
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            result = check()
            last = result
            if result:
                return result
        except ignore as err:
            last = err
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:.1f}s waiting for {what} (last: {last!r})")
        time.sleep(interval)
