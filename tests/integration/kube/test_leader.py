"""Leader election on a real Lease: one leader at a time, a fast hand-over on release, and a
takeover after the lease duration when the leader dies without releasing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from e2e.local.federation import LocalFederation
from e2e.waiting import wait_for
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.leader import LeaderElectionConfig, LeaderElector


@pytest.fixture
async def api(lite_clusters: LocalFederation, unique: str) -> AsyncIterator[KubeApi]:
    async with await KubeApi.from_kubeconfig_file(lite_clusters.kubeconfig("manager")) as client:
        await client.create(R.NAMESPACES, {"metadata": {"name": f"le-{unique}"}})
        yield client


def elector(api: KubeApi, unique: str, identity: str) -> LeaderElector:
    config = LeaderElectionConfig(
        namespace=f"le-{unique}",
        name="kfed-manager",
        identity=identity,
        lease_duration=3,
        renew_deadline=2,
        retry_period=0.5,
    )
    return LeaderElector(api, config)


async def _lead_forever(flag: list[str], identity: str) -> None:
    flag.append(identity)
    await asyncio.Event().wait()


async def test_one_leader_then_fast_handover_on_release(api: KubeApi, unique: str) -> None:
    leading: list[str] = []
    a, b = elector(api, unique, "a"), elector(api, unique, "b")
    task_a = asyncio.create_task(a.run(lambda: _lead_forever(leading, "a")))
    await wait_for(lambda: leading == ["a"], timeout=10, what="a to lead")
    task_b = asyncio.create_task(b.run(lambda: _lead_forever(leading, "b")))
    try:
        await wait_for(b.known.is_set, timeout=10, what="b to learn who leads")
        assert b.leader == "a" and not b.is_leader and leading == ["a"]
        task_a.cancel()  # SIGTERM: a releases the lease
        with contextlib.suppress(asyncio.CancelledError):
            await task_a
        await wait_for(lambda: leading == ["a", "b"], timeout=3, what="b to take over at once")
    finally:
        for t in (task_a, task_b):
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await t


class _Crashing(LeaderElector):
    """A leader that dies without releasing (kill -9)."""

    async def release(self) -> None:
        return None


async def test_takeover_after_lease_duration_when_the_leader_dies(
    api: KubeApi, unique: str
) -> None:
    leading: list[str] = []
    cfg = elector(api, unique, "a").config
    a = _Crashing(api, cfg)
    task_a = asyncio.create_task(a.run(lambda: _lead_forever(leading, "a")))
    await wait_for(lambda: leading == ["a"], timeout=10, what="a to lead")
    task_a.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task_a
    b = elector(api, unique, "b")
    started = asyncio.get_running_loop().time()
    task_b = asyncio.create_task(b.run(lambda: _lead_forever(leading, "b")))
    try:
        await wait_for(lambda: leading == ["a", "b"], timeout=10, what="b to take over")
        waited = asyncio.get_running_loop().time() - started
        assert waited >= cfg.lease_duration * 0.9, "never before the dead leader's lease ran out"
        lease_obj = await api.get(R.LEASES, "kfed-manager", cfg.namespace)
        assert lease_obj["spec"]["holderIdentity"] == "b"
        assert lease_obj["spec"]["leaseTransitions"] == 1
    finally:
        task_b.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task_b
