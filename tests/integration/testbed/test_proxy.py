"""The cuttable proxy between a client and a real kube-apiserver: partitions on demand."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from e2e.local.federation import LocalFederation
from e2e.local.proxy import CuttableProxy
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi


@pytest.fixture
def proxy(lite_clusters: LocalFederation) -> Iterator[CuttableProxy]:
    p = CuttableProxy(lite_clusters.cluster("worker-1").ports.apiserver).start()
    yield p
    p.stop()


async def test_cut_then_heal(lite_clusters: LocalFederation, proxy: CuttableProxy) -> None:
    config = yaml.safe_load(lite_clusters.kubeconfig("worker-1").read_text())
    config["clusters"][0]["cluster"]["server"] = proxy.url
    async with await KubeApi.from_kubeconfig_dict(config, name="via-proxy") as api:
        api.request_timeout = 2
        assert (await api.get(R.NAMESPACES, "default"))["metadata"]["name"] == "default"
        proxy.cut()
        with pytest.raises(errors.Unreachable):
            await api.get(R.NAMESPACES, "default")
        proxy.blackhole()
        with pytest.raises(errors.Unreachable):
            await api.get(R.NAMESPACES, "default")
        proxy.heal()
        assert (await api.get(R.NAMESPACES, "default"))["metadata"]["name"] == "default"
