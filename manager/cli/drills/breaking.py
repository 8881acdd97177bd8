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
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from manager.api import constants as C
from manager.api.view import annotations_of
from manager.cli.common import CliError, usage_error
from manager.cli.registration import set_maintenance
from manager.federation.workers import kubeconfig
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]

DRILL_ANNOTATION = "kfed.io/drill"
"""On a Secret or MultiKueueCluster a drill has changed: JSON with the run, the kind, when it
started and (for a Secret) the original server."""
REFUSED_SERVER = "https://127.0.0.1:1"
"""Nothing listens on port 1: every connection is refused at once (an apiserver that is down)."""
_CONFLICT_ATTEMPTS = 5


# -- kubeconfig server rewriting (pure) ---------------------------------------------------------


def _current_cluster(config: Any) -> Obj:
    if not isinstance(config, dict):
        raise ValueError("the kubeconfig is not a YAML mapping")
    context_name = config.get("current-context")
    contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or []}
    if context_name not in contexts:
        raise ValueError(f"the kubeconfig has no current context {context_name!r}")
    cluster_name = contexts[context_name].get("cluster")
    for entry in config.get("clusters") or []:
        if entry.get("name") == cluster_name and isinstance(entry.get("cluster"), dict):
            cluster: Obj = entry["cluster"]
            return cluster
    raise ValueError(f"the kubeconfig has no cluster {cluster_name!r}")


def server_of(kubeconfig_text: str) -> str:
    """The server of the kubeconfig's current context."""
    return str(_current_cluster(yaml.safe_load(kubeconfig_text)).get("server") or "")


def with_server(kubeconfig_text: str, server: str) -> str:
    """The same kubeconfig with the current context's server replaced; everything else (CA,
    credentials, other contexts) is kept. Raises ValueError for a malformed kubeconfig."""
    try:
        config = yaml.safe_load(kubeconfig_text)
    except yaml.YAMLError as err:
        raise ValueError(f"the kubeconfig is not YAML: {err}") from None
    _current_cluster(config)["server"] = server
    return yaml.safe_dump(config, sort_keys=False)


def secret_kubeconfig(secret: Obj) -> str:
    try:
        return kubeconfig.from_secret(secret)
    except kubeconfig.KubeconfigRejected as err:
        raise CliError(str(err)) from None


def encode(text: str) -> str:
    return kubeconfig.secret_data(text)[C.MULTIKUEUE_KUBECONFIG_SECRET_KEY]


def server_url(address: str) -> str:
    """``HOST:PORT`` (or an https URL) as an https server URL; a usage error otherwise."""
    url = address if "://" in address else f"https://{address}"
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "https" or not parts.hostname or port is None:
        raise usage_error(
            f"--blackhole {address!r} is not HOST:PORT (for example 10.255.255.1:6443)"
        )
    return urlunsplit(("https", parts.netloc, "", "", ""))


def drill_marker(run_id: str, kind: str, *, original_server: str = "") -> str:
    marker = {
        "run": run_id,
        "kind": kind,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if original_server:
        marker["originalServer"] = original_server
    return json.dumps(marker)


def read_marker(obj: Obj) -> dict[str, str] | None:
    raw = annotations_of(obj).get(DRILL_ANNOTATION)
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return {"run": "?", "kind": "?", "started": "?"}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else None


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


# -- leftovers of an interrupted drill ---------------------------------------------------------


async def leftover(api: KubeApi, cluster: str, namespace: str, secret: str) -> str | None:
    """What an earlier drill left changed on this cluster, in one phrase (None: nothing)."""
    found = []
    with contextlib.suppress(errors.NotFound):
        obj = await api.get(R.SECRETS, secret, namespace)
        marker = read_marker(obj)
        if marker is not None:
            found.append(
                f"Secret {namespace}/{secret} still points at a drill's server "
                f"(run {marker.get('run')}, {marker.get('kind')}, started {marker.get('started')})"
            )
    with contextlib.suppress(errors.NotFound):
        obj = await api.get(R.MULTIKUEUE_CLUSTERS, cluster)
        marker = read_marker(obj)
        if marker is not None:
            found.append(
                f"MultiKueueCluster {cluster} is still drained by a drill "
                f"(run {marker.get('run')}, started {marker.get('started')})"
            )
    return "; ".join(found) or None


async def repair(api: KubeApi, cluster: str, namespace: str, secret: str) -> list[str]:
    """Undo what an interrupted drill left on this cluster: the Secret's original server (from
    the annotation), and a drill's drain."""
    done = []
    with contextlib.suppress(errors.NotFound):
        obj = await api.get(R.SECRETS, secret, namespace)
        marker = read_marker(obj)
        if marker is not None:
            original = marker.get("originalServer", "")
            if not original:
                raise CliError(
                    f"Secret {namespace}/{secret} carries {DRILL_ANNOTATION} without the "
                    f"original server: re-register it (kfed cluster add {cluster} "
                    "--kubeconfig-file ...)"
                )
            try:
                text = with_server(secret_kubeconfig(obj), original)
            except ValueError as err:
                raise CliError(f"Secret {namespace}/{secret}: {err}") from None
            await api.patch(
                R.SECRETS,
                secret,
                {
                    "metadata": {
                        "resourceVersion": obj["metadata"]["resourceVersion"],
                        "annotations": {DRILL_ANNOTATION: None},
                    },
                    "data": {C.MULTIKUEUE_KUBECONFIG_SECRET_KEY: encode(text)},
                },
                namespace,
            )
            done.append(f"Secret {namespace}/{secret} points at {original} again")
    with contextlib.suppress(errors.NotFound):
        obj = await api.get(R.MULTIKUEUE_CLUSTERS, cluster)
        if read_marker(obj) is not None:
            annotations = annotations_of(obj)
            if annotations.get(C.MAINTENANCE_ANNOTATION) == C.MAINTENANCE_DRAIN:
                await set_maintenance(api, cluster, None)
                done.append(f"{cluster} uncordoned")
            await api.patch(
                R.MULTIKUEUE_CLUSTERS,
                cluster,
                {"metadata": {"annotations": {DRILL_ANNOTATION: None}}},
            )
    return done


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
