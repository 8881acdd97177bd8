"""The dashboard's worker rows never show a credential held in a server URL, even one in a
message written for a kubeconfig kfed accepted before it refused such URLs."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from manager.federation.runtime import FederationController
from manager.federation.workers.registry import ClusterEntry
from manager.observability.clusterrows import cluster_rows


def federation(entries: dict[str, ClusterEntry]) -> FederationController:
    fake: Any = SimpleNamespace(
        registry=SimpleNamespace(
            clusters=entries, mk_clusters=SimpleNamespace(items=list, get=lambda _: None)
        ),
        dispatcher=SimpleNamespace(records=SimpleNamespace(placements=list)),
        manager=SimpleNamespace(state=SimpleNamespace(workloads=SimpleNamespace(items=list))),
        settings=SimpleNamespace(credentials_warning=3600.0),
    )
    return cast(FederationController, fake)


def test_a_refusal_naming_a_server_url_is_shown_redacted() -> None:
    entry = ClusterEntry("w1")
    entry.rejected = (
        "BadKubeConfig",
        "kubeconfig cannot be loaded: InvalidURL https://admin:s3cret@h:6443/?token=s3cret",
    )

    (row,) = cluster_rows(federation({"w1": entry}))

    assert (
        row.message
        == "kubeconfig cannot be loaded: InvalidURL https://[redacted]@h:6443/?[redacted]"
    )
    assert "s3cret" not in str(row.to_json())
