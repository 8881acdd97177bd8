"""Bounded, jittered retries, built on tenacity.

``retrying()`` is for single API calls: a few attempts, exponential backoff with jitter,
only for the error classes listed in ``errors.RETRYABLE``, honouring Retry-After.
``Backoff`` is for loops that must never give up (watches, reconnects): it uses tenacity's
jittered exponential wait, capped, driven by a failure counter the loop resets on success, so
that each new outage starts with a short delay again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential_jitter,
)

from manager.kube import errors

log = logging.getLogger(__name__)


def _wait_honouring_retry_after(initial: float, cap: float) -> Any:
    jittered = wait_exponential_jitter(multiplier=initial, max=cap, jitter=initial)

    def wait(state: RetryCallState) -> float:
        delay = jittered(state)
        outcome = state.outcome
        if outcome is not None and outcome.failed:
            err = outcome.exception()
            if isinstance(err, errors.KubeError) and err.retry_after:
                delay = max(delay, min(err.retry_after, cap))
        return delay

    return wait


def _log_attempt(state: RetryCallState) -> None:
    err = state.outcome.exception() if state.outcome else None
    log.debug("attempt #%d failed (%s); will retry", state.attempt_number, err)


def retrying(
    *, attempts: int = 5, deadline: float = 30.0, initial: float = 0.1, cap: float = 3.0
) -> AsyncRetrying:
    return AsyncRetrying(
        stop=stop_after_attempt(attempts) | stop_after_delay(deadline),
        wait=_wait_honouring_retry_after(initial, cap),
        retry=retry_if_exception_type(errors.RETRYABLE),
        before_sleep=_log_attempt,
        reraise=True,
    )


@dataclass
class Backoff:
    initial: float = 0.2
    cap: float = 10.0
    failures: int = 0
    _wait: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._wait = wait_exponential_jitter(
            multiplier=self.initial, max=self.cap, jitter=self.initial
        )

    def next_delay(self) -> float:
        """Record one more failure and return how long to wait before the next try."""
        self.failures += 1
        state = RetryCallState(retry_object=AsyncRetrying(), fn=None, args=(), kwargs={})
        state.attempt_number = self.failures
        return float(self._wait(state))

    def reset(self) -> None:
        self.failures = 0
