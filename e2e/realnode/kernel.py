"""The host kernel settings a kubelet changes when it starts (its container manager sets them
unless ``protectKernelDefaults``, which would instead refuse to start on a machine whose values
differ), and the inotify limit a node raises: saved before the first node of this machine
starts, restored after the last one stops.

The record lives in /run (gone at reboot, like the settings themselves), shared by every node
on the machine: the values are saved once, while no node holds them, and each node holds them
by its directory. A holder whose kubelet and containerd are gone (a run killed with -9) no
longer counts once it is past its start-up grace, so the next node to stop, or
``release_stale``, restores them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from e2e.local.federation import processes_under

# What kubelet's setupKernelTunables writes (pkg/kubelet/cm/container_manager_linux.go).
KUBELET_SYSCTLS = (
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
)

# What a node raises for itself (never lowers): each kubelet and kube-apiserver holds several
# inotify instances, and a machine running many test beds exhausts the default 128 per user
# ("inotify_init: too many open files" and the kubelet exits). Restored like the others.
RAISED = {"fs.inotify.max_user_instances": 1024}


def run_dir() -> Path:
    return Path(os.environ.get("KFED_REALNODE_RUN_DIR", "/run/kfed-realnode"))


SYSCTL_ROOT = Path("/proc/sys")


def _path(name: str) -> Path:
    return SYSCTL_ROOT / name.replace(".", "/")


def read(name: str) -> str:
    return _path(name).read_text().strip()


def current() -> dict[str, str]:
    names = (*KUBELET_SYSCTLS, *RAISED)
    return {name: read(name) for name in names if _path(name).exists()}


@contextlib.contextmanager
def _record() -> Iterator[dict[str, Any]]:
    """The shared record, locked for the duration (one machine-wide lock file)."""
    directory = run_dir()
    directory.mkdir(parents=True, exist_ok=True)
    record_file = directory / "sysctls.json"
    with (directory / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record: dict[str, Any] = {"saved": None, "holders": {}}
        with contextlib.suppress(FileNotFoundError, ValueError):
            record = json.loads(record_file.read_text())
        yield record
        if record["holders"]:
            tmp = record_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(record, indent=2))
            tmp.replace(record_file)
        else:
            record_file.unlink(missing_ok=True)


# A node holds the settings before its first process starts: that long it counts as alive.
_START_GRACE = 120.0


def _alive(holder: str, since: float) -> bool:
    if not Path(holder).is_dir():
        return False
    return time.time() - since < _START_GRACE or bool(processes_under(Path(holder)))


def _restore_when_unheld(record: dict[str, Any]) -> dict[str, str]:
    record["holders"] = {h: t for h, t in record["holders"].items() if _alive(h, t)}
    if record["holders"] or not record["saved"]:
        return {}
    restored = {}
    for name, value in record["saved"].items():
        if read(name) != value:
            _path(name).write_text(value)
            restored[name] = value
    record["saved"] = None
    return restored


def hold(node_directory: Path) -> dict[str, str]:
    """Call before the node's first process starts: saves the settings unless a live node
    already did (its saved values are the host's own; the current ones may be a kubelet's),
    then raises ``RAISED``. Returns the saved values."""
    with _record() as record:
        _restore_when_unheld(record)  # a dead run's changes first, so we save the originals
        if not record["saved"]:
            record["saved"] = current()
        for name, wanted in RAISED.items():
            if _path(name).exists() and int(read(name)) < wanted:
                _path(name).write_text(str(wanted))
        record["holders"][str(node_directory)] = time.time()
        saved: dict[str, str] = record["saved"]
        return saved


def release(node_directory: Path) -> dict[str, str]:
    """Call after a kubelet stopped: restores the saved settings when no live node holds them
    any more. Returns what was written back (name -> value)."""
    with _record() as record:
        record["holders"].pop(str(node_directory), None)
        return _restore_when_unheld(record)


def release_stale() -> dict[str, str]:
    """Restore the settings if every node that held them is gone."""
    with _record() as record:
        return _restore_when_unheld(record)
