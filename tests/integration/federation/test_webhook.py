"""The manager's Job webhook in a real kube-apiserver: Jobs in MultiKueue queues are created
with ``managedBy: kueue.x-k8s.io/multikueue``, every queued Job is created suspended, Jobs
without a queue never reach the webhook, and a manager that is not ready (or not there)
refuses queued Jobs instead of letting them through unmutated.

The lite manager apiserver is shared with other tests: the webhook configuration here has
its own name, only selects this test's namespace, and is deleted at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiException, BatchV1Api

from e2e.local.federation import LocalFederation
from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers.state import ClusterState
from manager.federation.webhooks import certs, webhookconfig
from manager.federation.webhooks.webhook import ClusterStateQueues, WebhookServer
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.controllers.builders import cluster_queue, flavor, local_queue

pytestmark = pytest.mark.integration

Obj = dict[str, Any]


@dataclass(frozen=True)
class Queues:
    namespace: str
    multikueue: str
    """A LocalQueue whose ClusterQueue uses the MultiKueue admission check."""
    plain: str
    """A LocalQueue whose ClusterQueue has no admission check."""


@pytest.fixture
async def api(kueue_crds: LocalFederation) -> AsyncIterator[KubeApi]:
    async with await KubeApi.from_kubeconfig_file(
        kueue_crds.cluster("manager").kubeconfig, name="manager"
    ) as client:
        yield client


@pytest.fixture
async def queues(api: KubeApi, unique: str) -> AsyncIterator[Queues]:
    """A namespace with two LocalQueues: one leads to a MultiKueue check, one does not."""
    ns, check, rf = f"webhook-{unique}", f"mk-{unique}", f"rf-{unique}"
    mk_cq, plain_cq = f"mk-{unique}", f"plain-{unique}"
    with_check = cluster_queue(mk_cq, rf, gpus=4)
    with_check["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": check}]}
    cluster_scoped = [
        (R.ADMISSION_CHECKS, _admission_check(check)),
        (R.RESOURCE_FLAVORS, flavor(rf, "h100")),
        (R.CLUSTER_QUEUES, with_check),
        (R.CLUSTER_QUEUES, cluster_queue(plain_cq, rf, gpus=4)),
    ]
    await api.create(R.NAMESPACES, {"metadata": {"name": ns}})
    try:
        for res, body in cluster_scoped:
            await api.create(res, body)
        await api.create(R.LOCAL_QUEUES, local_queue(ns, "gpu-mk", mk_cq))
        await api.create(R.LOCAL_QUEUES, local_queue(ns, "gpu-plain", plain_cq))
        yield Queues(ns, "gpu-mk", "gpu-plain")
    finally:
        for job in (await api.list(R.JOBS, ns))["items"]:
            await api.delete(R.JOBS, job["metadata"]["name"], ns)
        for name in ("gpu-mk", "gpu-plain"):
            await api.delete(R.LOCAL_QUEUES, name, ns)
        for res, body in reversed(cluster_scoped):
            await api.delete(res, body["metadata"]["name"])
        await api.delete(R.NAMESPACES, ns)


def _admission_check(name: str) -> Obj:
    return {
        "apiVersion": C.API_VERSION,
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {"controllerName": C.MULTIKUEUE_CONTROLLER_NAME},
    }


class CountingQueues(ClusterStateQueues):
    """The real lookup, counting the reviews it answered (the webhook asks ``ready()`` once
    per review) and how many of them found it not ready."""

    def __init__(self, state: ClusterState) -> None:
        super().__init__(state)
        self.reviews = 0
        self.refusals = 0

    def ready(self) -> bool:
        ready = super().ready()
        self.reviews += 1
        self.refusals += not ready
        return ready


@dataclass
class Webhook:
    lookup: CountingQueues
    server: WebhookServer
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def start_informers(self) -> None:
        """The queue view starts loading (the webhook is served before that)."""
        self.tasks += [asyncio.create_task(i.run()) for i in self.lookup.informers]


@pytest.fixture
async def webhook(
    api: KubeApi, queues: Queues, unique: str, tmp_path: Path
) -> AsyncIterator[Webhook]:
    """The webhook served in-process on a free port and registered with the apiserver, its
    queue view not loading yet. Unregistered before anything else stops."""
    ca_bundle = certs.write_serving_certificate(tmp_path, ["127.0.0.1"])
    lookup = CountingQueues(ClusterState(api))
    server = WebhookServer(lookup, "127.0.0.1", 0, tmp_path)
    await server.start()
    bed = Webhook(lookup, server)
    name = f"kfed-manager-{unique}"
    try:
        await webhookconfig.ensure_webhook_configuration(
            api,
            name=name,
            url=server.url,
            ca_bundle=ca_bundle,
            namespace_selector={"matchLabels": {"kubernetes.io/metadata.name": queues.namespace}},
        )
        yield bed
    finally:
        await webhookconfig.delete_webhook_configuration(api, name)
        await server.stop()
        for task in bed.tasks:
            task.cancel()
        for task in bed.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def job(namespace: str, name: str, queue: str | None) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {C.QUEUE_NAME_LABEL: queue} if queue else {},
        },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox"}],
                }
            }
        },
    }


async def webhook_answers(api: KubeApi, queues: Queues, expected: str) -> bool:
    """Create (dry run, no retries) a Job in the MultiKueue queue: did the webhook answer
    ``expected`` (``mutated`` or ``not-ready``)? Neither while the apiserver does not call it
    yet: a webhook configuration takes a moment to reach the apiserver's admission chain."""
    probe: Any = job(queues.namespace, "probe", queues.multikueue)  # the client takes dicts too
    try:
        created = await BatchV1Api(api.client).create_namespaced_job(
            queues.namespace, probe, dry_run="All"
        )
    except ApiException as err:
        if err.status == 503 and "kfed manager not ready" in str(err.body):
            return expected == "not-ready"
        raise
    return expected == "mutated" and created.spec.managed_by == C.MULTIKUEUE_MANAGED_BY


async def ready_and_registered(api: KubeApi, queues: Queues, webhook: Webhook) -> None:
    webhook.start_informers()
    await wait_for(webhook.lookup.ready, timeout=60, what="the queue view loaded")
    await wait_for(
        lambda: webhook_answers(api, queues, "mutated"),
        timeout=60,
        what="the apiserver calling the webhook",
    )


async def test_jobs_in_multikueue_queues_are_created_managed_by_multikueue(
    api: KubeApi, queues: Queues, webhook: Webhook
) -> None:
    await ready_and_registered(api, queues, webhook)
    ns = queues.namespace

    federated = await api.create(R.JOBS, job(ns, "federated", queues.multikueue))
    local = await api.create(R.JOBS, job(ns, "local", queues.plain))
    reviews = webhook.lookup.reviews
    unqueued = await api.create(R.JOBS, job(ns, "unqueued", None))

    assert federated["spec"]["managedBy"] == C.MULTIKUEUE_MANAGED_BY
    assert federated["spec"]["suspend"] is True
    assert "managedBy" not in local["spec"]
    assert local["spec"]["suspend"] is True
    assert "managedBy" not in unqueued["spec"]
    assert unqueued["spec"]["suspend"] is False
    assert webhook.lookup.reviews == reviews, "the objectSelector kept the unqueued Job away"


async def test_a_queued_job_created_before_the_manager_is_ready_is_retried_then_mutated(
    api: KubeApi, queues: Queues, webhook: Webhook
) -> None:
    await wait_for(
        lambda: webhook_answers(api, queues, "not-ready"),
        timeout=60,
        what="the apiserver calling the webhook, which is not ready",
    )
    refusals = webhook.lookup.refusals

    # kfed's client honours the Retry-After the refusal carries, as client-go does.
    creating = asyncio.create_task(
        api.create(R.JOBS, job(queues.namespace, "early", queues.multikueue))
    )
    await wait_for(
        lambda: webhook.lookup.refusals > refusals, timeout=10, what="the first attempt refused"
    )
    webhook.start_informers()
    early = await asyncio.wait_for(creating, timeout=60)

    assert early["spec"]["managedBy"] == C.MULTIKUEUE_MANAGED_BY
    assert early["spec"]["suspend"] is True


async def test_without_the_manager_queued_jobs_are_refused_and_others_are_not(
    api: KubeApi, queues: Queues, webhook: Webhook
) -> None:
    await ready_and_registered(api, queues, webhook)
    await webhook.server.stop()
    ns = queues.namespace

    unqueued = await api.create(R.JOBS, job(ns, "unqueued", None))
    with pytest.raises(errors.KubeError) as refused:
        await api.create(R.JOBS, job(ns, "federated", queues.multikueue))

    assert unqueued["metadata"]["name"] == "unqueued"
    assert "mjob.kfed.io" in refused.value.message
    assert not [
        j for j in (await api.list(R.JOBS, ns))["items"] if j["metadata"]["name"] == "federated"
    ]
