"""A worker where upstream Kueue admits and kfed's shim runs fence-only is, to the manager,
a worker that can fence, the same as one running kfed's shim in full: the heartbeat Lease
proves it; its annotation only names the mode, for people (dashboard, state JSON)."""

from __future__ import annotations

from typing import Any, cast

from kubernetes_asyncio.client import ApiClient

from manager.federation.settings import (
    SHIM_HEARTBEAT_LEASE,
    SHIM_MODE_ANNOTATION,
    FederationSettings,
)
from manager.federation.workers.remote import RemoteCluster
from manager.kube.api import KubeApi

SETTINGS = FederationSettings()
KEY = f"{SETTINGS.namespace}/{SHIM_HEARTBEAT_LEASE}"


def heartbeat(renew_time: str, mode: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": SHIM_HEARTBEAT_LEASE, "namespace": SETTINGS.namespace}
    if mode is not None:
        meta["annotations"] = {SHIM_MODE_ANNOTATION: mode}
    return {
        "metadata": meta,
        "spec": {"holderIdentity": "shim-0", "leaseDurationSeconds": 10, "renewTime": renew_time},
    }


def worker_seeing(mode: str | None) -> RemoteCluster:
    """A worker whose heartbeat we saw renewed twice, written by a shim of ``mode`` (None: a
    shim from before modes, which wrote no annotation)."""
    remote = RemoteCluster("worker-1", KubeApi(cast(ApiClient, None), name="w"), SETTINGS)
    leases = remote.informers["leases"]
    for renew in ("2025-01-01T00:00:00.000000Z", "2025-01-01T00:00:02.000000Z"):
        leases.cache[KEY] = heartbeat(renew, mode)
        _ = remote.can_fence  # observes the lease, as the informer's events would
    return remote


def test_a_fence_only_worker_can_fence_like_a_kfed_worker() -> None:
    fence_only, full = worker_seeing("fence-only"), worker_seeing("admit")
    assert fence_only.can_fence and full.can_fence
    assert (fence_only.shim_mode, full.shim_mode) == ("fence-only", "admit")
    assert fence_only.status()["shim_mode"] == "fence-only"


def test_a_heartbeat_without_the_annotation_is_a_full_shim() -> None:
    assert worker_seeing(None).shim_mode == "admit"


def test_no_heartbeat_no_shim() -> None:
    remote = RemoteCluster("worker-1", KubeApi(cast(ApiClient, None), name="w"), SETTINGS)
    assert remote.shim_mode is None and not remote.can_fence
    assert remote.status()["shim_mode"] is None
