"""Kueue's visibility API as an aggregated API of the manager cluster, so that
``kubectl get --raw /apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/Q/pendingworkloads``
answers as it does with upstream Kueue (deploy/manager registers the APIServices).

kube-apiserver authenticates the caller and proxies the request here over TLS, presenting
its front-proxy client certificate and naming the caller in request headers
(``X-Remote-User``, ``X-Remote-Group``). Authorization is ours to do, as for any aggregated
API server: so this server

- accepts only connections whose client certificate the front-proxy CA signed (read, with
  the allowed names and header names, from ``kube-system/extension-apiserver-authentication``,
  where kube-apiserver publishes them; reading it is what upstream's
  ``extension-apiserver-authentication-reader`` Role grants);
- asks kube-apiserver whether the named caller may ``get`` the resource (a
  SubjectAccessReview, what ``system:auth-delegator`` grants), caching the answer briefly;
- answers discovery to any caller the front proxy vouches for, as upstream's server does.

The unauthenticated plain-HTTP copy of the same API on the observability port stays, for
the loopback and port-forward uses (``kfed workloads --visibility-url``).
"""

from __future__ import annotations

import json
import logging
import re
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from manager.api.view import at
from manager.federation import visibility
from manager.federation.webhooks.certs import server_ssl_context
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.resources import Resource

log = logging.getLogger(__name__)

AUTHENTICATION_CONFIGMAP = ("kube-system", "extension-apiserver-authentication")
SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False
)
DECISION_TTL = 10.0
"""Seconds an authorization answer is reused for the same caller and resource."""

_PATH = re.compile(
    rf"^/apis/{re.escape(visibility.GROUP)}/(?P<version>[^/]+)"
    r"(?:/namespaces/(?P<namespace>[^/]+))?/(?P<resource>clusterqueues|localqueues)"
    r"/(?P<name>[^/]+)/pendingworkloads/?$"
)


@dataclass(frozen=True, slots=True)
class FrontProxy:
    """How kube-apiserver's front proxy identifies itself and the caller."""

    client_ca: str
    """PEM: the CA that signs the front proxy's client certificate."""
    allowed_names: frozenset[str] = frozenset()
    """Common names the certificate may have; empty: any the CA signed."""
    user_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)


def front_proxy_of(configmap: Mapping[str, Any]) -> FrontProxy:
    data = configmap.get("data") or {}
    ca = str(data.get("requestheader-client-ca-file") or "")
    if not ca:
        raise ValueError(
            "kube-apiserver publishes no requestheader-client-ca-file in "
            f"{'/'.join(AUTHENTICATION_CONFIGMAP)}: it runs without "
            "--requestheader-client-ca-file, so it cannot proxy to aggregated APIs"
        )

    def listed(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        raw = data.get(key)
        return tuple(json.loads(raw)) if raw else default

    return FrontProxy(
        client_ca=ca,
        allowed_names=frozenset(listed("requestheader-allowed-names", ())),
        user_headers=listed("requestheader-username-headers", ("X-Remote-User",)),
        group_headers=listed("requestheader-group-headers", ("X-Remote-Group",)),
    )


def resource_attributes(path: str) -> dict[str, str] | None:
    """The SubjectAccessReview attributes of a pending-workloads path; None for discovery
    (and anything else, which the routes answer 404)."""
    match = _PATH.match(path)
    if match is None:
        return None
    attributes = {
        "group": visibility.GROUP,
        "version": match["version"],
        "resource": match["resource"],
        "subresource": "pendingworkloads",
        "name": match["name"],
        "verb": "get",
    }
    if match["namespace"]:
        attributes["namespace"] = match["namespace"]
    return attributes


@dataclass
class Authorizer:
    """SubjectAccessReviews for the callers the front proxy names, answers cached."""

    api: KubeApi
    clock: Callable[[], float] = time.monotonic
    _decisions: dict[str, tuple[float, bool, str]] = field(default_factory=dict)

    async def allowed(
        self, user: str, groups: list[str], attributes: dict[str, str]
    ) -> tuple[bool, str]:
        key = json.dumps([user, sorted(groups), attributes], sort_keys=True)
        cached = self._decisions.get(key)
        now = self.clock()
        if cached is not None and cached[0] > now:
            return cached[1], cached[2]
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": groups, "resourceAttributes": attributes},
        }
        answer = await self.api.create(SUBJECT_ACCESS_REVIEWS, review)
        status = at(answer, "status")
        allowed, reason = bool(status.get("allowed")), str(status.get("reason") or "")
        if len(self._decisions) > 10_000:
            self._decisions.clear()
        self._decisions[key] = (now + DECISION_TTL, allowed, reason)
        return allowed, reason


def _status(code: int, reason: str, message: str) -> web.Response:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}}
    body |= {"status": "Failure", "message": message, "reason": reason, "code": code}
    return web.json_response(body, status=code)


def _common_name(peer: Any) -> str:
    for rdn in (peer or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return ""


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def aggregated_app(
    state_of: visibility.StateOf, front_proxy: FrontProxy, authorizer: Authorizer
) -> web.Application:
    @web.middleware
    async def authorize(request: web.Request, handler: Handler) -> web.StreamResponse:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        name = _common_name(peer)
        if peer is None or (front_proxy.allowed_names and name not in front_proxy.allowed_names):
            return _status(401, "Unauthorized", "Unauthorized: not kube-apiserver's front proxy")
        user = next(
            (request.headers[h] for h in front_proxy.user_headers if h in request.headers), ""
        )
        if not user:
            return _status(401, "Unauthorized", "Unauthorized: no user named by the front proxy")
        attributes = resource_attributes(request.path)
        if attributes is not None:
            groups = [g for h in front_proxy.group_headers for g in request.headers.getall(h, [])]
            try:
                allowed, reason = await authorizer.allowed(user, groups, attributes)
            except errors.KubeError as err:
                log.warning("cannot authorize %s on %s: %s", user, request.path, err)
                return _status(503, "ServiceUnavailable", f"cannot authorize the request: {err}")
            if not allowed:
                what = f"{attributes['resource']}/pendingworkloads"
                return _status(
                    403,
                    "Forbidden",
                    f'{what}.{visibility.GROUP} "{attributes["name"]}" is forbidden: User '
                    f'"{user}" cannot get resource "{what}" in API group "{visibility.GROUP}"'
                    + (f": {reason}" if reason else ""),
                )
        return await handler(request)

    app = web.Application(middlewares=[authorize])
    visibility.add_routes(app, state_of)
    return app


def client_verifying_context(cert_dir: Path | str, client_ca: str) -> ssl.SSLContext:
    """The serving certificate of ``cert_dir``; a client certificate from ``client_ca``
    required of every connection."""
    context = server_ssl_context(cert_dir)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=client_ca)
    return context


class AggregatedVisibilityServer:
    """``aggregated_app`` on ``host:port`` with TLS (the webhook's serving certificate)."""

    def __init__(
        self, api: KubeApi, state_of: visibility.StateOf, host: str, port: int, cert_dir: Path | str
    ) -> None:
        self.api = api
        self.state_of = state_of
        self.host = host
        self.port = port
        self.cert_dir = cert_dir
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        namespace, name = AUTHENTICATION_CONFIGMAP
        front_proxy = front_proxy_of(await self.api.get(R.CONFIGMAPS, name, namespace))
        app = aggregated_app(self.state_of, front_proxy, Authorizer(self.api))
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        context = client_verifying_context(self.cert_dir, front_proxy.client_ca)
        try:
            await web.TCPSite(runner, self.host, self.port, ssl_context=context).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        log.info(
            "the visibility API for kube-apiserver's aggregation on https://%s:%d",
            self.host,
            self.port,
        )

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
