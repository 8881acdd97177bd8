"""Emptying a test's namespace between tests, keeping the namespace.

Deleting the namespace and waiting for it to go cost every test of the shared beds over 5 s
of waiting: kube-controller-manager's namespace controller starts on a deleted namespace only
5 s after it sees the deletion (its fixed ``namespaceDeletionGracePeriod``). Emptying it does
what that controller then does, at once: every namespaced kind the API server serves
(discovered each time, so a CRD a test installed is swept too) is deleted by collection, pods
without a grace period (kwok's pods have no kubelet to wait for), until no kind lists any.
Where that does not hold in seconds (a full run saw the kinds' tests' namespaces stay full
for 120 s: an operator making children again while their parent lingered), the namespace is
deleted as before, which refuses new objects in it.
"""

from __future__ import annotations

import asyncio
import contextlib

from e2e.waiting import WaitTimeout, wait_for
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

EMPTYING_DEADLINE = 10.0
"""Seconds (times the deadline scale) for a namespace to empty before it is deleted instead:
most empty in about 0.3 s."""
GRACELESS = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}


async def namespaced_collections(api: KubeApi) -> list[str]:
    """The path (``{ns}`` for the namespace) of every namespaced kind that can be listed and
    deleted by collection: what the namespace controller would sweep."""
    groups = (await api.request("GET", "/apis")).get("groups") or []
    bases = ["/api/v1"] + [f"/apis/{g['preferredVersion']['groupVersion']}" for g in groups]

    async def kinds_of(base: str) -> list[str]:
        try:
            document = await api.request("GET", base)
        except errors.KubeError:
            return []  # an aggregated API whose server is away serves nothing to sweep
        return [
            f"{base}/namespaces/{{ns}}/{r['name']}"
            for r in document.get("resources") or []
            if r.get("namespaced")
            and "/" not in r["name"]
            and {"list", "deletecollection"} <= set(r.get("verbs") or ())
        ]

    found = await asyncio.gather(*(kinds_of(base) for base in bases))
    return [path for paths in found for path in paths]


async def empty_namespace(api: KubeApi, namespace: str, *, timeout: float = 60) -> None:
    """Delete everything in ``namespace`` and wait until nothing is left there; when that
    does not hold within ``EMPTYING_DEADLINE``, delete the namespace itself and wait for it
    to go (an operator may keep making children of an object that lingers, which a
    terminating namespace refuses and an emptied one does not)."""
    paths = [p.format(ns=namespace) for p in await namespaced_collections(api)]

    async def delete_all(path: str) -> None:
        # Timed out (hundreds of objects on a loaded machine): the next look deletes again.
        with contextlib.suppress(errors.NotFound, errors.BadRequest, errors.Unreachable):
            await api.request("DELETE", path, body=GRACELESS)

    async def left(path: str) -> bool:
        with contextlib.suppress(errors.Unreachable):
            return await items_left(path)
        return True  # timed out: not known to be empty

    async def items_left(path: str) -> bool:
        with contextlib.suppress(errors.NotFound):
            page = await api.request("GET", path, query={"limit": 1})
            if page.get("items"):
                # Made again meanwhile (a Job's pod before the Job went): delete again.
                await delete_all(path)
                return True
        return False

    async def emptied() -> bool:
        return not any(await asyncio.gather(*(left(p) for p in paths)))

    await asyncio.gather(*(delete_all(p) for p in paths))
    try:
        await wait_for(emptied, timeout=EMPTYING_DEADLINE, interval=0.2, what="emptied")
        return
    except WaitTimeout:
        pass
    await api.delete(R.NAMESPACES, namespace)
    pods = R.PODS.path(namespace)

    async def gone() -> bool:
        await delete_all(pods)  # kwok's pods have no kubelet to wait for
        try:
            await api.get(R.NAMESPACES, namespace)
        except errors.NotFound:
            return True
        return False

    await wait_for(gone, timeout=timeout, interval=0.5, what=f"namespace {namespace} gone")
