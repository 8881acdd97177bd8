"""An informer's index follows its cache through watch events, re-lists and our own writes,
so finding a workload's Jobs never scans every Job of a worker."""

from __future__ import annotations

from typing import Any, cast

from kubernetes_asyncio.client import ApiClient

from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.informer import Informer


def job(name: str, workload: str | None, rv: str = "1") -> dict[str, Any]:
    labels = {"owner": workload} if workload else {}
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv, "labels": labels}}


def by_owner(obj: dict[str, Any]) -> list[str]:
    owner = (obj["metadata"].get("labels") or {}).get("owner")
    return [f"ns/{owner}"] if owner else []


def names(objs: list[dict[str, Any]]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


def informer() -> Informer:
    jobs = Informer(KubeApi(cast(ApiClient, object()), name="unit"), R.JOBS)
    jobs.add_index("owner", by_owner)
    return jobs


async def test_watch_events_file_refile_and_unfile() -> None:
    jobs = informer()
    await jobs._apply({"type": "ADDED", "object": job("a", "wl-1")})
    await jobs._apply({"type": "ADDED", "object": job("b", "wl-1")})
    await jobs._apply({"type": "ADDED", "object": job("c", None)})
    assert names(jobs.by_index("owner", "ns/wl-1")) == ["a", "b"]

    await jobs._apply({"type": "MODIFIED", "object": job("b", "wl-2", rv="2")})
    assert names(jobs.by_index("owner", "ns/wl-1")) == ["a"]
    assert names(jobs.by_index("owner", "ns/wl-2")) == ["b"]

    await jobs._apply({"type": "DELETED", "object": job("a", "wl-1", rv="3")})
    assert jobs.by_index("owner", "ns/wl-1") == []
    assert jobs._indices["owner"].get("ns/wl-1") is None  # no empty sets left behind


async def test_a_relist_drops_what_was_deleted_unseen() -> None:
    jobs = informer()
    await jobs._apply({"type": "ADDED", "object": job("a", "wl-1")})

    class Lister:
        name = "unit"

        async def list(self, *_: Any, **__: Any) -> dict[str, Any]:
            return {"metadata": {"resourceVersion": "9"}, "items": [job("b", "wl-1", rv="9")]}

    jobs.api = cast(KubeApi, Lister())
    await jobs._list()
    assert names(jobs.by_index("owner", "ns/wl-1")) == ["b"]


def test_an_index_added_late_files_what_is_cached_and_own_writes_are_filed() -> None:
    jobs = Informer(KubeApi(cast(ApiClient, object()), name="unit"), R.JOBS)
    base = job("a", "wl-1")
    jobs.cache["ns/a"] = base
    jobs.add_index("owner", by_owner)
    assert names(jobs.by_index("owner", "ns/wl-1")) == ["a"]

    assert jobs.remember_written("ns/a", base, job("a", "wl-3", rv="2"))
    assert jobs.by_index("owner", "ns/wl-1") == []
    assert names(jobs.by_index("owner", "ns/wl-3")) == ["a"]
