"""A worker's kubeconfig Secret changes (credentials rotated, or a drill points it elsewhere):
the registry replaces the connection, and the new one inherits what the old one knew about
fencing, so losing the worker right after the change is still a fast, fenced failover."""

from __future__ import annotations

import time
from typing import Any, cast

from kubernetes_asyncio.client import ApiClient

from manager.federation.settings import SHIM_HEARTBEAT_LEASE, FederationSettings
from manager.federation.workers.remote import RemoteCluster
from manager.kube import errors
from manager.kube.api import KubeApi

SETTINGS = FederationSettings()


def remote() -> RemoteCluster:
    return RemoteCluster("worker-1", KubeApi(cast(ApiClient, None), name="worker-1"), SETTINGS)


def shim_lease(renew_time: str) -> dict[str, Any]:
    return {
        "metadata": {"name": SHIM_HEARTBEAT_LEASE, "namespace": SETTINGS.namespace},
        "spec": {
            "holderIdentity": "kfed-worker-shim",
            "leaseDurationSeconds": 10,
            "renewTime": renew_time,
        },
    }


def healthy_with_shim() -> RemoteCluster:
    """A connection that renewed our lease and saw the worker's shim renew its own."""
    old = remote()
    leases = old.informers["leases"]
    key = f"{SETTINGS.namespace}/{SHIM_HEARTBEAT_LEASE}"
    for renew in ("2025-01-01T00:00:00.000000Z", "2025-01-01T00:00:02.000000Z"):
        leases.cache[key] = shim_lease(renew)
        leases.synced.set()
        _ = old.can_fence  # observes the lease, as the informer's events would
    old.state.connected = True
    old.state.last_renew_start = time.monotonic() - 1.0
    old.state.renewals = 7
    assert old.can_fence
    return old


def test_a_new_connection_that_never_connects_still_fails_over_fenced() -> None:
    old = healthy_with_shim()
    new = remote()
    new.carry_over(old)
    new._mark_lost(errors.Unreachable("request timed out"))
    assert new.state.could_fence, "the shim was alive when the old connection was replaced"
    assert new.state.last_renew_start == old.state.last_renew_start
    assert new.state.fence_deadline == (
        old.state.last_renew_start + SETTINGS.fenced_failover_after  # type: ignore[operator]
    )


def test_without_the_old_connections_knowledge_it_waits_the_unfenced_timeout() -> None:
    new = remote()
    new._mark_lost(errors.Unreachable("request timed out"))
    assert not new.state.could_fence and new.state.fence_deadline is None


def test_an_outage_in_progress_carries_over_and_the_return_is_a_reconnection() -> None:
    old = healthy_with_shim()
    old._mark_lost(errors.Unreachable("request timed out"))
    new = remote()
    new.carry_over(old)
    assert new.state.lost_since == old.state.lost_since  # on_reconnect (cleanup) will run
    assert new.state.fence_deadline == old.state.fence_deadline
    assert new.state.could_fence


def test_a_replaced_connection_whose_shim_was_gone_cannot_fence() -> None:
    old = remote()
    old.state.connected = True
    old.state.last_renew_start = time.monotonic()
    new = remote()
    new.carry_over(old)
    new._mark_lost(errors.Unreachable("refused"))
    assert not new.state.could_fence
