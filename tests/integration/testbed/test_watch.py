"""The informer against real kube-apiservers: list-then-watch, bookmarks, an apiserver that
goes away and comes back, and 410 Gone."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator

import pytest

from e2e.local.federation import LocalFederation
from e2e.waiting import wait_for
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.informer import Event, Informer


@contextlib.asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[list[Event]]:
    seen: list[Event] = []
    informer.subscribe(seen.append)
    task = asyncio.create_task(informer.run())
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def make_namespace(api: KubeApi, name: str) -> None:
    await api.create(R.NAMESPACES, {"metadata": {"name": name}})


def configmap(name: str, namespace: str, **data: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": namespace}, "data": data}


@pytest.fixture
async def apis(lite_clusters: LocalFederation) -> AsyncIterator[dict[str, KubeApi]]:
    clients = {
        c.name: await KubeApi.from_kubeconfig_file(c.kubeconfig, name=c.name) for c in lite_clusters
    }
    yield clients
    for api in clients.values():
        await api.close()


async def test_each_cluster_is_its_own_control_plane(apis: dict[str, KubeApi], unique: str) -> None:
    ns = f"iso-{unique}"
    for name, api in apis.items():
        await make_namespace(api, ns)
        await api.create(R.CONFIGMAPS, configmap("who", ns, cluster=name))
    for name, api in apis.items():
        assert (await api.get(R.CONFIGMAPS, "who", ns))["data"] == {"cluster": name}


async def test_list_then_watch_sees_every_change_in_order(
    apis: dict[str, KubeApi], unique: str
) -> None:
    api = apis["worker-1"]
    ns = f"watch-{unique}"
    await make_namespace(api, ns)
    await api.create(R.CONFIGMAPS, configmap("before", ns, v="0"))
    # A short server-side timeout makes the apiserver end the stream (with a bookmark just
    # before, since the resourceVersion moves on), and the informer watch again.
    informer = Informer(api, R.CONFIGMAPS, namespace=ns, watch_timeout=4)
    async with running(informer) as seen:
        await wait_for(informer.synced.is_set, timeout=10, what="initial list")
        assert [(e.type, e.key) for e in seen] == [("ADDED", f"{ns}/before")]
        await api.create(R.CONFIGMAPS, configmap("during", ns, v="1"))
        await api.patch(R.CONFIGMAPS, "during", {"data": {"v": "2"}}, ns)
        await api.delete(R.CONFIGMAPS, "before", ns)
        await wait_for(lambda: len(seen) >= 4, timeout=10, what="watch events")
        assert [(e.type, e.key) for e in seen] == [
            ("ADDED", f"{ns}/before"),
            ("ADDED", f"{ns}/during"),
            ("MODIFIED", f"{ns}/during"),
            ("DELETED", f"{ns}/before"),
        ]
        assert seen[2].old is not None and seen[2].old["data"] == {"v": "1"}

        ticks = itertools.count()

        async def churn_until_rewatched() -> bool:
            # Bookmarks are sent only when the resourceVersion has moved; move it elsewhere.
            await api.create(R.CONFIGMAPS, configmap(f"tick-{unique}-{next(ticks)}", "default"))
            return informer.stats.watches >= 2 and informer.stats.bookmarks >= 1

        await wait_for(
            churn_until_rewatched, timeout=20, interval=0.5, what="bookmark and re-watch"
        )
        assert informer.stats.lists == 1, "a server timeout must resume the watch, not re-list"
        assert set(informer.cache) == {f"{ns}/during"}


async def test_watch_recovers_by_relisting_after_apiserver_restart(
    lite_clusters: LocalFederation, apis: dict[str, KubeApi], unique: str
) -> None:
    cluster = lite_clusters.cluster("worker-2")
    api = apis["worker-2"]
    ns = f"restart-{unique}"
    await make_namespace(api, ns)
    await api.create(R.CONFIGMAPS, configmap("a", ns))
    informer = Informer(api, R.CONFIGMAPS, namespace=ns)
    async with running(informer) as seen:
        await wait_for(informer.synced.is_set, timeout=10, what="initial list")
        cluster.stop_role("kube-apiserver")
        try:
            with pytest.raises(errors.Unreachable):
                await api.get(R.CONFIGMAPS, "a", ns)
            await wait_for(
                lambda: not informer.stats.connected, timeout=15, what="informer to notice"
            )
            assert informer.stats.errors >= 1 and informer.stats.last_error
        finally:
            cluster.restart_role("kube-apiserver")
        await asyncio.to_thread(cluster.wait_ready)
        await api.create(R.CONFIGMAPS, configmap("b", ns))
        await wait_for(lambda: f"{ns}/b" in informer.cache, timeout=30, what="event after restart")
        assert informer.stats.connected
        assert informer.stats.lists >= 2, "the informer re-lists after losing its watch"
        assert [e.key for e in seen if e.type == "ADDED"] == [f"{ns}/a", f"{ns}/b"]


class _StaleAfterFirstList(Informer):
    """Starts its first watch from a resourceVersion the apiserver no longer has."""

    stale: str = ""

    async def _list(self) -> None:
        await super()._list()
        if self.stats.lists == 1:
            self._resource_version = self.stale


async def test_gone_makes_the_informer_relist(
    lite_clusters: LocalFederation, apis: dict[str, KubeApi], unique: str
) -> None:
    cluster = lite_clusters.cluster("worker-1")
    api = apis["worker-1"]
    ns = f"gone-{unique}"
    await make_namespace(api, ns)
    old_rv = (await api.list(R.CONFIGMAPS, ns))["metadata"]["resourceVersion"]
    for i in range(3):
        await api.create(R.CONFIGMAPS, configmap(f"c{i}", ns))
    # A restarted apiserver fills its watch cache from a fresh list, newer than old_rv.
    cluster.restart_role("kube-apiserver")
    await asyncio.to_thread(cluster.wait_ready)
    with pytest.raises(errors.Gone):
        async for _ in api.watch(R.CONFIGMAPS, ns, resource_version=old_rv, timeout_seconds=5):
            pass

    informer = _StaleAfterFirstList(api, R.CONFIGMAPS, namespace=ns)
    informer.stale = old_rv
    async with running(informer):
        await wait_for(
            lambda: informer.stats.gone == 1 and informer.stats.lists == 2,
            timeout=15,
            what="410 then a second list",
        )
        await api.create(R.CONFIGMAPS, configmap("after", ns))
        await wait_for(
            lambda: f"{ns}/after" in informer.cache, timeout=10, what="watch after re-list"
        )
        assert informer.stats.errors == 0
