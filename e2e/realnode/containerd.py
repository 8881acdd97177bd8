"""The node's own containerd (Debian's package): state, root, socket and runc root under the
node's directory, its CRI plugin on, cgroupfs, the registry-free pause image as the sandbox
image, and a loopback-only CNI network list (host-network Pods need no CNI; the list only lets
the runtime report its network ready, so the node is Ready)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from e2e.waiting import WaitTimeout, wait_for_sync

# The name e2e/realnode/pause/build.sh gives the image.
PAUSE_IMAGE = "kfed.local/pause:1.0"
PAUSE_BUILD_SCRIPT = Path(__file__).with_name("pause") / "build.sh"
# Kubernetes' CRI namespace: images must be imported here for the kubelet to see them.
K8S_NAMESPACE = "k8s.io"
# Unix socket paths are limited to 107 bytes.
_MAX_SOCKET_PATH = 107
# Debian's containernetworking-plugins, when installed, give loopback-only Pods a real `lo`.
_CNI_PLUGIN_DIRS = (Path("/usr/lib/cni"), Path("/opt/cni/bin"))


class ContainerdError(RuntimeError):
    """containerd or ctr failed; the message carries what they said."""


@dataclass(frozen=True, slots=True)
class Containerd:
    directory: Path

    @property
    def socket(self) -> Path:
        return self.directory / "containerd.sock"

    @property
    def config_file(self) -> Path:
        return self.directory / "config.toml"

    @property
    def endpoint(self) -> str:
        return f"unix://{self.socket}"

    def argv(self) -> list[str]:
        return [_which("containerd"), "--config", str(self.config_file)]

    def write_config(self) -> None:
        if len(str(self.socket)) + len(".ttrpc") > _MAX_SOCKET_PATH:
            raise ContainerdError(
                f"{self.socket}: too long for a unix socket; use a shorter state directory"
            )
        net_d = self.directory / "cni" / "net.d"
        net_d.mkdir(parents=True, exist_ok=True)
        (net_d / "10-kfed-loopback.conflist").write_text(
            json.dumps(
                {"cniVersion": "1.0.0", "name": "kfed-loopback", "plugins": [{"type": "loopback"}]}
            )
        )
        plugins = next((d for d in _CNI_PLUGIN_DIRS if d.is_dir()), self.directory / "cni" / "bin")
        d = self.directory
        self.config_file.write_text(
            f"""\
version = 2
root = "{d / "root"}"
state = "{d / "state"}"
# Plugins this node does not use, so that their probes do not fill the log.
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.opt",
]

[grpc]
  address = "{self.socket}"

[ttrpc]
  address = "{self.socket}.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # The kubelet asks for a negative oom_score_adj for sandboxes; where this process lacks
  # CAP_SYS_RESOURCE (a VM or container sandbox), runc would fail to start any Pod.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{plugins}"
    conf_dir = "{net_d}"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{d / "runc"}"
"""
        )

    def ctr(
        self, *args: str, input_file: Path | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        argv = [_which("ctr"), "--address", str(self.socket), "--namespace", K8S_NAMESPACE, *args]
        if input_file is None:
            result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        else:
            with input_file.open("rb") as stdin:
                done = subprocess.run(argv, stdin=stdin, capture_output=True, timeout=timeout)
            result = subprocess.CompletedProcess(
                done.args, done.returncode, done.stdout.decode(errors="replace"),
                done.stderr.decode(errors="replace"),
            )  # fmt: skip
        if result.returncode != 0:
            raise ContainerdError(f"ctr {' '.join(args)} failed: {result.stderr.strip()}")
        return result

    def answers(self) -> bool:
        if not self.socket.exists():
            return False
        try:
            self.ctr("version", timeout=5)
        except (ContainerdError, subprocess.TimeoutExpired):
            return False
        return True

    def wait_ready(self, alive: Callable[[], bool], log: Path, *, timeout: float = 30.0) -> None:
        """Until ctr gets an answer and the CRI plugin is loaded; ``alive`` says whether the
        process still runs, ``log`` is where it writes."""

        def answers_or_dead() -> bool:
            if not alive():
                raise ContainerdError(f"containerd exited while starting; see {log}")
            return self.answers()

        try:
            wait_for_sync(answers_or_dead, timeout=timeout, what="containerd", interval=0.2)
        except WaitTimeout:
            raise ContainerdError(
                f"containerd did not answer on {self.socket} within {timeout:.0f}s; see {log}"
            ) from None
        # containerd serves even when its CRI plugin failed to load (it logs why), and the
        # kubelet would only say "unknown service runtime.v1.RuntimeService".
        cri = [line.split() for line in self.ctr("plugins", "list").stdout.splitlines()]
        status = next((f[-1] for f in cri if f[:2] == ["io.containerd.grpc.v1", "cri"]), "missing")
        if status != "ok":
            raise ContainerdError(f"containerd's CRI plugin is {status}: {log} says why")

    def import_archive(self, archive: Path, *, timeout: float = 600) -> list[str]:
        """Import a `docker save` (or OCI) archive into the CRI namespace; returns the image
        names it now holds."""
        self.ctr("images", "import", "--snapshotter", "overlayfs", "-", input_file=archive,
                 timeout=timeout)  # fmt: skip
        return self.images()

    def images(self) -> list[str]:
        return [n for n in self.ctr("images", "list", "--quiet").stdout.split() if n]

    def import_pause_image(self) -> None:
        self.import_archive(build_pause_image())


def build_pause_image() -> Path:
    """The pause image archive (built once, cached by its source's hash)."""
    result = subprocess.run(
        ["bash", str(PAUSE_BUILD_SCRIPT)], capture_output=True, text=True, timeout=600
    )
    if result.returncode != 0:
        raise ContainerdError(f"building the pause image failed: {result.stderr.strip()}")
    return Path(result.stdout.strip().splitlines()[-1])


def _which(command: str) -> str:
    found = shutil.which(command)
    if found is None:
        raise ContainerdError(f"{command} is not installed (apt-get install -y containerd)")
    return found
