"""Where the manager's time goes under the benchmark: py-spy samples the running manager
(``--nonblocking``: it never pauses it) into collapsed stacks, summarised here as the share
of samples each function is on the stack for (inclusive) and at the top of (self).

py-spy is a benchmark extra (``pip install -e '.[bench]'``); without it the benchmark runs
unprofiled and says so.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

_FRAME = re.compile(r"^(?P<function>[^ ]+) \((?P<file>[^:]+)(?::\d+)?\)$")


def py_spy() -> str | None:
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


class Sampler:
    """py-spy recording one process until stopped."""

    def __init__(self, pid: int, output: Path, *, rate: int = 100) -> None:
        binary = py_spy()
        if binary is None:
            raise FileNotFoundError("py-spy is not installed (pip install -e '.[bench]')")
        self.output = output
        output.parent.mkdir(parents=True, exist_ok=True)
        self._proc = subprocess.Popen(
            [
                binary,
                "record",
                "--pid",
                str(pid),
                "--rate",
                str(rate),
                "--nonblocking",
                "--format",
                "raw",
                "--output",
                str(output),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def stop(self, timeout: float = 30) -> None:
        """py-spy writes its file when interrupted."""
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)
        try:
            self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def frame_name(frame: str) -> str:
    """``function (path/to/module.py:12)`` -> ``module.py:function``: kfed's own files from
    below ``manager/`` (``federation/engine/dispatch.py``), others by their last two parts."""
    match = _FRAME.match(frame.strip())
    if match is None:
        return frame.strip()
    parts = Path(match["file"]).parts
    if "manager" in parts:
        where = "/".join(parts[len(parts) - parts[::-1].index("manager") :])
    else:
        where = "/".join(parts[-2:]) if len(parts) >= 2 else match["file"]
    return f"{where}:{match['function']}"


@dataclass
class Profile:
    samples: int = 0
    inclusive: Counter[str] = field(default_factory=Counter)
    self_time: Counter[str] = field(default_factory=Counter)

    @classmethod
    def parse(cls, text: str) -> Profile:
        """py-spy's raw format: one line per distinct stack, ``frame;frame;... count``,
        outermost first."""
        profile = cls()
        for line in text.splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            frames = [frame_name(f) for f in stack.split(";") if f]
            if not frames:
                continue
            profile.samples += count
            for name in set(frames):
                profile.inclusive[name] += count
            profile.self_time[frames[-1]] += count
        return profile

    def top(self, n: int = 15, *, inclusive: bool = True) -> list[tuple[str, float]]:
        counts = self.inclusive if inclusive else self.self_time
        total = max(self.samples, 1)
        return [(name, count / total) for name, count in counts.most_common(n)]

    def render(self, n: int = 15) -> str:
        lines = [f"  {self.samples} samples; self time (on top of the stack):"]
        lines += [f"    {share:6.1%}  {name}" for name, share in self.top(n, inclusive=False)]
        lines.append("  inclusive (on the stack), kfed's own frames:")
        own = [
            (name, share)
            for name, share in self.top(200)
            if name.split("/")[0] in {"federation", "controllers", "kube", "core", "telemetry"}
        ][:n]
        lines += [f"    {share:6.1%}  {name}" for name, share in own]
        return "\n".join(lines)
