"""Breaking a worker cluster for a drill, and always putting it back.

The CLI holds only the manager's kubeconfig, so it breaks what the manager sees:

- ``partition``: the server in the worker's kubeconfig Secret is pointed at a *blackhole*, an
  address where connections hang. The manager loses the worker while the worker keeps
  running, so its shim fences the manager's workloads when the lease renewals stop: exactly
  a network partition as the manager experiences it. The default blackhole is a listener the
  drill opens on this host that accepts connections and never answers (it only works when
  the manager runs on this host; the drill checks that the manager did connect to it);
  ``--blackhole HOST:PORT`` names one for other setups (a non-routable address).
- ``outage``: the server is pointed at ``127.0.0.1:1``, where connections are refused at
  once, as when the worker's apiserver is down; or, with ``--break-command``, a command
  really stops the worker (and ``--restore-command`` starts it again), leaving the Secret
  alone.
- ``maintenance``: the ``drain`` annotation, the code path of ``kfed cluster drain``.

While a Secret or MultiKueueCluster is changed it carries the annotation ``kfed.io/drill``
(the run, the kind, the original server), so that ``kfed drill restore`` can put back what an
interrupted drill left, and a second drill refuses to start on top of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from manager.api import constants as C
from manager.api.view import annotations_of
from manager.cli.common import CliError
from manager.cli.drills.servers import (
    _CONFLICT_ATTEMPTS,
    DRILL_ANNOTATION,
    drill_marker,
    encode,
    secret_kubeconfig,
    server_of,
    with_server,
)
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]

# -- the blackhole -----------------------------------------------------------------------------


@dataclass
class Blackhole:
    """A TCP listener on this host that accepts connections and never answers: a client's
    TLS handshake hangs until its own timeout, as across a partition."""

    host: str = "127.0.0.1"
    port: int = 0
    connections: int = 0
    _server: asyncio.Server | None = None
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    async def start(self) -> Blackhole:
        self._server = await asyncio.start_server(self._swallow, self.host, self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def _swallow(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        try:
            while await reader.read(65536):
                pass  # read and drop: never a byte back
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            writers = list(self._writers)
            for writer in writers:
                writer.close()
            # Closing completes on the loop: wait for it, or the sockets outlive the loop.
            for writer in writers:
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None


# -- breaking and restoring --------------------------------------------------------------------


@dataclass
class SecretSwap:
    """Point the worker's kubeconfig Secret at another server; put the original back."""

    api: KubeApi
    namespace: str
    secret: str
    server: str
    """Where the manager will be sent."""
    run_id: str
    kind: str
    original_data: str = ""
    broken_data: str = ""

    def describe(self) -> str:
        return (
            f"Secret {self.namespace}/{self.secret} pointed at {self.server} "
            f"({'connections hang' if self.kind == 'partition' else 'connections refused'})"
        )

    async def apply(self) -> None:
        obj = await self.api.get(R.SECRETS, self.secret, self.namespace)
        text = secret_kubeconfig(obj)
        try:
            broken = with_server(text, self.server)
            original_server = server_of(text)
        except ValueError as err:
            raise CliError(f"Secret {self.namespace}/{self.secret}: {err}") from None
        self.original_data = str(obj["data"][C.MULTIKUEUE_KUBECONFIG_SECRET_KEY])
        self.broken_data = encode(broken)
        marker = drill_marker(self.run_id, self.kind, original_server=original_server)
        await self.api.patch(
            R.SECRETS,
            self.secret,
            {
                "metadata": {
                    "resourceVersion": obj["metadata"]["resourceVersion"],
                    "annotations": {DRILL_ANNOTATION: marker},
                },
                "data": {C.MULTIKUEUE_KUBECONFIG_SECRET_KEY: self.broken_data},
            },
            self.namespace,
        )

    async def restore(self) -> list[str]:
        where = f"Secret {self.namespace}/{self.secret}"
        if not self.broken_data:
            return []
        for _ in range(_CONFLICT_ATTEMPTS):
            obj = await self.api.get(R.SECRETS, self.secret, self.namespace)
            current = (obj.get("data") or {}).get(C.MULTIKUEUE_KUBECONFIG_SECRET_KEY)
            if current == self.original_data:
                self.broken_data = ""
                return []  # the break never landed
            if current != self.broken_data:
                return [
                    f"{where} was changed by someone else during the drill: left as it is "
                    "(check its server)"
                ]
            try:
                await self.api.patch(
                    R.SECRETS,
                    self.secret,
                    {
                        "metadata": {
                            "resourceVersion": obj["metadata"]["resourceVersion"],
                            "annotations": {DRILL_ANNOTATION: None},
                        },
                        "data": {C.MULTIKUEUE_KUBECONFIG_SECRET_KEY: self.original_data},
                    },
                    self.namespace,
                )
            except errors.Conflict:
                continue
            self.broken_data = ""
            return [f"{where} holds its original kubeconfig again"]
        raise CliError(f"{where} kept changing while the drill restored it: check its server")


@dataclass
class CommandBreak:
    """Run shell commands that really stop and start the worker (e.g. ``docker pause``)."""

    break_command: str
    restore_command: str | None
    timeout: float
    broken: bool = False

    def describe(self) -> str:
        return f"ran {self.break_command!r}" + (
            f" (restore: {self.restore_command!r})" if self.restore_command else ""
        )

    async def _run(self, command: str, what: str) -> None:
        proc = await asyncio.create_subprocess_shell(
            command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        try:
            async with asyncio.timeout(self.timeout):
                output, _ = await proc.communicate()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise CliError(
                f"{what} {command!r} did not finish within {self.timeout:g}s; check it by hand"
            ) from None
        if proc.returncode != 0:
            lines = output.decode(errors="replace").strip().splitlines()
            tail = f": {lines[-1]}" if lines else ""
            raise CliError(f"{what} {command!r} exited with {proc.returncode}{tail}")

    async def apply(self) -> None:
        self.broken = True  # even a failed command may have broken something: restore anyway
        await self._run(self.break_command, "--break-command")

    async def restore(self) -> list[str]:
        if not self.broken:
            return []
        self.broken = False
        if not self.restore_command:
            return ["no --restore-command: bring the cluster back yourself"]
        await self._run(self.restore_command, "--restore-command")
        return [f"ran {self.restore_command!r}"]


@dataclass
class Drain:
    """``kfed cluster drain`` for the drill, and ``uncordon`` afterwards (only if it is still
    our drain)."""

    api: KubeApi
    cluster: str
    run_id: str
    applied: bool = False

    def describe(self) -> str:
        return f"MultiKueueCluster {self.cluster} annotated {C.MAINTENANCE_ANNOTATION}=drain"

    async def apply(self) -> None:
        self.applied = True
        await self.api.patch(
            R.MULTIKUEUE_CLUSTERS,
            self.cluster,
            {
                "metadata": {
                    "annotations": {
                        C.MAINTENANCE_ANNOTATION: C.MAINTENANCE_DRAIN,
                        DRILL_ANNOTATION: drill_marker(self.run_id, "maintenance"),
                    }
                }
            },
        )

    async def restore(self) -> list[str]:
        if not self.applied:
            return []
        obj = await self.api.get(R.MULTIKUEUE_CLUSTERS, self.cluster)
        annotations = annotations_of(obj)
        if annotations.get(C.MAINTENANCE_ANNOTATION) != C.MAINTENANCE_DRAIN:
            await self.api.patch(
                R.MULTIKUEUE_CLUSTERS,
                self.cluster,
                {"metadata": {"annotations": {DRILL_ANNOTATION: None}}},
            )
            return [
                f"{self.cluster}'s maintenance was changed by someone else during the drill: "
                "left as it is"
            ]
        await self.api.patch(
            R.MULTIKUEUE_CLUSTERS,
            self.cluster,
            {"metadata": {"annotations": {C.MAINTENANCE_ANNOTATION: None, DRILL_ANNOTATION: None}}},
        )
        self.applied = False
        return [f"{self.cluster} uncordoned"]


Breaker = SecretSwap | CommandBreak | Drain


async def wait_until(
    check: Callable[[], Awaitable[bool]], *, timeout: float, interval: float = 0.5
) -> float | None:
    """Seconds until ``await check()`` was true, or None when ``timeout`` passed first."""
    started = time.monotonic()
    while True:
        with contextlib.suppress(errors.KubeError):
            if await check():
                return time.monotonic() - started
        if time.monotonic() - started >= timeout:
            return None
        await asyncio.sleep(interval)
