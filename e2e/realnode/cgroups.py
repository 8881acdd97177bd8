"""A node's own cgroup root (the kubelet's ``cgroupRoot``) in every hierarchy: made before
the kubelet starts (it refuses a root that is missing anywhere), emptied and removed when the
node stops, which also ends every container process it held."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from e2e.realnode.host import cgroup_hierarchies
from e2e.waiting import WaitTimeout, wait_for_sync


def create(name: str) -> None:
    """``/<name>`` in every hierarchy. cpuset v1 does not inherit its CPUs and memory nodes:
    a new cpuset is empty (no task may join) until they are copied from the parent."""
    for hierarchy in cgroup_hierarchies():
        directory = hierarchy / name
        directory.mkdir(exist_ok=True)
        for setting in ("cpuset.cpus", "cpuset.mems"):
            own, parent = directory / setting, hierarchy / setting
            if own.exists() and parent.exists() and not own.read_text().strip():
                own.write_text(parent.read_text())


def _tree(root: Path) -> list[Path]:
    """Every cgroup under ``root`` (itself included), deepest first."""
    if not root.is_dir():
        return []
    found = [Path(d) for d, _, _ in os.walk(root)]
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def _pids(root: Path) -> set[int]:
    pids: set[int] = set()
    for group in _tree(root):
        with contextlib.suppress(OSError):
            pids.update(int(p) for p in (group / "cgroup.procs").read_text().split())
    return pids


def remove(name: str, *, timeout: float = 15.0) -> list[str]:
    """SIGKILL every process left under ``/<name>`` (the node's containers), then remove the
    cgroups, deepest first. Returns what could not be removed (empty when all went)."""
    roots = [h / name for h in cgroup_hierarchies()]

    def killed_all() -> bool:
        pids = set().union(*(_pids(r) for r in roots)) if roots else set()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        return not pids

    # The kernel needs a moment to reap them before rmdir works; what stays is reported.
    with contextlib.suppress(WaitTimeout):
        wait_for_sync(killed_all, timeout=timeout, what=f"cgroup {name} empty", interval=0.1)
    left = []
    for root in roots:
        for group in _tree(root):
            try:
                group.rmdir()
            except FileNotFoundError:
                pass
            except OSError as err:
                left.append(f"{group}: {err.strerror}")
    return left
