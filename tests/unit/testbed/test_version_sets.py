"""The two sets of versions.env (issue #45): the pinned one and the newest; one is the bed's
(BED_VERSIONS, $KFED_BED_VERSIONS), the other built on demand; a cluster runs the binaries of
its own set, so one fleet can mix them."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e import binaries
from e2e.__main__ import _cluster_versions
from e2e.local.cluster import LocalCluster
from e2e.local.federation import LocalFederation
from e2e.local.ports import Ports


def as_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def test_the_newest_set_is_a_newer_kubernetes_than_the_pinned_one() -> None:
    pinned = binaries.read_versions(versions="pinned")
    newest = binaries.read_versions(versions="newest")
    assert as_tuple(newest.kubernetes) > as_tuple(pinned.kubernetes)
    assert as_tuple(newest.etcd) >= as_tuple(pinned.etcd)
    assert as_tuple(newest.kwok) >= as_tuple(pinned.kwok)
    with pytest.raises(ValueError, match="pinned, newest"):
        binaries.read_versions(versions="latest")


def test_the_bed_runs_the_set_versions_env_names_unless_the_environment_says_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KFED_BED_VERSIONS", raising=False)
    assert binaries.bed_set() == binaries._pins()["BED_VERSIONS"]
    for chosen, other in (("newest", "pinned"), ("pinned", "newest")):
        monkeypatch.setenv("KFED_BED_VERSIONS", chosen)
        assert (binaries.bed_set(), binaries.other_set()) == (chosen, other)
        assert binaries.read_versions() == binaries.read_versions(versions=chosen)
        pinned_kueue, newest_kueue = binaries.kueue_versions()
        assert binaries.bed_kueue_version() == (
            newest_kueue if chosen == "newest" else pinned_kueue
        )
        assert LocalCluster("c", Path("/nonexistent"), Ports(1, 2, 3)).versions == chosen
    monkeypatch.setenv("KFED_BED_VERSIONS", "latest")
    with pytest.raises(ValueError, match="pinned, newest"):
        binaries.bed_set()


def test_a_missing_newest_binary_says_how_to_build_that_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KFED_CACHE_DIR", str(tmp_path))
    with pytest.raises(binaries.BinariesMissing, match="make binaries-newest"):
        binaries.path_of("kube-apiserver", versions="newest")
    assert not binaries.built("newest")


def test_each_cluster_runs_the_binaries_of_its_own_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KFED_CACHE_DIR", str(tmp_path))
    for versions in binaries.VERSION_SETS:
        v = binaries.read_versions(versions=versions)
        for directory, names in (
            (f"k8s-v{v.kubernetes}", ("kube-apiserver", "kubectl")),
            (f"etcd-v{v.etcd}", ("etcd",)),
        ):
            folder = tmp_path / "bin" / directory
            folder.mkdir(parents=True, exist_ok=True)
            (folder / ".done").touch()
            for name in names:
                (folder / name).touch()
    old = LocalCluster("w1", tmp_path / "w1", Ports(1, 2, 3), versions="pinned")
    new = LocalCluster("w2", tmp_path / "w2", Ports(4, 5, 6), versions="newest")
    newest = binaries.read_versions(versions="newest").kubernetes
    assert f"k8s-v{newest}" in str(new._binary("kube-apiserver"))
    assert f"k8s-v{newest}" not in str(old._binary("kube-apiserver"))
    assert LocalCluster.from_state(new.to_state()).versions == "newest"


def test_a_mixed_fleet_names_the_set_of_some_clusters(tmp_path: Path) -> None:
    fed = LocalFederation(
        "mix",
        workers=2,
        root=tmp_path,
        versions="newest",
        cluster_versions={"worker-1": "pinned"},
    )
    assert {c.name: c.versions for c in fed} == {
        "manager": "newest",
        "worker-1": "pinned",
        "worker-2": "newest",
    }
    assert _cluster_versions("worker-1=pinned, manager=newest") == {
        "worker-1": "pinned",
        "manager": "newest",
    }
    with pytest.raises(ValueError, match="CLUSTER=pinned"):
        _cluster_versions("worker-1=1.34")


def test_a_clusters_operators_follow_its_set_unless_the_fleet_names_one(tmp_path: Path) -> None:
    fed = LocalFederation(
        "ops",
        workers=1,
        root=tmp_path,
        versions="newest",
        cluster_versions={"worker-1": "pinned"},
    )
    assert {c.name: c.operators_set for c in fed} == {"manager": "newest", "worker-1": "pinned"}
    pinned_ops = LocalFederation("ops2", workers=1, root=tmp_path, versions="newest",
                                 operator_versions="pinned")  # fmt: skip
    assert {c.operators_set for c in pinned_ops} == {"pinned"}
    restored = LocalCluster.from_state(pinned_ops.cluster("worker-1").to_state())
    assert (restored.versions, restored.operators_set) == ("newest", "pinned")


def test_a_missing_newest_operator_says_how_to_build_that_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KFED_CACHE_DIR", str(tmp_path))
    with pytest.raises(binaries.BinariesMissing, match="make binaries-newest"):
        binaries.operator_dir("trainer", versions="newest")
