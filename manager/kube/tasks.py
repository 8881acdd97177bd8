"""Waiting and stopping in asyncio without losing a cancellation.

Two patterns that look right lose a ``Task.cancel()`` on Python 3.11, and a lost cancel
hangs whoever waits for the task to end (a test's teardown, a process on SIGTERM):

- ``asyncio.wait_for(event.wait(), timeout)``: when the event fires in the same loop
  iteration as the cancel, 3.11's ``wait_for`` returns the result and drops the
  cancellation, so a ``while True`` loop around it never stops. ``wait_event`` waits under
  ``asyncio.timeout()`` instead, which tells its own timeout from a cancel from outside.
- ``task.cancel()`` then ``with suppress(CancelledError): await task``: when the *caller*
  is cancelled during that await, its own CancelledError is suppressed too. ``stop_tasks``
  swallows only the stopped tasks' cancellations, never the caller's; and it does not cancel
  a task twice (``gather`` already cancelled it), which would cut short its own clean-up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

log = logging.getLogger(__name__)


async def wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait until ``event`` is set or ``timeout`` seconds pass (None: no limit); True when
    set. A cancel of the caller always propagates."""
    if event.is_set():
        return True
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return event.is_set()
    return True


async def stop_tasks(tasks: Iterable[asyncio.Task[object]]) -> None:
    """Cancel ``tasks`` and wait until every one has ended. Their own cancellations are
    expected and swallowed. A task already being cancelled (``asyncio.gather`` cancels its
    children when it is cancelled) is not cancelled again: a second cancel would interrupt
    its own clean-up. If the caller itself is cancelled meanwhile, the tasks are still waited
    for, and then the caller's cancellation propagates."""
    pending = [task for task in tasks if not task.done()]
    for task in pending:
        if not task.cancelling():
            task.cancel()
    if not pending:
        return
    cancelled = False
    while True:
        try:
            await asyncio.wait(pending)
            break
        except asyncio.CancelledError:
            cancelled = True  # finish stopping what we started to stop, then propagate
    for task in pending:
        if not task.cancelled() and (err := task.exception()) is not None:
            # Stopping must go on for the others: say what failed, never re-raise it here.
            log.error("task %s failed while stopping: %r", task.get_name(), err, exc_info=err)
    if cancelled:
        raise asyncio.CancelledError
