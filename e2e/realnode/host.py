"""Whether this machine can run a real node, and if not, why, in one sentence a test can
skip with."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from e2e import binaries

# Debian's packages: containerd (containerd, ctr) and runc. docker.io brings both.
REQUIRED_COMMANDS = ("containerd", "ctr", "runc")
INSTALL_HINT = "apt-get install -y containerd runc (or docker.io, which brings both)"


class RealNodeUnavailable(RuntimeError):
    """This machine cannot run a real node; the message says why and what would fix it."""


def unavailable_reason() -> str | None:
    """None when a node can start here, else why not (missing root, packages, cgroups,
    overlayfs or the kubelet binary)."""
    if os.geteuid() != 0:
        return f"a real node needs root (containerd, kubelet): this is uid {os.geteuid()}"
    missing = [c for c in REQUIRED_COMMANDS if shutil.which(c) is None]
    if missing:
        return f"not installed: {', '.join(missing)} ({INSTALL_HINT})"
    if not cgroup_hierarchies():
        return "no cgroup hierarchy is mounted under /sys/fs/cgroup (the kubelet's cgroupfs driver)"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "the kernel has no overlay filesystem (containerd's overlayfs snapshotter)"
    try:
        binaries.path_of("kubelet")
    except binaries.BinariesMissing as err:
        return str(err)
    return None


def require() -> None:
    reason = unavailable_reason()
    if reason is not None:
        raise RealNodeUnavailable(reason)


def cgroup_hierarchies() -> list[Path]:
    """Mount points of the cgroup v1 hierarchies (cpu, memory, ..., name=systemd) the
    kubelet uses; on a cgroup v2-only machine, the unified hierarchy."""
    v1, v2 = [], []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "cgroup":
            v1.append(Path(fields[1]))
        elif len(fields) >= 3 and fields[2] == "cgroup2" and fields[1] == "/sys/fs/cgroup":
            v2.append(Path(fields[1]))
    return v1 or v2
