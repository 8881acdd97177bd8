"""One child process of a local control plane: started in its own session, logged to a
file, stopped with SIGTERM then SIGKILL, and findable again after the parent is gone."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Runs in the child before exec: the kernel sends SIGKILL when the parent dies, so a
    test process killed with -9 cannot leave control planes behind. "The parent" is the
    parent *thread*: start tied processes from the main thread, never from a worker thread
    (``asyncio.to_thread``), or they are killed when that thread ends."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class ManagedProcess:
    role: str
    argv: list[str]
    log_path: Path
    tie_to_parent: bool = False
    env: dict[str, str] | None = None
    cwd: Path | None = None
    _popen: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    pid: int | None = field(default=None, init=False)

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent if self.tie_to_parent else None,
                env={**os.environ, **(self.env or {})},
                cwd=self.cwd,
            )
        self.pid = self._popen.pid

    @property
    def alive(self) -> bool:
        if self._popen is not None:
            return self._popen.poll() is None
        return self.pid is not None and pid_alive(self.pid)

    def exit_code(self) -> int | None:
        return self._popen.poll() if self._popen is not None else None

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def stop(self, *, grace: float = 10.0) -> None:
        if self.pid is None:
            return
        terminate_group(self.pid, grace=grace)
        if self._popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._popen.wait(timeout=1)
        self._popen = None
        self.pid = None

    def adopt(self, pid: int | None) -> None:
        """Track ``pid``, a process another command started with this command line."""
        if self._popen is not None:
            self._popen.poll()  # reap ours if it ended
        self._popen = None
        self.pid = pid

    def kill(self) -> None:
        """SIGKILL at once, as a crash or a power cut would."""
        if self.pid is not None:
            terminate_group(self.pid, grace=0)
        if self._popen is not None:
            self._popen.wait()
        self._popen = None
        self.pid = None


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            # A zombie has exited; it only waits for its parent to reap it.
            return stat.read().split(") ", 1)[1][:1] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def cmdline_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _signal(pid: int, sig: signal.Signals) -> None:
    """Signal the whole group when ``pid`` leads one (our children do: start_new_session),
    else just the process (a stray found through /proc)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


def _reap_until_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while pid_alive(pid):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def terminate_group(pid: int, *, grace: float) -> None:
    """SIGTERM ``pid`` (and its group), wait up to ``grace`` seconds, then SIGKILL."""
    if grace > 0:
        _signal(pid, signal.SIGTERM)
        if _reap_until_gone(pid, grace):
            _signal(pid, signal.SIGKILL)  # stragglers in the group
            return
    _signal(pid, signal.SIGKILL)
    _reap_until_gone(pid, 5)
