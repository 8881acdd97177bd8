"""A client-side rate limit: at most ``rate`` grants per second on average, after a burst.

client-go's token bucket, as a schedule: each grant says how long its caller waits, so callers
queue in the order they asked and none is refused. Used for the API clients' ``qps``/``burst``
(Kueue's ``clientConnection``) and for writes that only inform people (pending reasons).
"""

from __future__ import annotations

import time


class Pacer:
    """At most ``rate`` grants per second on average, with bursts of up to ``burst``; a rate
    of 0 or below grants everything at once (no limit)."""

    def __init__(self, rate: float, burst: int) -> None:
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.burst = max(1, burst)
        self._next = float("-inf")  # the next grant's time; starts with a full burst

    @property
    def limited(self) -> bool:
        return self.interval > 0

    def delay(self) -> float:
        """Take a grant; returns how long to wait before using it."""
        if not self.interval:
            return 0.0
        now = time.monotonic()
        self._next = max(self._next, now - (self.burst - 1) * self.interval)
        wait = max(0.0, self._next - now)
        self._next += self.interval
        return wait
