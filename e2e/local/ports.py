"""Ports for a bed's processes: free ones the kernel will let us bind, each handed out once
per process, and per pytest-xdist worker from its own range so that parallel test
processes never race for the same port."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass


@dataclass(slots=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    kwok: int = 0
    """kwok's server, the nodes' kubelet endpoint (full mode; picked when kwok starts)."""


_handed_out: set[int] = set()
"""Ports this process picked before: a port picked but not bound yet (a process still
starting) is free to the kernel and must not be handed out twice."""

PORTS_PER_TEST_PROCESS = 1500
"""Under pytest-xdist each test process picks from a range of its own below the kernel's
ephemeral ports (32768 and up on Linux): two processes asking the kernel for a free port at
the same moment could both be told the same one, and our own range never meets a client
connection's port. gw0 gets 20000-21499, gw1 21500-22999, and so on."""
_next_in_range: list[int] = []


def _xdist_range() -> range | None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return None
    start = 20000 + int(worker[2:]) * PORTS_PER_TEST_PROCESS
    return range(start, min(start + PORTS_PER_TEST_PROCESS, 32768))


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _free_ports_in(ports: range, count: int) -> list[int]:
    picked: list[int] = []
    cursor = _next_in_range[0] if _next_in_range else ports.start
    for _ in range(len(ports)):
        port = cursor
        cursor = cursor + 1 if cursor + 1 < ports.stop else ports.start
        if port not in _handed_out and _bindable(port):
            picked.append(port)
            if len(picked) == count:
                break
    else:
        raise RuntimeError(f"fewer than {count} free ports left in {ports}")
    _next_in_range[:] = [cursor]
    _handed_out.update(picked)
    return picked


def free_ports(count: int) -> list[int]:
    """Ports the kernel calls free right now and this process did not pick before; all
    sockets are held until every port is picked, so the list has no duplicates."""
    own_range = _xdist_range()
    if own_range is not None:
        return _free_ports_in(own_range, count)
    sockets = []
    picked: list[int] = []
    try:
        while len(picked) < count:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
            port = s.getsockname()[1]
            if port not in _handed_out:
                picked.append(port)
        _handed_out.update(picked)
        return picked
    finally:
        for s in sockets:
            s.close()
