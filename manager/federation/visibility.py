"""Kueue's visibility API (``visibility.kueue.x-k8s.io``, v1beta2 and v1beta1): the pending
workloads of a ClusterQueue or a LocalQueue with their positions, in upstream's shapes.

What upstream v0.17.0 answers, read from its source and checked against its own storage
code run as a server: paths, the ``offset``/``limit`` options (1000 when absent or 0), the
``PendingWorkloadsSummary`` document (compact JSON, item metadata with name, namespace,
creationTimestamp and owner references only), 404 and 400 Status bodies, the discovery
documents. The order is the ClusterQueue's queue order, every pending workload included
(parked and backing off too), as upstream's snapshot includes its inadmissible ones.

Two upstream bugs are not copied: upstream matches a LocalQueue's workloads by queue name
alone, so ``namespaces/b/localqueues/q`` also lists (and counts positions with) the
workloads of ``a/q``, a leak across tenants; and a negative ``limit`` crashes its handler.
Here a LocalQueue is its namespace and name, and a negative option is a 400.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from manager import core
from manager.api.view import at
from manager.controllers import workloadstatus as ws
from manager.controllers.state import ClusterState
from manager.kube.api import Obj

GROUP = "visibility.kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")
"""Served versions, preferred first (upstream's order)."""
DEFAULT_LIMIT = 1000
KIND = "PendingWorkloadsSummary"


class VisibilityError(Exception):
    """An answer that is a Status: ``code`` and the Status document."""

    def __init__(self, code: int, status: Obj) -> None:
        super().__init__(status.get("message", ""))
        self.code = code
        self.status = status


def _status(code: int, reason: str, message: str, details: Obj | None = None) -> Obj:
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


def not_found(resource: str, name: str) -> VisibilityError:
    """Upstream's NotFound: the singular resource (``clusterqueue``, ``localqueue``)."""
    return VisibilityError(
        404,
        _status(
            404,
            "NotFound",
            f'{resource}.{GROUP} "{name}" not found',
            {"name": name, "group": GROUP, "kind": resource},
        ),
    )


def unavailable(message: str) -> VisibilityError:
    return VisibilityError(503, _status(503, "ServiceUnavailable", message))


@dataclass(frozen=True, slots=True)
class Options:
    offset: int = 0
    limit: int = DEFAULT_LIMIT


def options(query: Mapping[str, str]) -> Options:
    """``offset`` and ``limit`` from a query (the first value of each, as upstream)."""
    values = {}
    for name, default in (("offset", 0), ("limit", DEFAULT_LIMIT)):
        text = query.get(name)
        if text is None or text == "":
            values[name] = default
            continue
        try:
            values[name] = int(text, 10)
        except ValueError:
            raise VisibilityError(
                400,
                _status(400, "BadRequest", f'strconv.ParseInt: parsing "{text}": invalid syntax'),
            ) from None
        if values[name] < 0:
            raise VisibilityError(
                400, _status(400, "BadRequest", f"{name} must not be negative: {text}")
            )
    return Options(values["offset"], values["limit"] or DEFAULT_LIMIT)


def _item(wl: Obj, in_cluster_queue: int, in_local_queue: int) -> Obj:
    meta = at(wl, "metadata")
    item_meta: Obj = {
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", ""),
        "creationTimestamp": meta.get("creationTimestamp"),
    }
    owners = [
        {k: ref[k] for k in ("apiVersion", "kind", "name", "uid") if k in ref}
        for ref in meta.get("ownerReferences") or []
    ]
    if owners:
        item_meta["ownerReferences"] = owners
    spec = at(wl, "spec")
    priority = spec.get("priority")
    return {
        "metadata": item_meta,
        "priority": priority if isinstance(priority, int) else 0,
        "localQueueName": str(spec.get("queueName") or ""),
        "positionInClusterQueue": in_cluster_queue,
        "positionInLocalQueue": in_local_queue,
    }


def summary(version: str, items: list[Obj]) -> Obj:
    return {"kind": KIND, "apiVersion": f"{GROUP}/{version}", "metadata": {}, "items": items}


def _local_queue_of(wl: Obj) -> tuple[str, str]:
    meta = at(wl, "metadata")
    return str(meta.get("namespace") or ""), str(at(wl, "spec").get("queueName") or "")


def cluster_queue_items(pending: Iterable[Obj], opts: Options) -> list[Obj]:
    """``pending``: the ClusterQueue's pending Workloads in queue order. ``offset`` and
    ``limit`` count ClusterQueue positions; a LocalQueue position counts every earlier
    workload of the same LocalQueue, skipped ones included."""
    items: list[Obj] = []
    seen: dict[tuple[str, str], int] = {}
    for index, wl in enumerate(pending):
        if index >= opts.offset + opts.limit:
            break
        lq = _local_queue_of(wl)
        position = seen.get(lq, 0)
        seen[lq] = position + 1
        if index >= opts.offset:
            items.append(_item(wl, index, position))
    return items


def local_queue_items(
    pending: Iterable[Obj], namespace: str, name: str, opts: Options
) -> list[Obj]:
    """``offset`` and ``limit`` count LocalQueue positions."""
    items: list[Obj] = []
    matched = 0
    for index, wl in enumerate(pending):
        if _local_queue_of(wl) != (namespace, name):
            continue
        if matched >= opts.offset:
            if len(items) >= opts.limit:
                break
            items.append(_item(wl, index, matched))
        matched += 1
    return items


def pending_of(state: ClusterState, cluster_queue: str) -> list[Obj]:
    """A ClusterQueue's pending Workloads, in queue order, as the informer has them."""
    result = []
    for key in state.core.pending_workloads(core.ClusterQueueName(cluster_queue)):
        obj = state.workloads.get(key)
        if obj is not None and not ws.has_reservation(obj):
            result.append(obj)
    return result


def for_cluster_queue(state: ClusterState, version: str, name: str, opts: Options) -> Obj:
    if state.cluster_queues.get(name) is None:
        raise not_found("clusterqueue", name)
    return summary(version, cluster_queue_items(pending_of(state, name), opts))


def for_local_queue(
    state: ClusterState, version: str, namespace: str, name: str, opts: Options
) -> Obj:
    lq = state.local_queues.get(f"{namespace}/{name}")
    if lq is None:
        raise not_found("localqueue", name)
    cluster_queue = str(at(lq, "spec").get("clusterQueue") or "")
    if state.cluster_queues.get(cluster_queue) is None:
        return summary(version, [])  # as upstream: a queue that leads nowhere has nothing
    return summary(
        version, local_queue_items(pending_of(state, cluster_queue), namespace, name, opts)
    )


def positions(state: ClusterState, cluster_queue: str) -> dict[str, tuple[int, int]]:
    """Every pending workload's (ClusterQueue, LocalQueue) position, by ``ns/name``: what
    ``kfed workloads`` and the dashboard show."""
    result = {}
    for item in cluster_queue_items(pending_of(state, cluster_queue), Options(0, 1 << 30)):
        meta = item["metadata"]
        result[f"{meta['namespace']}/{meta['name']}"] = (
            item["positionInClusterQueue"],
            item["positionInLocalQueue"],
        )
    return result


# -- discovery -------------------------------------------------------------------------


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ... 11th, 12th, 13th, 21st: a place in line for people."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def api_group() -> Obj:
    versions = [{"groupVersion": f"{GROUP}/{v}", "version": v} for v in VERSIONS]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": GROUP,
        "versions": versions,
        "preferredVersion": versions[0],
    }


def api_resources(version: str) -> Obj:
    def resource(name: str, singular: str, namespaced: bool, verbs: list[str]) -> Obj:
        return {
            "name": name,
            "singularName": singular,
            "namespaced": namespaced,
            "kind": KIND,
            "verbs": verbs,
        }

    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{GROUP}/{version}",
        "resources": [
            resource("clusterqueues", "clusterqueue", False, []),
            resource("clusterqueues/pendingworkloads", "", False, ["get"]),
            resource("localqueues", "localqueue", True, []),
            resource("localqueues/pendingworkloads", "", True, ["get"]),
        ],
    }


def dumps(body: Any) -> bytes:
    """Compact JSON and a newline, as the Kubernetes API machinery writes it."""
    return (json.dumps(body, separators=(",", ":")) + "\n").encode()


# -- serving (aiohttp) -------------------------------------------------------------------

StateOf = Callable[[], tuple[ClusterState | None, str]]
"""The cluster state to answer from, or None and why not (a standby replica, syncing)."""

PREFIX = f"/apis/{GROUP}"


def add_routes(app: web.Application, state_of: StateOf) -> None:
    """Serve the API under ``/apis/visibility.kueue.x-k8s.io`` on ``app``."""

    def answer(body: Obj, status: int = 200) -> web.Response:
        return web.Response(body=dumps(body), status=status, content_type="application/json")

    def version_of(request: web.Request) -> str:
        version = request.match_info["version"]
        if version not in VERSIONS:
            raise VisibilityError(
                404, _status(404, "NotFound", "the server could not find the requested resource")
            )
        return version

    def ready_state() -> ClusterState:
        state, why = state_of()
        if state is None:
            raise unavailable(f"pending workloads are not known here: {why}")
        return state

    async def group(_: web.Request) -> web.Response:
        return answer(api_group())

    async def resources(request: web.Request) -> web.Response:
        try:
            return answer(api_resources(version_of(request)))
        except VisibilityError as err:
            return answer(err.status, err.code)

    async def cluster_queue(request: web.Request) -> web.Response:
        try:
            version, opts = version_of(request), options(request.query)
            body = for_cluster_queue(ready_state(), version, request.match_info["name"], opts)
        except VisibilityError as err:
            return answer(err.status, err.code)
        return answer(body)

    async def local_queue(request: web.Request) -> web.Response:
        try:
            version, opts = version_of(request), options(request.query)
            info = request.match_info
            body = for_local_queue(ready_state(), version, info["namespace"], info["name"], opts)
        except VisibilityError as err:
            return answer(err.status, err.code)
        return answer(body)

    app.router.add_get(PREFIX, group)
    app.router.add_get(PREFIX + "/{version}", resources)
    app.router.add_get(PREFIX + "/{version}/clusterqueues/{name}/pendingworkloads", cluster_queue)
    app.router.add_get(
        PREFIX + "/{version}/namespaces/{namespace}/localqueues/{name}/pendingworkloads",
        local_queue,
    )
