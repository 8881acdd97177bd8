"""The event recorder against a real API server: Events land as core/v1 objects that kubectl
reads, repeats raise one Event's count, the global limit caps a burst, and a write the API
server refuses is dropped and counted without reaching the caller."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from e2e.local.federation import LocalFederation
from manager.kube import resources as R
from manager.kube.api import KubeApi
from manager.kube.events import EventRecorder, EventSettings
from manager.kube.tasks import stop_tasks


@pytest.fixture
async def api(lite_clusters: LocalFederation, unique: str) -> AsyncIterator[KubeApi]:
    async with await KubeApi.from_kubeconfig_file(lite_clusters.kubeconfig("manager")) as client:
        await client.create(R.NAMESPACES, {"metadata": {"name": f"ev-{unique}"}})
        yield client


def config_map(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
    }


async def written(recorder: EventRecorder) -> None:
    task = asyncio.create_task(recorder.run())
    try:
        await recorder.flush(timeout=30)
    finally:
        await stop_tasks([task])


async def events_in(api: KubeApi, namespace: str) -> list[dict[str, Any]]:
    return list((await api.list(R.EVENTS, namespace))["items"])


async def test_events_land_and_a_repeat_raises_the_count(api: KubeApi, unique: str) -> None:
    ns = f"ev-{unique}"
    rec = EventRecorder(api, component="kfed-manager", instance="test-host")
    obj = config_map(ns, "one")
    for _ in range(3):
        rec.normal(obj, "Started", "Admitted by clusterQueue q")
    rec.warning(obj, "Pending", "couldn't assign flavors")
    await written(rec)

    events = {e["reason"]: e for e in await events_in(api, ns)}
    assert sorted(events) == ["Pending", "Started"]
    started = events["Started"]
    assert started["count"] == 3 and started["type"] == "Normal"
    assert started["involvedObject"]["name"] == "one"
    assert started["source"]["component"] == "kfed-manager"
    assert started["reportingComponent"] == "kfed-manager"
    assert started["reportingInstance"] == "test-host"
    assert events["Pending"]["type"] == "Warning"
    assert rec.written == {"create": 2, "patch": 2}
    assert not rec.dropped


async def test_the_global_limit_caps_a_burst_and_counts_what_it_dropped(
    api: KubeApi, unique: str
) -> None:
    ns = f"ev-{unique}"
    counted: list[str] = []
    rec = EventRecorder(
        api,
        component="kfed-manager",
        settings=EventSettings(global_qps=0.001, global_burst=5),
        on_dropped=counted.append,
    )
    for i in range(8):
        rec.normal(config_map(ns, f"cm-{i}"), "CreatedWorkload", f"Created Workload: {ns}/w{i}")
    # A backlog's "why it waits" is routine: no budget left for it...
    rec.warning(config_map(ns, "cm-0"), "Pending", "couldn't assign flavors")
    # ... but an alert has a budget of its own.
    rec.warning(config_map(ns, "cm-0"), "Failover", "worker lost")
    await written(rec)
    assert sorted(e["reason"] for e in await events_in(api, ns)) == [
        *["CreatedWorkload"] * 5,
        "Failover",
    ]
    assert rec.dropped["rate"] == 4 and counted == ["rate"] * 4


async def test_a_refused_write_is_dropped_and_counted_never_raised(
    api: KubeApi, unique: str
) -> None:
    rec = EventRecorder(api, component="kfed-manager")
    rec.normal(config_map(f"gone-{unique}", "x"), "Started", "no such namespace")
    await written(rec)
    assert rec.dropped["error"] == 1 and not rec.written
