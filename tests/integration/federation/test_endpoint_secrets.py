"""No observability endpoint reveals a credential. Every route of the manager's and a worker
shim's server (health, metrics, the dashboard and its state JSON, the visibility API with real
queue names in every version) is fetched on a live federation and searched for every
credential the registered worker kubeconfigs hold: client keys and certificates, as base64
and as PEM, and a bearer token registered on purpose (a MultiKueueCluster whose kubeconfig
carries one, pointing nowhere)."""

from __future__ import annotations

import base64
import contextlib
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
import yaml

from e2e.waiting import wait_for
from manager.cli.workerobjects import multikueue_cluster
from manager.federation import visibility
from manager.kube import resources as R
from manager.observability.history import CHARTS
from manager.observability.server import ObservabilityServer, Source, create_app
from manager.observability.sources import ManagerSource, ShimSource
from tests.integration.federation import article
from tests.integration.federation.bed import NAMESPACE, Bed
from tests.integration.federation.test_dispatch import placed

pytestmark = pytest.mark.full
NS = article.NS
TRIPWIRE = "tripwire"
CREDENTIAL_KEYS = ("client-key-data", "client-certificate-data", "token")


def token_kubeconfig(ca_data: str, token: str) -> dict[str, Any]:
    cluster = {"server": "https://127.0.0.1:9", "certificate-authority-data": ca_data}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }


def needles(kubeconfig: dict[str, Any]) -> Iterator[str]:
    """What must never be shown of a kubeconfig: each credential as written (base64 or a
    token), decoded, and every line of a decoded PEM long enough to be recognisable."""
    for user in kubeconfig.get("users") or []:
        for key in CREDENTIAL_KEYS:
            value = (user.get("user") or {}).get(key)
            if not value:
                continue
            yield value
            if key.endswith("-data"):
                pem = base64.b64decode(value).decode()
                yield pem
                yield from (line for line in pem.splitlines() if len(line) >= 40)


def urls(server: ObservabilityServer, source: Source, workload: str) -> list[str]:
    """Every route the server has, its placeholders filled with real names (every chart, and
    ``workload``'s page)."""
    found = []
    for resource in create_app(source).router.resources():
        path = resource.canonical
        for version in visibility.VERSIONS if "{version}" in path else ("",):
            for chart in CHARTS if "{chart}" in path else ("",):
                filled = path.replace("{version}", version).replace("{namespace}", NS)
                filled = filled.replace("{chart}", chart)
                name = "gpu-lq" if "localqueues" in path else "gpu-cq"
                filled = filled.replace("{name}", workload if "/workloads/" in path else name)
                found.append(f"{server.url}{filled}")
    return found


@pytest.fixture
async def tripwire(article_bed: Bed) -> AsyncIterator[str]:
    """A MultiKueueCluster registered with a token kubeconfig; yields the token."""
    api = article_bed.manager_api
    token = f"kfed-tripwire-{uuid.uuid4().hex}"
    worker = yaml.safe_load(article_bed.fed.kubeconfig("worker-1").read_text())
    ca_data = worker["clusters"][0]["cluster"]["certificate-authority-data"]
    config = yaml.safe_dump(token_kubeconfig(ca_data, token))
    secret = {
        "metadata": {"name": TRIPWIRE, "namespace": NAMESPACE},
        "data": {"kubeconfig": base64.b64encode(config.encode()).decode()},
    }
    await api.create(R.SECRETS, secret, NAMESPACE)
    await api.create(R.MULTIKUEUE_CLUSTERS, multikueue_cluster(TRIPWIRE, secret=TRIPWIRE))
    try:
        yield token
    finally:
        with contextlib.suppress(Exception):
            await api.delete(R.MULTIKUEUE_CLUSTERS, TRIPWIRE)
        await api.delete(R.SECRETS, TRIPWIRE, NAMESPACE)


async def test_no_endpoint_reveals_a_registered_credential(article_bed: Bed, tripwire: str) -> None:
    bed = article_bed
    await bed.start_shim("worker-1")
    controller = await bed.start_manager()
    api = bed.manager_api
    secrets = (await api.list(R.SECRETS, NAMESPACE))["items"]
    forbidden = {tripwire}
    for secret in secrets:
        raw = (secret.get("data") or {}).get("kubeconfig")
        if raw:
            forbidden.add(raw)
            forbidden.update(needles(yaml.safe_load(base64.b64decode(raw))))
    assert len(forbidden) > 10, "the registered kubeconfigs hold credentials to look for"

    await api.create(R.JOBS, article.seed_job("02-light-job.yaml", delay_ms=600_000), NS)
    await wait_for(lambda: placed(api, "light-job"), timeout=60, what="light-job placed")
    (workload,) = [
        w["metadata"]["name"]
        for w in (await api.list(R.WORKLOADS, NS))["items"]
        if w["metadata"]["name"].startswith("job-light-job-")
    ]
    await wait_for(
        lambda: controller.registry.remote(TRIPWIRE) is not None, timeout=30, what="tripwire"
    )
    manager = ManagerSource(controller.metrics, identity="test-manager", federation=controller)
    shim = ShimSource(bed.shims["worker-1"], identity="worker-1")
    leaks: list[str] = []
    fetched = 0
    async with (
        aiohttp.ClientSession() as http,
        ObservabilityServer(manager, "127.0.0.1", 0) as manager_server,
        ObservabilityServer(shim, "127.0.0.1", 0) as shim_server,
    ):
        for server, source in ((manager_server, manager), (shim_server, shim)):
            source.record_history()  # the charts have a sample to draw
            for url in urls(server, source, workload):
                async with http.get(url, allow_redirects=False) as response:
                    body = await response.text()
                fetched += response.status == 200
                leaks += [f"{url}: {n[:24]}..." for n in forbidden if n and n in body]
                # A token or key is also a leak when only its base64 shows.
                leaks += [
                    f"{url}: base64 of a credential"
                    for n in forbidden
                    if len(n) > 20 and base64.b64encode(n.encode()).decode()[:40] in body
                ]
        state = await (await http.get(f"{manager_server.url}/dashboard/state.json")).text()
    assert TRIPWIRE in state, "the token cluster is on the dashboard, its token is not"
    assert fetched >= 12 + 2 * 5, f"only {fetched} routes answered"  # + charts, pages
    assert not leaks, "\n".join(sorted(set(leaks)))
    assert not re.search(r"-----BEGIN [A-Z ]*PRIVATE KEY-----", state)
