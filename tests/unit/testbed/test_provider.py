"""The cluster providers' pure parts: node sets, kubeconfigs, stray-process cleanup, and the
exact commands the kind provider would run (no Docker engine here to run them)."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import yaml

from e2e.binaries import read_versions
from e2e.kind.provider import KindFederation
from e2e.local import pki
from e2e.local.cluster import STAGES_FILE, LocalCluster
from e2e.local.federation import (
    DEFAULT_NODES_FILE,
    cleanup_directory,
    load_node_sets,
    processes_under,
)
from e2e.local.pki import kubeconfig_dict
from e2e.local.ports import Ports


def test_versions_are_pinned_in_one_file() -> None:
    versions = read_versions()
    assert versions.kubernetes.startswith("1.") and versions.etcd.startswith("3.6.")
    assert versions.kwok


def test_default_node_sets_match_the_article() -> None:
    sets = load_node_sets(DEFAULT_NODES_FILE, ["manager", "worker-1", "worker-2", "worker-3"])
    assert sets["manager"] == []
    assert {g.labels["gpu.model"] for g in sets["worker-1"]} == {"rtx-a1000"}
    assert {g.labels["gpu.model"] for g in sets["worker-2"]} == {"h100"}
    assert sets["worker-3"] == sets["worker-2"], "extra workers get the default (h100) set"
    assert all("nvidia.com/gpu" in g.capacity for g in sets["worker-1"] + sets["worker-2"])


def test_custom_node_set_file(tmp_path: Path) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": {
                    "manager": [
                        {
                            "name": "mixed",
                            "count": 3,
                            "labels": {"gpu.model": "h100"},
                            "capacity": {"nvidia.com/gpu": 8},
                        }
                    ]
                }
            }
        )
    )
    sets = load_node_sets(path, ["manager", "worker-1"])
    assert sets["manager"][0].count == 3 and sets["manager"][0].capacity == {"nvidia.com/gpu": "8"}
    assert sets["worker-1"] == []
    cluster = LocalCluster("manager", tmp_path, Ports(1, 2, 3), full=True, nodes=sets["manager"])
    names = [m["metadata"]["name"] for m in cluster.node_manifests()]
    assert names == ["manager-mixed-0", "manager-mixed-1", "manager-mixed-2"]


def test_kubeconfig_embeds_credentials_and_names_the_context() -> None:
    ca = pki.CertificateAuthority("test-ca")
    admin = ca.issue("admin", organization="system:masters")
    config = kubeconfig_dict("worker-1", "https://127.0.0.1:6443", ca.pair.cert_pem, admin)
    assert config["current-context"] == "worker-1"
    cluster = config["clusters"][0]["cluster"]
    assert base64.b64decode(cluster["certificate-authority-data"]) == ca.pair.cert_pem
    user = config["users"][0]["user"]
    assert set(user) == {"client-certificate-data", "client-key-data"}, "no file paths, no tokens"


def test_cleanup_stops_strays_of_a_crashed_run_and_only_those(tmp_path: Path) -> None:
    mine = tmp_path / "fed"
    other = tmp_path / "other"
    for d in (mine, other):
        d.mkdir()
    script = "import sys, time\nwhile True: time.sleep(1)"
    stray = subprocess.Popen(
        [sys.executable, "-c", script, str(mine / "etcd")], start_new_session=True
    )
    bystander = subprocess.Popen(
        [sys.executable, "-c", script, str(other / "etcd")], start_new_session=True
    )
    try:
        assert processes_under(mine) == [stray.pid]
        cleanup_directory(mine)
        assert stray.wait(timeout=10) is not None
        assert not mine.exists()
        assert bystander.poll() is None
    finally:
        for p in (stray, bystander):
            p.kill()
            p.wait()


def test_kind_plan_creates_one_cluster_each_and_runs_kwok_in_full_mode(tmp_path: Path) -> None:
    fed = KindFederation("demo", workers=2, full=True, root=tmp_path)
    plan = fed.up_plan()
    creates = [s.argv for s in plan if s.argv[:3] == ("kind", "create", "cluster")]
    assert [a[3] for a in creates] == [
        "--name=kfed-demo-manager",
        "--name=kfed-demo-worker-1",
        "--name=kfed-demo-worker-2",
    ]
    assert all(f"--kubeconfig={tmp_path}/demo/" in a[4] for a in creates)
    applies = [s for s in plan if "apply" in s.argv]
    assert len(applies) == 2, "the manager has no GPU nodes"
    assert "rtx-a1000" in (applies[0].input or "") and "h100" in (applies[1].input or "")
    kwoks = [s for s in plan if s.background]
    assert len(kwoks) == 3 and all(f"--config={STAGES_FILE}" in s.argv for s in kwoks)
    assert next(s.argv for s in fed.down_plan()) == (
        "kind",
        "delete",
        "cluster",
        "--name=kfed-demo-manager",
    )


def test_kind_plan_without_full_mode_only_creates_clusters(tmp_path: Path) -> None:
    plan = KindFederation("lite", workers=1, root=tmp_path).up_plan()
    assert len(plan) == 2 and not any(s.background for s in plan)
