"""The observability server of a manager or worker shim process (aiohttp):

- ``/healthz``: 200 while the process's event loop answers (liveness);
- ``/readyz``: 200 once the process can do its work (its informers synced; on a manager,
  leadership known), else 503 with the reason;
- ``/metrics``: Prometheus' text format, from the process's own registry; the state gauges
  are set from the in-memory views right before (see ``telemetry.metrics``);
- ``/dashboard``: one self-contained page that refreshes itself from
  ``/dashboard/state.json``, with charts of the recent past (``/dashboard/charts/NAME.svg``,
  drawn here from a sample taken every few seconds; their data: ``/dashboard/history.json``);
- ``/workloads/NS/NAME``: one workload's page (its timeline, the dispatch decision);
- ``/apis/visibility.kueue.x-k8s.io/...``: Kueue's visibility API, the pending workloads of
  a ClusterQueue or LocalQueue with their positions (``federation/visibility.py``).

Plain HTTP by default (on loopback unless ``--metrics-host`` says otherwise). Served securely
(``SecureServing``, ``--metrics-secure``): TLS (``servingtls.py``), and every path but
``/healthz`` and ``/readyz`` behind a bearer token checked by TokenReview and
SubjectAccessReview (``access.py``); the kubelet probes those two over HTTPS without one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from manager.controllers.state import ClusterState
from manager.federation import visibility
from manager.observability import dashboard, workloadpage
from manager.observability.access import DelegatedAccess, require_access
from manager.observability.history import CHARTS, History
from manager.observability.servingtls import ServingTLS
from manager.observability.state import Snapshot, to_json
from manager.observability.workloadpage import WorkloadDetails
from manager.telemetry.metrics import Metrics

log = logging.getLogger(__name__)

HEALTHZ, READYZ, METRICS, DASHBOARD = "/healthz", "/readyz", "/metrics", "/dashboard"
STATE_JSON = "/dashboard/state.json"
HISTORY_JSON = "/dashboard/history.json"
WORKLOAD_PAGE = "/workloads/{namespace}/{name}"
OPEN_PATHS = frozenset({HEALTHZ, READYZ})
"""Served without a token on a secure port: the kubelet's probes carry none."""


@dataclass(frozen=True, slots=True)
class SecureServing:
    """How a secure observability port serves: its TLS, and who may read it."""

    tls: ServingTLS
    access: DelegatedAccess


class Source(Protocol):
    """What a process shows (see sources.py)."""

    @property
    def metrics(self) -> Metrics: ...

    @property
    def history(self) -> History: ...

    def record_history(self, now: float | None = None) -> None: ...

    async def workload_details(self, namespace: str, name: str) -> WorkloadDetails | None: ...

    def readiness(self) -> tuple[bool, str]: ...

    def refresh_metrics(self) -> None: ...

    def snapshot(self) -> Snapshot: ...

    def cluster_state(self) -> tuple[ClusterState | None, str]: ...


def create_app(
    source: Source, *, clock: Callable[[], float] = time.time, middlewares: Sequence[Any] = ()
) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        ready, why = source.readiness()
        if ready:
            return web.Response(text=f"ok: {why}\n")
        return web.Response(status=503, text=f"not ready: {why}\n")

    async def metrics(_: web.Request) -> web.Response:
        source.refresh_metrics()
        body, content_type = source.metrics.exposition()
        response = web.Response(body=body)
        response.headers["Content-Type"] = content_type
        return response

    async def page(_: web.Request) -> web.Response:
        return web.Response(text=dashboard.PAGE, content_type="text/html", charset="utf-8")

    async def state(_: web.Request) -> web.Response:
        response = web.json_response(to_json(source.snapshot(), now=clock()))
        response.headers["Cache-Control"] = "no-store"
        return response

    async def chart(request: web.Request) -> web.Response:
        name = request.match_info["chart"]
        if name not in CHARTS:
            raise web.HTTPNotFound(text=f"no chart {name!r}; charts: {', '.join(CHARTS)}\n")
        response = web.Response(
            text=source.history.chart(name, now=clock()), content_type="image/svg+xml"
        )
        response.headers["Cache-Control"] = "no-store"
        return response

    async def history(_: web.Request) -> web.Response:
        return web.json_response(source.history.to_json())

    async def workload(request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        state, why = source.cluster_state()
        if state is None:
            raise web.HTTPServiceUnavailable(text=f"no workloads shown here: {why}\n")
        details = await source.workload_details(namespace, name)
        if details is None:
            raise web.HTTPNotFound(text=f"no Workload {namespace}/{name}\n")
        return web.Response(
            text=workloadpage.render(details), content_type="text/html", charset="utf-8"
        )

    async def to_page(_: web.Request) -> web.Response:
        # The page fetches "state.json" relative to itself: serve it under /dashboard/.
        raise web.HTTPFound(DASHBOARD + "/")

    app = web.Application(middlewares=list(middlewares))
    app.router.add_get(HEALTHZ, healthz)
    app.router.add_get(READYZ, readyz)
    app.router.add_get(METRICS, metrics)
    app.router.add_get(DASHBOARD, to_page)
    app.router.add_get(DASHBOARD + "/", page)
    app.router.add_get(STATE_JSON, state)
    app.router.add_get(HISTORY_JSON, history)
    app.router.add_get("/dashboard/charts/{chart}.svg", chart)
    app.router.add_get(WORKLOAD_PAGE, workload)
    app.router.add_get("/", to_page)
    visibility.add_routes(app, source.cluster_state)
    return app


class ListenError(RuntimeError):
    """The server cannot listen where it was asked to (port taken, address not local)."""


class ObservabilityServer:
    """``create_app(source)`` served on ``host:port``; ``port=0`` picks a free port, and
    ``port`` holds the bound one once ``start()`` returned (it is logged). With ``secure``,
    over TLS and behind the access checks (module docstring)."""

    def __init__(
        self,
        source: Source,
        host: str = "127.0.0.1",
        port: int = 8080,
        *,
        secure: SecureServing | None = None,
    ) -> None:
        self.source = source
        self.host = host
        self.port = port
        self.secure = secure
        self._runner: web.AppRunner | None = None
        self._sampler: asyncio.Task[None] | None = None
        self._cert_watch: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._runner is not None:
            raise RuntimeError("the observability server is already running")
        secure = self.secure
        middlewares = [require_access(secure.access, OPEN_PATHS)] if secure else []
        runner = web.AppRunner(create_app(self.source, middlewares=middlewares), access_log=None)
        await runner.setup()
        try:
            ssl_context = secure.tls.context if secure else None
            await web.TCPSite(runner, self.host, self.port, ssl_context=ssl_context).start()
        except OSError as err:
            await runner.cleanup()
            why = str(err.strerror or err).rsplit(": ", 1)[-1]  # e.g. "address already in use"
            raise ListenError(
                f"cannot listen on {self.host}:{self.port} for health, metrics and the "
                f"dashboard: {why}"
            ) from err
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        self._sampler = asyncio.create_task(self._sample_history(), name="history sampler")
        if secure is not None:
            self._cert_watch = asyncio.create_task(secure.tls.watch(), name="metrics cert watch")
        log.info(
            "health, metrics and dashboard on %s://%s:%d (%s, %s, %s, %s)%s",
            self.scheme,
            self.host,
            self.port,
            HEALTHZ,
            READYZ,
            METRICS,
            DASHBOARD,
            "; all but the health probes need a bearer token allowed by kube-apiserver"
            if secure
            else "",
        )

    async def _sample_history(self) -> None:
        """A sample for the charts every ``history.interval`` seconds; one that fails (a view
        changing under it) is logged and skipped, never the end of the charts."""
        while True:
            try:
                self.source.record_history()
            except Exception:
                log.exception("could not take a sample for the dashboard's charts")
            await asyncio.sleep(self.source.history.interval)

    async def stop(self) -> None:
        tasks = [self._sampler, self._cert_watch]
        self._sampler = self._cert_watch = None
        for task in tasks:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def run(self) -> None:
        """Serve until cancelled (starting first, unless ``start()`` was called already)."""
        if self._runner is None:
            await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()

    @property
    def scheme(self) -> str:
        return "https" if self.secure else "http"

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"{self.scheme}://{host}:{self.port}"

    async def __aenter__(self) -> ObservabilityServer:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()
