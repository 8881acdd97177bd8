"""The mounts a node leaves under its directory (the kubelet's root-dir bind mount, volume
tmpfs, containerd's rootfs overlays and sandbox shm): unmounted, deepest first, before the
directory is removed."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

_MNT_DETACH = 2


def _unescape(field: str) -> str:
    # /proc/self/mountinfo escapes space, tab, newline and backslash as octal.
    return field.encode().decode("unicode_escape")


def under(directory: Path) -> list[Path]:
    """Mount points at or below ``directory``, deepest first."""
    prefix = str(directory.resolve()).rstrip("/")
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = _unescape(line.split()[4])
        if point == prefix or point.startswith(prefix + "/"):
            found.append(Path(point))
    return sorted(set(found), key=lambda p: len(p.parts), reverse=True)


def unmount_all(directory: Path) -> list[str]:
    """Detach every mount under ``directory`` (lazily: a busy one goes once unused).
    Returns the ones that failed, with why."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    failed = []
    for point in under(directory):
        if libc.umount2(str(point).encode(), _MNT_DETACH) != 0:
            errno = ctypes.get_errno()
            if errno != 22:  # EINVAL: no longer a mount point (its parent went first)
                failed.append(f"{point}: {os.strerror(errno)}")
    return failed
