"""CPU time and memory of a running process, read from /proc (Linux)."""

from __future__ import annotations

import os
from dataclasses import dataclass

_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class ProcessSample:
    cpu_seconds: float
    """user + system time so far."""
    rss_mib: float
    peak_rss_mib: float


def sample(pid: int) -> ProcessSample | None:
    """None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(") ", 1)[1].split()
        with open(f"/proc/{pid}/status") as f:
            status = dict(line.split(":", 1) for line in f if ":" in line)
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    # Fields after "pid (comm) ": state is index 0, utime 11, stime 12.
    cpu = (int(fields[11]) + int(fields[12])) / _TICKS

    def mib(key: str) -> float:
        value = status.get(key, "0 kB").split()[0]
        return int(value) / 1024

    return ProcessSample(cpu_seconds=cpu, rss_mib=mib("VmRSS"), peak_rss_mib=mib("VmHWM"))


def children(pid: int) -> dict[int, str]:
    """The direct children of a process, pid -> command name (empty when it has none)."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                head, _, rest = f.read().rpartition(") ")
        except (FileNotFoundError, ProcessLookupError):
            continue
        fields = rest.split()
        # After "pid (comm) ": state is index 0, ppid 1.
        if len(fields) > 1 and int(fields[1]) == pid:
            found[int(entry)] = head.partition(" (")[2]
    return found
