"""Pending workloads' places in line, for ``kfed workloads``: read from Kueue's visibility
API (``visibility.kueue.x-k8s.io``), as upstream's ``kueuectl`` reads it.

Through the manager cluster's API server when kfed's APIService is installed there
(deploy/manager registers the manager as that API's server), or straight from a manager's
own server with ``--visibility-url`` (a port-forward, or the test bed). Positions are extra
information: when neither answers, the listing goes on without them and says why.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import aiohttp

from manager.api.view import at
from manager.federation.visibility import GROUP, ordinal
from manager.kube import errors
from manager.kube.api import KubeApi

GROUP_PATH = f"/apis/{GROUP}/v1beta2"
Position = tuple[int, int]
"""(in its ClusterQueue, in its LocalQueue), from 0 as the API counts."""


@dataclass(frozen=True, slots=True)
class Positions:
    by_workload: dict[str, Position] = field(default_factory=dict)
    """"namespace/name" -> its position, for every pending workload listed."""
    unavailable: str = ""
    """Why there are none, for a note under the table ("" when read)."""


def path_of(cluster_queue: str) -> str:
    return f"{GROUP_PATH}/clusterqueues/{quote(cluster_queue, safe='')}/pendingworkloads"


def read_summary(summary: dict[str, Any], into: dict[str, Position]) -> None:
    for item in summary.get("items") or []:
        meta = at(item, "metadata")
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        into[key] = (int(item["positionInClusterQueue"]), int(item["positionInLocalQueue"]))


async def read_positions(
    api: KubeApi, cluster_queues: Iterable[str], *, direct_url: str | None = None
) -> Positions:
    """The positions of every pending workload of ``cluster_queues``."""
    found: dict[str, Position] = {}
    names = sorted(set(cluster_queues))
    if direct_url:
        base = direct_url.rstrip("/")
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
                for name in names:
                    async with http.get(base + path_of(name)) as response:
                        if response.status == 404:
                            continue  # no such ClusterQueue there (yet)
                        if response.status != 200:
                            text = (await response.text()).strip()
                            return Positions(
                                unavailable=f"{base} answered {response.status}: {text}"
                            )
                        read_summary(await response.json(), found)
        except (aiohttp.ClientError, TimeoutError) as err:
            return Positions(unavailable=f"cannot reach {base}: {err}")
        return Positions(found)
    try:
        await api.request("GET", GROUP_PATH)  # discovery: is the API served at all?
        for name in names:
            try:
                read_summary(await api.request("GET", path_of(name)), found)
            except errors.NotFound:
                continue  # that ClusterQueue has gone meanwhile
    except errors.NotFound:
        return Positions(
            unavailable="the visibility API is not served by this cluster (install "
            "deploy/manager's APIService, or give --visibility-url)"
        )
    except errors.KubeError as err:
        return Positions(unavailable=f"the visibility API did not answer: {err}")
    return Positions(found)


def describe(position: Position | None) -> str:
    """For the POSITION column: "3rd in gpu-cq (1st in its queue)" style, shortened."""
    if position is None:
        return ""
    return f"{ordinal(position[0] + 1)} ({ordinal(position[1] + 1)} in queue)"
