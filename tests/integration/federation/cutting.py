"""The partition failover every kind's test drills the same way: its pods run whole on one
worker, that worker is cut off from the manager, and the job runs whole on the other worker
only once the cut-off worker has fenced it (its pods there stopped). What differs between
kinds is only how its running pods are counted on a worker (``PodCount``)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from e2e.waiting import wait_for
from manager.kube.api import KubeApi
from tests.integration.federation.bed import Bed

PodCount = Callable[[KubeApi], Awaitable[int]]
"""How many of the job's pods run on the worker of this API."""


async def all_running(
    bed: Bed, worker: str, count: PodCount, pods: int, *, timeout: float = 90
) -> None:
    async def there() -> bool:
        return await count(bed.worker_apis[worker]) == pods

    await wait_for(there, timeout=timeout, what=f"all {pods} pods running on {worker}")


@contextlib.asynccontextmanager
async def cut_until_moved(
    bed: Bed,
    first: str,
    other: str,
    count: PodCount,
    pods: int,
    *,
    what: str,
    timeout: float = 90,
) -> AsyncIterator[float]:
    """Cut ``first`` off (its job's ``pods`` running there) and wait until they all run on
    ``other`` while none runs on ``first`` any more; the block runs with the link still cut
    (to look at the fenced copy there) and the monotonic time of the cut; healed afterwards."""
    await all_running(bed, first, count, pods, timeout=timeout)
    bed.proxies[first].cut()
    cut = time.monotonic()
    try:
        await all_running(bed, other, count, pods, timeout=timeout)
        moved = time.monotonic() - cut
        print(f"{what}: cut -> all {pods} pods running on {other}: {moved:.1f}s")
        assert await count(bed.worker_apis[first]) == 0, f"fenced on {first}"
        yield cut
    finally:
        bed.proxies[first].heal()
