"""Wait on a condition with a deadline: the only way tests, the demo and drills wait.

A check returns a truthy value when the condition holds (that value is returned) and a falsy
one otherwise; it may be sync or async. Exceptions from the check propagate unless listed in
``ignore`` (e.g. connection errors while a cluster restarts).

A deadline is a bound on a wait that should end much sooner, never a measure of speed: the
test suite stretches every one by ``$KFED_DEADLINE_SCALE`` (tests/conftest.py), so that a slow
machine under three test processes' load fails no test that would pass on a quiet one. A wait
that holds returns as soon as it holds, whatever its deadline.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")


DEADLINE_SCALE_ENV = "KFED_DEADLINE_SCALE"


def deadline_scale() -> float:
    """The factor every deadline is stretched by: ``$KFED_DEADLINE_SCALE``, else 1."""
    raw = os.environ.get(DEADLINE_SCALE_ENV, "")
    try:
        scale = float(raw) if raw else 1.0
    except ValueError:
        raise ValueError(f"${DEADLINE_SCALE_ENV} must be a number, not {raw!r}") from None
    if scale <= 0:
        raise ValueError(f"${DEADLINE_SCALE_ENV} must be positive, not {raw!r}")
    return scale


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
    timeout *= deadline_scale()
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
    timeout *= deadline_scale()
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
