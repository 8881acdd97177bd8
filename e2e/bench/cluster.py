"""A fresh lite control plane (etcd + kube-apiserver) with kfed's CRDs, for one benchmark
run, always stopped and removed at the end (also on Ctrl-C, and by the kernel if the
benchmark is killed: its processes die with their parent)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from e2e import binaries
from e2e.local.cluster import LocalCluster
from e2e.local.crds import install_crds
from e2e.local.federation import MANAGER, LocalFederation


@contextmanager
def lite_cluster(name: str, *, say: bool = True) -> Iterator[LocalCluster]:
    binaries.path_of("kube-apiserver")  # a clear error when the binaries are not built
    root = Path(tempfile.mkdtemp(prefix="kfed-bench-"))
    fed = LocalFederation(name, workers=0, root=root, tie_to_parent=True)
    try:
        seconds = fed.up()
        cluster = fed.cluster(MANAGER)
        install_crds(cluster)
        if say:
            print(f"lite cluster up in {seconds:.1f}s at {cluster.server}; CRDs installed")
        yield cluster
    finally:
        fed.down()
        shutil.rmtree(root, ignore_errors=True)


def request_counts(cluster: LocalCluster, resource: str) -> dict[str, int]:
    """Requests the API server has served for one resource so far, by verb and subresource
    (``PATCH status``, ``POST``, ``WATCH``...), from its ``apiserver_request_total`` metric."""
    status, body = cluster.api_get("/metrics", timeout=30)
    if status != 200:
        return {}
    counts: dict[str, int] = {}
    for line in body.decode().splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_text, _, value = line[len("apiserver_request_total{") :].rpartition("} ")
        labels = dict(part.split("=", 1) for part in labels_text.split(",") if "=" in part)
        labels = {k: v.strip('"') for k, v in labels.items()}
        if labels.get("resource") != resource:
            continue
        name = " ".join(x for x in (labels.get("verb"), labels.get("subresource")) if x)
        counts[name] = counts.get(name, 0) + int(float(value))
    return counts
