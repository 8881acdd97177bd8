"""Upstream Kueue's TAS examples (tests/data/upstream-tas, unchanged) on a cluster where kfed's
worker shim admits with ``--topology-aware-scheduling``, behaving as upstream documents
(site/content/en/docs/concepts/topology_aware_scheduling.md):

- ``sample-job-required`` (10 pods, ``podset-required-topology`` rack): all in one rack;
- ``sample-job-preferred`` (40 pods of 1 cpu, preferred block): admitted even though no
  block holds 40 (32 cpu each), across both blocks;
- ``sample-job-unconstrained`` (6 pods): admitted anywhere.

The test adds the nodes upstream's examples expect (label ``cloud.provider.com/node-group:
tas-group``, with block, rack and hostname labels): 2 blocks of 2 racks of 2 hosts of 8 cpu,
on worker-1 of the full bed, with kfed's Job webhook registered there (upstream's Jobs are
created unsuspended: the webhook suspends them at creation, as Kueue's does), and removes
them and the examples' objects afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from e2e.local.kwoknodes import KWOK_NODE_ANNOTATION
from e2e.waiting import wait_for
from manager.federation.webhooks.admission_webhook import ManagerWebhook
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj
from tests.integration.federation.bed import Bed, webhook_called

pytestmark = pytest.mark.full

UPSTREAM = Path(__file__).resolve().parents[2] / "data" / "upstream-tas"
WORKER = "worker-1"
BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"


def node(name: str, block: str, rack: str) -> Obj:
    key, value = KWOK_NODE_ANNOTATION
    capacity = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    labels = {"type": "kwok", HOST: name, BLOCK: block, RACK: rack}
    labels["cloud.provider.com/node-group"] = "tas-group"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": {key: value}, "labels": labels},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


@pytest.fixture
async def upstream(bed: Bed, unique: str) -> AsyncIterator[tuple[Bed, dict[str, dict[str, str]]]]:
    """worker-1 with upstream's nodes and queues and a topology-aware shim; node -> labels."""
    api = bed.worker_apis[WORKER]
    nodes = {}
    for b in ("b1", "b2"):
        for r in ("r1", "r2"):
            for h in ("h1", "h2"):
                body = node(f"tas-{unique}-{b}-{r}-{h}", f"{b}-{unique}", f"{b}-{r}-{unique}")
                await api.create(R.NODES, body)
                nodes[body["metadata"]["name"]] = body["metadata"]["labels"]
    # Upstream's Jobs are created unsuspended: a webhook must suspend them at creation, as
    # Kueue's does (here kfed's, registered on this worker for the test).
    webhook = ManagerWebhook(
        api, register_url_host="127.0.0.1", configuration_name=f"kfed-tas-{unique}"
    )
    try:
        bed.fed.kubectl(WORKER, "apply", "-f", str(UPSTREAM / "sample-queues.yaml"))
        await bed.start_shim(WORKER, topology=True)
        bed.tasks[f"webhook/{WORKER}"] = asyncio.create_task(webhook.run())
        await asyncio.wait_for(webhook.started.wait(), 30)
        await wait_for(lambda: webhook_called(api), timeout=60, what="the worker's webhook")
        yield bed, nodes
    finally:
        await webhook.unregister()
        await bed.stop_all()
        with contextlib.suppress(Exception):
            bed.fed.kubectl(
                WORKER,
                "delete",
                "jobs",
                "-n",
                "default",
                "-l",
                "kueue.x-k8s.io/queue-name=tas-user-queue",
            )
        bed.fed.kubectl(
            WORKER, "delete", "--ignore-not-found", "-f", str(UPSTREAM / "sample-queues.yaml")
        )
        for name in nodes:
            with contextlib.suppress(errors.NotFound):
                await api.delete(R.NODES, name)


async def create(bed: Bed, example: str) -> str:
    """``kubectl create -f`` of an upstream example Job (they use generateName): its name.
    In a thread: the webhook kubectl's request waits for answers in this event loop."""
    path = str(UPSTREAM / example)
    done = await asyncio.to_thread(bed.fed.kubectl, WORKER, "create", "-f", path)
    found = re.search(r"job\.batch/(\S+) created", done.stdout)
    assert found, done.stdout
    return found.group(1)


async def running_on(api: KubeApi, job: str, count: int) -> list[str] | None:
    """The nodes of ``job``'s pods once ``count`` of them ran there (running or done: kwok
    ends a Job's pod after 3 s, and upstream's Jobs say nothing of how long they run)."""
    pods = (await api.list(R.PODS, "default", label_selector=f"job-name={job}"))["items"]
    nodes = [
        str(p["spec"].get("nodeName"))
        for p in pods
        if (p.get("status") or {}).get("phase") in ("Running", "Succeeded")
    ]
    return nodes if len(nodes) == count else None


async def test_upstream_tas_examples_apply_unchanged_and_place_as_documented(
    upstream: tuple[Bed, dict[str, dict[str, str]]],
) -> None:
    bed, nodes = upstream
    api = bed.worker_apis[WORKER]

    required = await create(bed, "sample-job-required.yaml")
    placed = await wait_for(
        lambda: running_on(api, required, 10), timeout=120, what="the required example running"
    )
    assert placed is not None
    assert len({nodes[n][RACK] for n in placed}) == 1, placed  # one rack, as required

    preferred = await create(bed, "sample-job-preferred.yaml")
    spread = await wait_for(
        lambda: running_on(api, preferred, 40), timeout=120, what="the preferred example running"
    )
    assert spread is not None
    # No block has 40 cpu (32 each): admitted across both, not refused.
    assert len({nodes[n][BLOCK] for n in spread}) == 2

    unconstrained = await create(bed, "sample-job-unconstrained.yaml")
    anywhere = await wait_for(
        lambda: running_on(api, unconstrained, 6), timeout=120, what="the unconstrained one"
    )
    assert anywhere is not None and set(anywhere) <= set(nodes)
