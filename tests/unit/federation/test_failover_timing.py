"""The one failover timing (manager/federation/decisions/failover.py), as a table: for each
policy and each kind of lost worker, the moment its copy has surely stopped."""

from __future__ import annotations

import pytest

from manager.federation.decisions.failover import may_move_at
from manager.federation.settings import FailoverPolicy, FederationSettings

S = FederationSettings(
    request_timeout=5.0, lease_duration=10.0, fence_grace=4.0, worker_lost_timeout=300.0
)
FAST, ONCE = FailoverPolicy.FAST, FailoverPolicy.AT_MOST_ONCE


@pytest.mark.parametrize(
    ("policy", "could_fence", "last_renew", "lost", "expected"),
    [
        # A shim that can fence: from the last renewal that may have landed.
        (FAST, True, 100.0, 103.0, 100.0 + 5 + 10 + 4),
        (ONCE, True, 100.0, 103.0, 100.0 + 5 + 300 + 4),
        # Never renewed (lost before the first renewal): from the loss.
        (FAST, True, None, 103.0, 103.0 + 19),
        (ONCE, True, None, 103.0, 103.0 + 309),
        # No shim (upstream Kueue) or a dead one: the outage timeout, whatever the policy.
        (FAST, False, 100.0, 103.0, 103.0 + 300),
        (ONCE, False, 100.0, 103.0, 103.0 + 300),
    ],
    ids=[
        "fast-fencing",
        "once-fencing",
        "fast-never-renewed",
        "once-never-renewed",
        "fast-cannot-fence",
        "once-cannot-fence",
    ],
)
def test_when_a_lost_workers_copy_has_surely_stopped(
    policy: FailoverPolicy,
    could_fence: bool,
    last_renew: float | None,
    lost: float,
    expected: float,
) -> None:
    got = may_move_at(
        S, policy, could_fence=could_fence, last_renew_start=last_renew, lost_since=lost, now=500.0
    )
    assert got == pytest.approx(expected)


@pytest.mark.parametrize("policy", [FAST, ONCE])
def test_a_worker_not_lost_yet_is_never_already_past_its_moment(policy: FailoverPolicy) -> None:
    for could_fence in (True, False):
        got = may_move_at(
            S, policy, could_fence=could_fence, last_renew_start=None, lost_since=None, now=500.0
        )
        assert got > 500.0


def test_at_most_once_never_moves_before_the_shim_fences_its_copy() -> None:
    """The manager's moment is after the shim's: it fences after fence_after seconds of
    silence, counted at the latest from the last renewal that landed (<= its start +
    request timeout)."""
    for policy in (FAST, ONCE):
        shim_fences_by = 100.0 + S.request_timeout + S.fence_after(policy)
        moves = may_move_at(
            S, policy, could_fence=True, last_renew_start=100.0, lost_since=101.0, now=500.0
        )
        assert moves >= shim_fences_by + S.fence_grace


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, ONCE), ("", ONCE), ("fast", FAST), ("at-most-once", ONCE), ("wait", ONCE), ("x", ONCE)],
)
def test_the_annotation_names_a_policy_and_anything_unknown_is_the_safe_one(
    value: str | None, expected: FailoverPolicy
) -> None:
    from manager.federation.settings import failover_policy

    assert failover_policy(value, ONCE) is expected
