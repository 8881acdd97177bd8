"""When the workloads of a lost worker may run elsewhere: the one failover timing.

Pure: the connection facts and the settings in, a monotonic moment out. The dispatcher (when
to move a workload, how long to wait before looking again) and the manager's eviction (may a
copy still run there?) both ask this one function, so they can never disagree.
"""

from __future__ import annotations

from manager.federation.settings import FailoverPolicy, FederationSettings


def may_move_at(
    settings: FederationSettings,
    policy: FailoverPolicy,
    *,
    could_fence: bool,
    last_renew_start: float | None,
    lost_since: float | None,
    now: float,
) -> float:
    """The moment (monotonic) from which a lost worker's copy has surely stopped.

    - A worker whose shim was alive fences a copy after the copy's fence-after time without
      a renewal: the lease duration (fast) or the outage timeout (at-most-once). Counted from
      the start of the last renewal that may have reached it (else from the loss), plus the
      request timeout (that renewal may have landed late) and the grace for pods to stop.
    - A worker that cannot fence (no shim, or its shim was gone): the outage timeout from
      the first failure, whatever the policy.
    - Not lost yet (``lost_since`` None): counted from ``now``, so never "already".
    """
    lost = lost_since if lost_since is not None else now
    if not could_fence:
        return lost + settings.worker_lost_timeout
    start = last_renew_start if last_renew_start is not None else lost
    if policy is FailoverPolicy.FAST:
        return start + settings.fenced_failover_after
    return start + settings.outage_failover_after
