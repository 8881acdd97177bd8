"""Install kfed's CRDs (``crds/``, generated from manager/api) into a local cluster and wait
until every kind is served."""

from __future__ import annotations

from pathlib import Path

from e2e.local.cluster import LocalCluster
from e2e.waiting import wait_for_sync

CRDS = Path(__file__).resolve().parents[2] / "crds"


def install_crds(cluster: LocalCluster, directory: Path = CRDS) -> None:
    """Idempotent: server-side apply with a fixed field manager."""
    cluster.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=kfed-crds",
        "-f",
        str(directory),
    )
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(directory))
    plurals = []
    for path in sorted(directory.glob("*.yaml")):
        # kueue.x-k8s.io_clusterqueues.yaml -> clusterqueues.kueue.x-k8s.io
        group, _, plural = path.stem.partition("_")
        plurals.append(f"{plural}.{group}")
    for plural in plurals:
        wait_for_sync(
            lambda p=plural: cluster.kubectl("get", p, "-A", check=False).returncode == 0,  # type: ignore[misc]
            timeout=60,
            what=f"{plural} served by {cluster.name}",
        )
