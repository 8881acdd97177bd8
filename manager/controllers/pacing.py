"""How soon the next scheduling cycle may run, paced as Kueue paces its own scheduler
(``wait.UntilWithBackoff`` around ``Scheduler.schedule``): at once after a cycle that
admitted something; after a cycle that admitted nothing (every head stays pending, or only
preempts), a pause that doubles from 1 ms up to 100 ms until a cycle admits again.

Without it a backlog nobody can admit is walked head by head as fast as the CPU allows:
BestEffortFIFO evaluates the next head of every queue each cycle, and every release in a
cohort puts its whole backlog back in line. The pause costs at most 100 ms of latency
after a quiet spell; the events that can admit something (a release, a new workload) are
not lost meanwhile, only looked at after it."""

from __future__ import annotations

FIRST_PAUSE_SECONDS = 0.001
LONGEST_PAUSE_SECONDS = 0.1


class CyclePacing:
    def __init__(
        self, first: float = FIRST_PAUSE_SECONDS, longest: float = LONGEST_PAUSE_SECONDS
    ) -> None:
        self.first = first
        self.longest = longest
        self.pause = 0.0
        """Seconds to wait before the next cycle."""

    def after_cycle(self, admitted: bool) -> float:
        """Record how a cycle went; return the pause before the next one."""
        if admitted:
            self.pause = 0.0
        else:
            self.pause = min(self.longest, self.pause * 2 if self.pause else self.first)
        return self.pause
