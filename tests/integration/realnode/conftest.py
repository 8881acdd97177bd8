"""The real-node bed: its own small full federation (a manager and worker-1 with kwok GPU
nodes of both of the article's models), a real node (containerd + kubelet, e2e/realnode) on
the manager and on worker-1, and kfed's image imported into both nodes' containerd.

Skipped, with the exact reason, on a machine that cannot run it: no root, containerd/runc
not installed or not starting, no Docker engine or no ``kfed:0.1.0`` image in it (``make
image`` builds it; ``make test`` does so first when Docker is there).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from e2e import binaries
from e2e.local.federation import LocalFederation
from e2e.realnode import host
from e2e.realnode.containerd import ContainerdError
from e2e.realnode.node import RealNode, docker_save

NODES_FILE = Path(__file__).with_name("nodes.yaml")
IMAGE = os.environ.get("KFED_IMAGE", "kfed:0.1.0")
NODE_CLUSTERS = ("manager", "worker-1")
# The host ports of deploy/*/overlays/testbed: manager metrics, webhook and visibility API,
# shim metrics.
OVERLAY_PORTS = (18080, 19443, 18082, 18081)


def port_in_use(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class RealBed:
    fed: LocalFederation
    nodes: dict[str, RealNode]
    timings: dict[str, float]


def image_unavailable_reason() -> str | None:
    if shutil.which("docker") is None:
        return f"docker is not installed, so there is no {IMAGE} image to run (make image)"
    found = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", IMAGE],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if found.returncode != 0:
        said = found.stderr.strip().splitlines()[-1] if found.stderr.strip() else "no answer"
        return f"image {IMAGE} is not in the Docker engine (`make image` builds it): {said}"
    return None


@pytest.fixture(scope="module")
def image_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kfed's image as a `docker save` archive, saved once for both nodes."""
    reason = host.unavailable_reason() or image_unavailable_reason()
    if reason is not None:
        pytest.skip(f"no real node on this machine: {reason}")
    return docker_save(IMAGE, tmp_path_factory.mktemp("image") / "kfed.tar")


@pytest.fixture(scope="module")
def real_bed(tmp_path_factory: pytest.TempPathFactory, image_archive: Path) -> Iterator[RealBed]:
    try:
        binaries.path_of("kubelet")
    except binaries.BinariesMissing as err:
        pytest.fail(f"{err}. `make test` builds it; run `make binaries` when calling pytest.")
    busy = [port for port in OVERLAY_PORTS if port_in_use(port)]
    assert not busy, (
        f"ports {busy} (the testbed overlays' host ports) are in use on this machine: another "
        "real-node bed (python -m e2e up --real-node) still runs? `python -m e2e down` it first"
    )
    # Short: containerd's and the kubelet's socket paths must fit in 107 bytes, which a
    # pytest-xdist process's base directory (.../pytest-N/popen-gw0/...) does not leave.
    root = Path(tempfile.mkdtemp(prefix=f"rn-{os.getpid()}-", dir="/tmp"))
    fed = LocalFederation(
        "real", workers=1, full=True, nodes_file=NODES_FILE, root=root, tie_to_parent=True
    )
    fed.up()
    nodes: dict[str, RealNode] = {}
    timings: dict[str, float] = {}
    try:
        for name in NODE_CLUSTERS:
            node = nodes[name] = RealNode(fed.cluster(name))
            try:
                timings[f"{name} node ready"] = node.start()
            except ContainerdError as err:
                pytest.skip(f"containerd cannot start on this machine: {err}")
            started = time.monotonic()
            node.import_image(image_archive)
            timings[f"{name} image import"] = time.monotonic() - started
        yield RealBed(fed, nodes, timings)
    finally:
        problems = [p for node in nodes.values() for p in node.stop()]
        fed.down()
        shutil.rmtree(root, ignore_errors=True)
        assert not problems, f"the real nodes left behind: {problems}"
