"""Workers registered by a ClusterProfile (issue #46 item 4), on real control planes: the
MultiKueueCluster names a ClusterProfile, kfed reads its endpoint from the profile's access
providers and its credential from the platform's plugin, says in ``Active`` why it cannot
(no profile, no matching provider, the plugin failed), follows the endpoint when it
rotates; and a temporary worker whose ClusterProfile is deleted is drained (its jobs move
to the other workers, once) before kfed lets it go."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from e2e.local.federation import LocalFederation
from e2e.local.proxy import CuttableProxy
from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers import conditions
from manager.controllers import workloadstatus as ws
from manager.federation.engine.statuswrites import StatusWrites
from manager.federation.settings import FederationSettings
from manager.federation.workers import clusterprofiles as cps
from manager.federation.workers.profilesource import DRAIN_MARK
from manager.federation.workers.registry import ClusterRegistry
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.events import EventRecorder
from tests.integration.federation import article
from tests.integration.federation.bed import NAMESPACE, Bed
from tests.integration.federation.clusterprofiles import (
    PROVIDER,
    Plugin,
    endpoint_of,
    install_crd,
    profile_source,
    put_profile,
)
from tests.integration.federation.test_dispatch import fill_worker, h100_job, placed


def active_of(obj: dict[str, Any]) -> tuple[str, str, str]:
    c = conditions.find((obj.get("status") or {}).get("conditions"), C.ACTIVE) or {}
    return str(c.get("status")), str(c.get("reason")), str(c.get("message"))


async def wait_active(api: KubeApi, name: str, status: str, reason: str, saying: str = "") -> str:
    """Wait for the MultiKueueCluster's Active condition (its message ``saying`` that);
    returns its message."""

    async def seen() -> str | None:
        now = active_of(await api.get(R.MULTIKUEUE_CLUSTERS, name))
        return now[2] if now[:2] == (status, reason) and saying in now[2] else None

    found = await wait_for(seen, timeout=60, interval=0.1, what=f"{name} Active={status} {reason}")
    assert found is not None
    return found


@pytest.fixture
async def manager_api(kueue_crds: LocalFederation, unique: str) -> AsyncIterator[KubeApi]:
    async with await KubeApi.from_kubeconfig_file(kueue_crds.kubeconfig("manager")) as api:
        await install_crd(api)
        await api.create(R.NAMESPACES, {"metadata": {"name": f"kfed-{unique}"}})
        yield api
        with contextlib.suppress(errors.KubeError):
            await api.delete(R.MULTIKUEUE_CLUSTERS, f"cloud-{unique}")
        await api.delete(R.NAMESPACES, f"kfed-{unique}")


async def test_a_worker_registered_by_its_clusterprofile_follows_it(
    kueue_crds: LocalFederation, manager_api: KubeApi, unique: str, tmp_path: Path
) -> None:
    api, ns, name = manager_api, f"kfed-{unique}", f"cloud-{unique}"
    worker = kueue_crds.kubeconfig("worker-1")
    plugin = Plugin(tmp_path)
    plugin.issue(worker)
    direct = endpoint_of(worker)
    port = urlsplit(direct["server"]).port
    assert port is not None
    proxy = CuttableProxy(port).start()
    await api.create(
        R.MULTIKUEUE_CLUSTERS,
        {
            "apiVersion": C.API_VERSION,
            "kind": "MultiKueueCluster",
            "metadata": {"name": name},
            "spec": {"clusterSource": {"clusterProfileRef": {"name": "cloud"}}},
        },
    )
    settings = FederationSettings(
        namespace=ns,
        request_timeout=2.0,
        reconnect_initial=0.2,
        reconnect_max=1.0,
        cluster_profile_providers=(plugin.provider,),
    )
    registry = ClusterRegistry(
        api, settings, status=StatusWrites(api, EventRecorder(api, component="kfed-manager"))
    )
    task = asyncio.create_task(registry.run())
    try:
        message = await wait_active(api, name, "False", cps.REASON_PROFILE_NOT_FOUND)
        assert message == f"ClusterProfile {ns}/cloud not found"

        # Listed only through a provider the manager has no plugin for.
        await put_profile(api, ns, "cloud", {"gke": direct})
        # (Created first, then its status written: "it lists: none" may come before.)
        lists = f"it lists: gke; configured: {PROVIDER}"
        await wait_active(api, name, "False", cps.REASON_NO_ACCESS_PROVIDER, lists)

        # Through the platform's provider: connected, with the plugin's client certificate.
        started = time.monotonic()
        await put_profile(api, ns, "cloud", {"gke": direct, PROVIDER: direct})
        await wait_active(api, name, "True", C.REASON_ACTIVE)
        print(f"ClusterProfile usable -> Active: {time.monotonic() - started:.2f}s")
        assert plugin.servers_asked()[-1] == direct["server"]  # provideClusterInfo
        first = registry.remote(name)
        assert first is not None and first.connected

        # The endpoint rotates: kfed follows it, fetching a credential for the new one.
        started = time.monotonic()
        await put_profile(api, ns, "cloud", {PROVIDER: {**direct, "server": proxy.url}})

        async def moved() -> bool:
            now = registry.remote(name)
            return now is not None and now is not first and now.connected

        await wait_for(moved, timeout=60, what="connected through the rotated endpoint")
        print(f"endpoint rotated -> reconnected: {time.monotonic() - started:.2f}s")
        assert plugin.servers_asked()[-1] == proxy.url
        await wait_active(api, name, "True", C.REASON_ACTIVE)

        # The plugin fails for the next endpoint: said, and tried again until it works.
        plugin.revoke()
        await put_profile(api, ns, "cloud", {PROVIDER: direct})
        message = await wait_active(api, name, "False", cps.REASON_CREDENTIALS_FAILED)
        assert f"provider {PROVIDER!r} exited with 1: no credential issued" in message
        plugin.issue(worker)
        await wait_active(api, name, "True", C.REASON_ACTIVE)

        # A credential the worker refuses (401), for the next endpoint: the plugin is asked
        # again (as client-go asks it) until the worker accepts what it hands out.
        plugin.issue_token("not-a-token-the-worker-knows")
        await put_profile(api, ns, "cloud", {PROVIDER: {**direct, "server": proxy.url}})
        await wait_active(api, name, "False", C.REASON_CLIENT_CONNECTION_FAILED, "Unauthorized")
        runs = len(plugin.servers_asked())
        plugin.issue(worker)
        await wait_active(api, name, "True", C.REASON_ACTIVE)
        assert len(plugin.servers_asked()) > runs

        # Deleted with nothing of ours there: drained at once, then let go; back, it is
        # used again and kfed's drain is lifted.
        await api.delete(R.CLUSTER_PROFILES, "cloud", ns)
        message = await wait_active(api, name, "False", cps.REASON_PROFILE_DELETED)
        assert "drained in" in message
        mk = await api.get(R.MULTIKUEUE_CLUSTERS, name)
        annotations = mk["metadata"]["annotations"]
        assert annotations[C.MAINTENANCE_ANNOTATION] == C.MAINTENANCE_DRAIN
        assert annotations[DRAIN_MARK] == ""
        await put_profile(api, ns, "cloud", {PROVIDER: direct})
        await wait_active(api, name, "True", C.REASON_ACTIVE)
        mk = await api.get(R.MULTIKUEUE_CLUSTERS, name)
        assert C.MAINTENANCE_ANNOTATION not in (mk["metadata"].get("annotations") or {})
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        proxy.stop()
        with contextlib.suppress(errors.KubeError):
            await api.delete(R.CLUSTER_PROFILES, "cloud", ns)


# -- a temporary worker, on the shared federation bed ------------------------------------------

TEMPORARY = "worker-3"


@pytest.fixture
async def temporary_worker(article_bed: Bed, tmp_path: Path) -> AsyncIterator[Plugin]:
    """worker-3 registered by its ClusterProfile (through the bed's proxy) for the test, and
    by its kubeconfig Secret again afterwards."""
    bed, api = article_bed, article_bed.manager_api
    await install_crd(api)
    plugin = Plugin(tmp_path)
    plugin.issue(bed.fed.kubeconfig(TEMPORARY))
    cluster = endpoint_of(bed.fed.kubeconfig(TEMPORARY), bed.proxies[TEMPORARY].url)
    await put_profile(api, NAMESPACE, TEMPORARY, {PROVIDER: cluster})
    await api.patch(
        R.MULTIKUEUE_CLUSTERS, TEMPORARY, {"spec": {"clusterSource": profile_source(TEMPORARY)}}
    )
    bed.settings = FederationSettings(
        **{
            **{f: getattr(bed.settings, f) for f in bed.settings.__dataclass_fields__},
            "cluster_profile_providers": (plugin.provider,),
        }
    )
    try:
        yield plugin
    finally:
        await bed.stop_all()
        with contextlib.suppress(errors.KubeError):
            await api.delete(R.CLUSTER_PROFILES, TEMPORARY, NAMESPACE)
        secret = {"kubeConfig": {"location": TEMPORARY, "locationType": "Secret"}}
        await api.patch(
            R.MULTIKUEUE_CLUSTERS,
            TEMPORARY,
            {
                "metadata": {"annotations": {C.MAINTENANCE_ANNOTATION: None, DRAIN_MARK: None}},
                "spec": {"clusterSource": {**secret, "clusterProfileRef": None}},
            },
        )


@pytest.mark.full
async def test_a_temporary_worker_is_drained_before_its_clusterprofile_goes(
    article_bed: Bed, temporary_worker: Plugin
) -> None:
    bed, api = article_bed, article_bed.manager_api
    started = time.monotonic()
    await bed.start_federation()
    await wait_active(api, TEMPORARY, "True", C.REASON_ACTIVE)
    took = time.monotonic() - started
    print(f"manager start -> {TEMPORARY} Active by its ClusterProfile: {took:.2f}s")
    # Fill worker-2 so that the long job lands on the temporary worker-3.
    await fill_worker(bed.worker_apis["worker-2"], "hog")
    await api.create(R.JOBS, h100_job("long", delay_ms=600_000), article.NS)
    wl = await wait_for(lambda: placed(api, "long"), timeout=90, what="long placed")
    assert ws.status_of(wl)["clusterName"] == TEMPORARY
    await bed.worker_apis["worker-2"].delete(R.JOBS, "hog", article.NS, propagation="Background")

    started = time.monotonic()
    await api.delete(R.CLUSTER_PROFILES, TEMPORARY, NAMESPACE)

    async def moved() -> str | None:
        now = await placed(api, "long")
        where = ws.status_of(now).get("clusterName") if now is not None else None
        return where if where not in (None, TEMPORARY) else None

    where = await wait_for(moved, timeout=120, what="long moved off the temporary worker")
    moved_after = time.monotonic() - started
    message = await wait_active(api, TEMPORARY, "False", cps.REASON_PROFILE_DELETED)
    let_go_after = time.monotonic() - started
    print(f"ClusterProfile deleted -> moved to {where}: {moved_after:.2f}s")
    print(f"ClusterProfile deleted -> let go: {let_go_after:.2f}s")
    assert "drained in" in message
    # Moved once, through kfed's drain: never a copy on two workers.
    assert not (await bed.worker_apis[TEMPORARY].list(R.WORKLOADS, article.NS))["items"]
    assert bed.manager is not None
    copies = [
        w for w in ("worker-1", "worker-2")
        for item in (await bed.worker_apis[w].list(R.WORKLOADS, article.NS))["items"]
        if item["metadata"]["name"].startswith("job-long-")
    ]  # fmt: skip
    assert copies == [where]
