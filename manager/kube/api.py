"""One small, typed path for every call kfed makes to a Kubernetes API server.

Built on kubernetes_asyncio's ApiClient (TLS, client certificates, tokens, proxy), through
whose aiohttp session it sends plain JSON dicts, so that Kueue's custom resources and core
kinds go through the same code. Every non-watch call has a timeout and a bounded, jittered
retry for transient errors; every error is one of ``errors``' classes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlencode

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio import config
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config import incluster_config
from yarl import URL

from manager.api.view import at
from manager.kube import errors, instrument
from manager.kube.backoff import retrying
from manager.kube.pacing import Pacer
from manager.kube.resources import Resource

log = logging.getLogger(__name__)

Obj = dict[str, Any]
PatchKind = Literal["merge", "json", "strategic", "apply"]
_CONTENT_TYPES: dict[PatchKind, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}
FIELD_MANAGER = "kfed"


class InClusterConfigError(RuntimeError):
    """Not in a Pod (or its ServiceAccount is not mounted): the message says what is missing."""


def running_in_cluster(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the process looks like it runs in a Pod (kubelet sets this variable)."""
    return bool((os.environ if environ is None else environ).get("KUBERNETES_SERVICE_HOST"))


def resolve_proxy_once(client: ApiClient) -> None:
    """kubernetes_asyncio opens its aiohttp session with ``trust_env``, which makes aiohttp
    look up proxy variables and ~/.netrc in a worker thread on every request: two thread hops
    per call, a measurable share of a busy controller's CPU. A client only ever talks to one
    API server, so find its proxy (HTTPS_PROXY/NO_PROXY) once, here, and turn the per-request
    lookups off. (kfed authenticates with the kubeconfig's credentials, never from netrc.)"""
    rest = getattr(client, "rest_client", None)
    session = getattr(rest, "pool_manager", None)
    if rest is None or not isinstance(session, aiohttp.ClientSession) or not session.trust_env:
        return
    host = client.configuration.host
    if not rest.proxy and host:
        with contextlib.suppress(LookupError, ValueError):
            proxy, proxy_auth = get_env_proxy_for_url(URL(host))
            rest.proxy = str(proxy)
            if proxy_auth is not None:
                rest.proxy_headers = {
                    **(rest.proxy_headers or {}),
                    "Proxy-Authorization": proxy_auth.encode(),
                }
    session._trust_env = False  # what aiohttp reads per request


class KubeApi:
    def __init__(self, client: ApiClient, *, name: str = "", request_timeout: float = 15.0) -> None:
        self.client = client
        self.name = name
        self.request_timeout = request_timeout
        self._host = _host_of(getattr(getattr(client, "configuration", None), "host", None))
        """``rest_client_requests_total``'s ``host``: host[:port] of the API server, as
        client-go labels it (the URL's Host)."""
        resolve_proxy_once(client)
        self._pacer = Pacer(0.0, 1)
        self.paced_seconds = 0.0
        """How long requests waited for the client-side rate limit, in all."""

    def limit_rate(self, qps: float, burst: int) -> None:
        """client-go's ``QPS``/``Burst`` (Kueue's ``clientConnection``): at most ``qps``
        requests per second on average after a burst of ``burst``; ``qps`` of 0 or below is
        no limit. Each request waits its turn (none is refused); a watch counts as one
        request when it starts."""
        self._pacer = Pacer(qps, burst)

    @classmethod
    async def from_kubeconfig_file(
        cls, path: Path | str, *, context: str | None = None, name: str = ""
    ) -> KubeApi:
        client = await config.new_client_from_config(config_file=str(path), context=context)
        return cls(client, name=name or str(context or path))

    @classmethod
    async def from_in_cluster(
        cls,
        *,
        name: str = "in-cluster",
        token_file: Path | str = incluster_config.SERVICE_TOKEN_FILENAME,
        ca_file: Path | str = incluster_config.SERVICE_CERT_FILENAME,
        environ: Mapping[str, str] | None = None,
    ) -> KubeApi:
        """The Pod's own ServiceAccount: the apiserver from ``KUBERNETES_SERVICE_HOST`` and
        ``_PORT``, the CA and token kubelet mounts. The token is re-read from its file (kubelet
        rotates bound tokens), so a long-running process never uses an expired one."""
        configuration = Configuration()
        try:
            config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration,
                token_filename=str(token_file),
                cert_filename=str(ca_file),
                environ=dict(os.environ if environ is None else environ),
            )
        except config.ConfigException as err:
            raise InClusterConfigError(f"no in-cluster configuration: {err}") from None
        return cls(ApiClient(configuration), name=name)

    @classmethod
    async def connect(
        cls, kubeconfig: Path | str | None, *, context: str | None = None, name: str = ""
    ) -> KubeApi:
        """The kubeconfig file when one is given, else the Pod's ServiceAccount."""
        if kubeconfig is None:
            return await cls.from_in_cluster(name=name or "in-cluster")
        return await cls.from_kubeconfig_file(kubeconfig, context=context, name=name)

    @classmethod
    async def from_kubeconfig_dict(
        cls, kubeconfig: dict[str, Any], *, context: str | None = None, name: str = ""
    ) -> KubeApi:
        client = await config.new_client_from_config_dict(kubeconfig, context=context)
        return cls(client, name=name)

    async def close(self) -> None:
        await self.client.close()

    async def __aenter__(self) -> KubeApi:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- transport ---------------------------------------------------------------------

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: aiohttp.ClientTimeout | float | None = None,
    ) -> aiohttp.ClientResponse:
        params = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        if self._pacer.limited:
            wait = self._pacer.delay()
            if wait > 0:
                self.paced_seconds += wait
                await asyncio.sleep(wait)
        sink = instrument.sink()
        code = "<error>"
        try:
            response = await self._http(
                method,
                path,
                params,
                body,
                content_type,
                timeout if timeout is not None else self.request_timeout,
            )
            code = str(response.status)
        except (TimeoutError, aiohttp.ClientError, OSError) as err:
            raise errors.Unreachable(
                f"{self.name or 'cluster'}: {type(err).__name__}: {err}"
            ) from err
        finally:
            if sink is not None:
                sink.rest_request(self._host, method.upper(), code)
        if response.status >= 400:
            data = await response.read()
            response.release()
            raise errors.from_status(
                response.status, data, retry_after=response.headers.get("Retry-After")
            )
        return response

    async def _http(
        self,
        method: str,
        path: str,
        params: list[tuple[str, str]],
        body: Any,
        content_type: str,
        timeout: aiohttp.ClientTimeout | float,
    ) -> aiohttp.ClientResponse:
        """One request on the client's own aiohttp session (its TLS context, proxy, TLS
        server name) with the credentials the client's configuration gives now (a rotated
        token included). Not through ``ApiClient.call_api``: its generic request building
        walked every body once more to sanitise it and rebuilt headers and URL through
        regular expressions, ~3 % of a busy controller's CPU (issue #36's profile)."""
        client = self.client
        headers = {
            **client.default_headers,
            "Content-Type": content_type,
            "Accept": "application/json",
        }
        await client.update_params_for_auth(headers, params, ["BearerToken"])
        rest = client.rest_client
        if rest.pool_manager.closed:
            # A connection closed under a task still using it (a worker's kubeconfig was
            # replaced while the garbage collection swept it): aiohttp would raise a bare
            # RuntimeError, which no caller expects of an unreachable cluster; it once
            # ended the manager's garbage collection loop, and the manager with it.
            raise aiohttp.ClientConnectionError("its connection is closed")
        url = f"{client.configuration.host}{path}"
        if params:
            url += "?" + urlencode(params)
        options: dict[str, Any] = {}
        if rest.proxy:
            options["proxy"] = rest.proxy
        if rest.proxy_headers:
            options["proxy_headers"] = rest.proxy_headers
        if rest.server_hostname:
            options["server_hostname"] = rest.server_hostname
        response: aiohttp.ClientResponse = await rest.pool_manager.request(
            method,
            url,
            data=None if body is None else json.dumps(body),
            headers=headers,
            timeout=timeout
            if isinstance(timeout, aiohttp.ClientTimeout)
            else aiohttp.ClientTimeout(total=timeout),
            **options,
        )
        return response

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Obj:
        async for attempt in retrying():
            with attempt:
                response = await self._send(
                    method, path, query=query, body=body, content_type=content_type
                )
                try:
                    data = await response.read()
                except (TimeoutError, aiohttp.ClientError) as err:
                    raise errors.Unreachable(f"{self.name}: reading response: {err}") from err
                finally:
                    response.release()
                return json.loads(data) if data else {}
        raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover

    # -- verbs -------------------------------------------------------------------------

    async def get(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> Obj:
        return await self.request("GET", res.path(namespace, name, subresource))

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> Obj:
        """All items, paginated; the result's metadata.resourceVersion is the list's."""
        query: dict[str, Any] = {
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "limit": page_size,
        }
        items: list[Obj] = []
        while True:
            page = await self.request("GET", res.path(namespace), query=query)
            items.extend(page.get("items") or [])
            token = at(page, "metadata").get("continue")
            if not token:
                page["items"] = items
                return page
            query["continue"] = token

    async def create(self, res: Resource, body: Obj, namespace: str | None = None) -> Obj:
        ns = namespace or body.get("metadata", {}).get("namespace")
        return await self.request("POST", res.path(ns), body=body)

    async def replace(self, res: Resource, body: Obj, *, subresource: str | None = None) -> Obj:
        meta = body["metadata"]
        return await self.request(
            "PUT", res.path(meta.get("namespace"), meta["name"], subresource), body=body
        )

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        kind: PatchKind = "merge",
        subresource: str | None = None,
        field_manager: str = FIELD_MANAGER,
        force: bool = False,
    ) -> Obj:
        query: dict[str, Any] = {"fieldManager": field_manager}
        if kind == "apply" and force:
            query["force"] = "true"
        return await self.request(
            "PATCH",
            res.path(namespace, name, subresource),
            query=query,
            body=patch,
            content_type=_CONTENT_TYPES[kind],
        )

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str = "Background",
        uid: str | None = None,
        resource_version: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> bool:
        """Delete; False when it was already gone. ``uid`` makes it delete only that object,
        ``resource_version`` only that version of it (errors.Conflict once it changed);
        ``grace_period_seconds`` shortens a pod's termination grace."""
        body: Obj = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        preconditions = {"uid": uid, "resourceVersion": resource_version}
        if any(preconditions.values()):
            body["preconditions"] = {k: v for k, v in preconditions.items() if v}
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        try:
            await self.request("DELETE", res.path(namespace, name), body=body)
        except errors.NotFound:
            return False
        return True

    async def delete_collection(
        self, res: Resource, namespace: str, *, label_selector: str
    ) -> None:
        """Delete every object of ``res`` in ``namespace`` that ``label_selector`` selects,
        in one request: the API server picks them, so no object another wrote is read,
        judged and deleted in between (verb ``deletecollection``)."""
        if not label_selector:
            raise ValueError("delete_collection needs a label selector (it would delete all)")
        body: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
        await self.request(
            "DELETE", res.path(namespace), query={"labelSelector": label_selector}, body=body
        )

    async def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        timeout_seconds: int = 300,
        label_selector: str | None = None,
        read_timeout: float | None = None,
    ) -> AsyncIterator[Obj]:
        """Raw watch events (``{"type": ..., "object": ...}``), bookmarks included, until the
        server ends the stream. An ERROR event becomes the matching exception (410 -> Gone)."""
        query = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": timeout_seconds,
            "labelSelector": label_selector,
        }
        timeout = aiohttp.ClientTimeout(
            connect=10, sock_connect=10, sock_read=read_timeout or timeout_seconds + 30
        )
        response = await self._send("GET", res.path(namespace), query=query, timeout=timeout)
        try:
            while True:
                try:
                    line = await response.content.readline()
                except (TimeoutError, aiohttp.ClientError, OSError) as err:
                    raise errors.Unreachable(
                        f"{self.name}: watch {res.plural}: {type(err).__name__}: {err}"
                    ) from err
                if not line:
                    return
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    raise errors.from_status(int(status.get("code") or 500), status)
                yield event
        finally:
            response.release()


def _host_of(url: str | None) -> str:
    if not url:
        return ""
    parsed = URL(url)
    host = parsed.host or ""
    return f"{host}:{parsed.explicit_port}" if parsed.explicit_port else host


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
