"""What goes wrong starting or driving a local cluster, as exceptions that say why."""

from __future__ import annotations

import subprocess


class KubectlError(subprocess.CalledProcessError):
    """kubectl failed; the message carries what kubectl said."""

    def __init__(self, result: subprocess.CompletedProcess[str]) -> None:
        super().__init__(result.returncode, result.args, result.stdout, result.stderr)

    def __str__(self) -> str:
        args = " ".join(str(a) for a in self.cmd[2:])
        return f"kubectl {args} failed ({self.returncode}): {(self.stderr or '').strip()}"


class ClusterStartError(RuntimeError):
    """A control-plane process did not come up; the message carries its log tail."""
