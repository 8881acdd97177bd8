"""Who may read the observability port when it is served securely (``--metrics-secure``):
the same checks as controller-runtime's ``filters.WithAuthenticationAndAuthorization``, which
upstream Kueue serves its metrics behind.

1. Authentication: the request's bearer token is sent to kube-apiserver in a TokenReview.
   No token, or one the review does not accept: 401.
2. Authorization: a SubjectAccessReview for the user the review named (groups, uid and
   extra included), on the non-resource URL of the request: its path, the method in lower
   case as the verb (``get`` on ``/metrics``, what ClusterRole ``kfed-metrics-reader``
   grants). Not allowed: 403. The visibility API's pending-workload paths are reviewed as
   the resource they stand for (``clusterqueues/pendingworkloads`` ...), as the aggregated
   server reviews them (``aggregated.resource_attributes``), so one role answers for both.
3. A review that cannot be made (kube-apiserver away, this process not allowed to create
   reviews): 500, as controller-runtime answers; the log says why.

Answers are cached as controller-runtime caches them: a token's review for a minute,
an allowed decision for five minutes, a denied one for 30 seconds. Tokens are kept only as
their SHA-256. ``/healthz`` and ``/readyz`` stay open (``open_paths``): the kubelet probes
them with no token.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from manager.api.view import at
from manager.kube import errors
from manager.kube.api import KubeApi
from manager.kube.resources import Resource
from manager.observability.aggregated import SUBJECT_ACCESS_REVIEWS, resource_attributes

log = logging.getLogger(__name__)

TOKEN_REVIEWS = Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False)
TOKEN_TTL = 60.0
ALLOW_TTL = 300.0
DENY_TTL = 30.0
_CACHE_LIMIT = 10_000
"""Entries per cache before it is emptied (a flood of distinct tokens cannot grow it)."""


@dataclass(frozen=True, slots=True)
class User:
    """Who a TokenReview said the token belongs to."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


def user_of(review: dict[str, Any]) -> User | None:
    """The user of an answered TokenReview; None when the token was not accepted."""
    status = at(review, "status")
    if not status.get("authenticated"):
        return None
    user = status.get("user") or {}
    extra = user.get("extra") or {}
    return User(
        name=str(user.get("username") or ""),
        uid=str(user.get("uid") or ""),
        groups=tuple(str(g) for g in user.get("groups") or ()),
        extra=tuple(sorted((str(k), tuple(str(v) for v in vs)) for k, vs in extra.items())),
    )


def review_attributes(path: str, method: str) -> dict[str, dict[str, str]]:
    """What a SubjectAccessReview asks about a request: the resource for the visibility
    API's pending-workload paths, the non-resource URL for everything else."""
    resource = resource_attributes(path)
    if resource is not None:
        return {"resourceAttributes": resource}
    return {"nonResourceAttributes": {"path": path, "verb": method.lower()}}


@dataclass
class _Cache:
    entries: dict[str, tuple[float, Any]] = field(default_factory=dict)

    def get(self, key: str, now: float) -> tuple[bool, Any]:
        hit = self.entries.get(key)
        if hit is None or hit[0] <= now:
            return False, None
        return True, hit[1]

    def put(self, key: str, value: Any, until: float) -> None:
        if len(self.entries) >= _CACHE_LIMIT:
            self.entries.clear()
        self.entries[key] = (until, value)


@dataclass
class DelegatedAccess:
    """TokenReviews and SubjectAccessReviews made with ``api`` (this process's own
    credentials: it needs ``create`` on both, ClusterRole ``kfed-metrics-auth``)."""

    api: KubeApi
    clock: Callable[[], float] = time.monotonic
    token_ttl: float = TOKEN_TTL
    allow_ttl: float = ALLOW_TTL
    deny_ttl: float = DENY_TTL
    reviews: int = 0
    """Reviews sent to kube-apiserver (both kinds), for tests and the curious."""
    _tokens: _Cache = field(default_factory=_Cache)
    _decisions: _Cache = field(default_factory=_Cache)

    async def authenticate(self, token: str) -> User | None:
        """The token's user, or None when kube-apiserver does not accept it; raises
        ``errors.KubeError`` when it cannot be asked."""
        key = hashlib.sha256(token.encode()).hexdigest()
        hit, user = self._tokens.get(key, self.clock())
        if hit:
            return user  # type: ignore[no-any-return]
        review = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        self.reviews += 1
        user = user_of(await self.api.create(TOKEN_REVIEWS, review))
        self._tokens.put(key, user, self.clock() + self.token_ttl)
        return user

    async def authorize(self, user: User, path: str, method: str) -> tuple[bool, str]:
        """Whether ``user`` may make this request, and kube-apiserver's reason."""
        spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups)}
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        spec |= review_attributes(path, method)
        key = json.dumps(spec, sort_keys=True)
        hit, decision = self._decisions.get(key, self.clock())
        if hit:
            return decision  # type: ignore[no-any-return]
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        }
        self.reviews += 1
        status = at(await self.api.create(SUBJECT_ACCESS_REVIEWS, review), "status")
        decision = (bool(status.get("allowed")), str(status.get("reason") or ""))
        ttl = self.allow_ttl if decision[0] else self.deny_ttl
        self._decisions.put(key, decision, self.clock() + ttl)
        return decision


def bearer_token(request: web.Request) -> str:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _unauthorized() -> web.Response:
    return web.Response(status=401, text="Unauthorized\n", headers={"WWW-Authenticate": "Bearer"})


def require_access(access: DelegatedAccess, open_paths: Collection[str]) -> Any:
    """An aiohttp middleware: every request but those for ``open_paths`` authenticated and
    authorized through ``access``."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in open_paths:
            return await handler(request)
        token = bearer_token(request)
        if not token:
            return _unauthorized()
        try:
            user = await access.authenticate(token)
        except errors.KubeError as err:
            log.error("cannot authenticate a request for %s (TokenReview): %s", request.path, err)
            return web.Response(status=500, text="Authentication failed\n")
        if user is None:
            return _unauthorized()
        try:
            allowed, reason = await access.authorize(user, request.path, request.method)
        except errors.KubeError as err:
            log.error(
                "cannot authorize %s for %s (SubjectAccessReview): %s", user.name, request.path, err
            )
            return web.Response(status=500, text=f"Authorization for user {user.name} failed\n")
        if not allowed:
            log.debug("%s may not %s %s: %s", user.name, request.method, request.path, reason)
            return web.Response(status=403, text=f"Authorization denied for user {user.name}\n")
        return await handler(request)

    return middleware
