"""An object a controller just wrote goes into the informer's cache only if no watch event
replaced the copy the write was computed from (that event is as new or newer)."""

from __future__ import annotations

import json
from typing import cast

from kubernetes_asyncio.client import ApiClient

from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.informer import Informer


def informer() -> Informer:
    return Informer(KubeApi(cast(ApiClient, object()), name="unit"), R.WORKLOADS)


def test_the_written_object_replaces_the_copy_it_was_computed_from() -> None:
    cache = informer()
    base = {"metadata": {"name": "w", "namespace": "ns", "resourceVersion": "1"}}
    cache.cache["ns/w"] = base
    written = {"metadata": {"name": "w", "namespace": "ns", "resourceVersion": "2"}}

    assert cache.remember_written("ns/w", base, written)
    assert cache.get("ns/w") is written


def test_a_newer_event_is_never_overwritten_with_an_older_write() -> None:
    cache = informer()
    base = {"metadata": {"name": "w", "namespace": "ns", "resourceVersion": "1"}}
    finished = {"metadata": {"name": "w", "namespace": "ns", "resourceVersion": "3"}}
    cache.cache["ns/w"] = finished  # a watch event arrived while the write was in flight
    written = {"metadata": {"name": "w", "namespace": "ns", "resourceVersion": "2"}}

    assert not cache.remember_written("ns/w", base, written)
    assert cache.get("ns/w") is finished


async def test_an_object_written_while_the_watch_was_down_reaches_the_handlers_on_relisting() -> (
    None
):
    """Found after a control-plane outage: a Job submitted just after its API server came
    back got its Workload created (and remembered in the cache) while the Workload watch was
    still down; the re-list found the same resourceVersion and told nobody, so the Workload
    was never reconciled, never admitted."""
    cache = informer()
    seen: list[tuple[str, str]] = []
    cache.subscribe(lambda event: seen.append((event.type, event.key)))
    created = {"metadata": {"name": "w", "namespace": "ns", "resourceVersion": "5"}}
    assert cache.remember_written("ns/w", None, created)

    class Lister:
        name = "unit"

        async def list(self, *_: object, **__: object) -> dict[str, object]:
            listed = {"metadata": {"name": "w", "namespace": "ns", "resourceVersion": "5"}}
            return {"metadata": {"resourceVersion": "5"}, "items": [listed]}

    cache.api = cast(KubeApi, Lister())
    await cache._list()
    assert seen == [("MODIFIED", "ns/w")]
    await cache._list()  # seen once: an unchanged object is not told again
    assert seen == [("MODIFIED", "ns/w")]


async def test_what_kfed_never_reads_is_not_cached() -> None:
    """Memory per pending workload (#36): managedFields and kubectl's last-applied copy are
    dropped on the way in, from a list, a watch event and our own write alike; everything
    else, other annotations included, is kept."""
    cache = informer()

    def arriving(rv: str) -> dict[str, object]:
        return {
            "metadata": {
                "name": "w",
                "namespace": "ns",
                "resourceVersion": rv,
                "managedFields": [{"manager": "kueue", "fieldsV1": {"f:status": {}}}],
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": '{"spec": {}}',
                    "kfed.io/dra-charge": "{}",
                },
            },
            "spec": {"queueName": "q"},
        }

    await cache._apply({"type": "ADDED", "object": arriving("1")})
    watched = cache.get("ns/w")
    assert watched is not None
    assert "managedFields" not in watched["metadata"]
    assert watched["metadata"]["annotations"] == {"kfed.io/dra-charge": "{}"}
    assert watched["spec"] == {"queueName": "q"}

    assert cache.remember_written("ns/w", watched, arriving("2"))
    written = cache.get("ns/w")
    assert written is not None and "managedFields" not in written["metadata"]
    assert (
        "kubectl.kubernetes.io/last-applied-configuration"
        not in (written["metadata"]["annotations"])
    )


async def test_equal_keys_and_short_strings_of_cached_objects_are_one_string() -> None:
    """Each JSON document decodes into strings of its own; the cache shares them (memory per
    pending workload, #36), in place, and keeps long strings and every value as they were."""
    cache = informer()
    long_message = "x" * 200
    for name in ("a", "b"):
        raw = json.loads(
            json.dumps(
                {
                    "type": "ADDED",
                    "object": {
                        "metadata": {"name": name, "namespace": "team-a", "resourceVersion": "1"},
                        "spec": {"queueName": "gpu-queue", "podSets": [{"name": "main"}]},
                        "status": {"message": long_message},
                    },
                }
            )
        )
        await cache._apply(raw)
    a, b = cache.get("team-a/a"), cache.get("team-a/b")
    assert a is not None and b is not None
    key_of_a = next(k for k in a["spec"] if k == "queueName")
    key_of_b = next(k for k in b["spec"] if k == "queueName")
    assert key_of_a is key_of_b
    assert a["spec"]["queueName"] is b["spec"]["queueName"]
    assert a["spec"]["podSets"][0]["name"] is b["spec"]["podSets"][0]["name"]
    assert a["status"]["message"] == b["status"]["message"] == long_message
    assert a["metadata"]["name"] == "a" and b["metadata"]["name"] == "b"
