"""The kernel settings a real node changes are saved once and restored after the last node
stops, also when a node's run was killed (its holder is gone): on a stand-in /proc/sys and
/run, so the host's own settings are never touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.realnode import kernel

ORIGINAL = {name: "0" for name in kernel.KUBELET_SYSCTLS} | {"fs.inotify.max_user_instances": "128"}
# What a kubelet writes (pkg/kubelet/cm/container_manager_linux.go).
KUBELET_WRITES = {"vm.overcommit_memory": "1", "kernel.panic": "10", "kernel.panic_on_oops": "1"}


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proc-sys"
    monkeypatch.setattr(kernel, "SYSCTL_ROOT", root)
    monkeypatch.setenv("KFED_REALNODE_RUN_DIR", str(tmp_path / "run"))
    for name, value in ORIGINAL.items():
        path = root / name.replace(".", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")
    return tmp_path


def node_dir(host: Path, name: str) -> Path:
    directory = host / name
    directory.mkdir()
    return directory


def kubelet_starts() -> None:
    for name, value in KUBELET_WRITES.items():
        kernel._path(name).write_text(value)


def test_the_last_node_to_stop_restores_what_the_first_saved(host: Path) -> None:
    first, second = node_dir(host, "a"), node_dir(host, "b")
    assert kernel.hold(first) == ORIGINAL
    assert kernel.read("fs.inotify.max_user_instances") == "1024"
    kubelet_starts()
    assert kernel.hold(second) == ORIGINAL, "the host's values, not the first kubelet's"

    assert kernel.release(first) == {}, "the second node still runs"
    assert kernel.read("kernel.panic") == "10"
    restored = kernel.release(second)
    assert restored == {n: ORIGINAL[n] for n in (*KUBELET_WRITES, "fs.inotify.max_user_instances")}
    assert kernel.current() == ORIGINAL
    assert not (host / "run" / "sysctls.json").exists()


def test_a_killed_runs_changes_are_undone_once_its_start_up_grace_is_over(
    host: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    killed = node_dir(host, "killed")
    kernel.hold(killed)
    kubelet_starts()
    assert kernel.release_stale() == {}, "within its start-up grace it still counts"
    monkeypatch.setattr(kernel, "_START_GRACE", 0.0)  # as if it started long ago
    kernel.release_stale()
    assert kernel.current() == ORIGINAL
