"""Namespace trust, second half: a worker whose MultiKueueCluster lists the objects its
manager's jobs may use there (``kfed.io/allowed-references``) takes a job only if every
ServiceAccount, Secret, ConfigMap and PersistentVolumeClaim its pods name matches a rule
(docs/security.md). A job mounting a Secret the worker does not allow goes to another worker,
or waits with the reason (check message, Event) and runs once the worker allows it; a
malformed annotation refuses everything and says why on the MultiKueueCluster."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.waiting import wait_for
from manager.federation.decisions import references
from manager.federation.engine import workloadview
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.federation import article
from tests.integration.federation.bed import Bed
from tests.integration.federation.test_dispatch import check_message, complete, h100_job, placed

pytestmark = pytest.mark.full
NS = article.NS
SECRET = "db-password"


async def allow(api: KubeApi, worker: str, rules: str | None) -> None:
    patch = {"metadata": {"annotations": {references.ANNOTATION: rules}}}
    await api.patch(R.MULTIKUEUE_CLUSTERS, worker, patch)


def mounting_the_secret(job: dict[str, Any]) -> dict[str, Any]:
    spec = job["spec"]["template"]["spec"]
    spec["volumes"] = [{"name": "db", "secret": {"secretName": SECRET}}]
    spec["containers"][0]["volumeMounts"] = [{"name": "db", "mountPath": "/db"}]
    return job


def refused_on(worker: str) -> str:
    return (
        f"{worker}: Secret {NS}/{SECRET} is not allowed for namespace {NS} on {worker} "
        f"({references.ANNOTATION})"
    )


async def events_of(api: KubeApi, reason: str, namespace: str) -> list[str]:
    listed = await api.list(R.EVENTS, namespace)
    return [str(e.get("message")) for e in listed["items"] if e.get("reason") == reason]


async def test_a_worker_that_does_not_allow_the_secret_is_passed_over_for_one_that_does(
    article_bed: Bed,
) -> None:
    bed = article_bed
    api = bed.manager_api
    for worker in ("worker-1", "worker-2", "worker-3"):
        await bed.start_shim(worker)
    # worker-2 comes first in the config and is as free as worker-3: only its rules differ.
    await allow(api, "worker-2", "serviceaccount:*/default, configmap:*/*")
    try:
        await bed.start_manager()
        await api.create(R.JOBS, mounting_the_secret(h100_job("secret-job")), NS)
        wl = await wait_for(lambda: placed(api, "secret-job"), timeout=60, what="placed")
        assert wl is not None and wl["status"]["clusterName"] == "worker-3"
        decision, _ = workloadview.placement_of(wl)
        assert decision is not None
        assert refused_on("worker-2") in decision.candidates, decision.candidates
        assert not (await bed.worker_apis["worker-2"].list(R.WORKLOADS, NS))["items"]

        event = f"not placed on worker-2: {refused_on('worker-2').partition(': ')[2]}"

        async def told() -> bool:
            return event in await events_of(api, references.EVENT_REASON, NS)

        await wait_for(told, timeout=30, what="the ReferencesNotAllowed Event")
        await wait_for(lambda: complete(api, "secret-job"), timeout=90, what="ran on worker-3")
    finally:
        await allow(api, "worker-2", None)


async def test_a_job_waits_with_the_reason_until_its_only_worker_allows_the_secret(
    article_bed: Bed,
) -> None:
    bed = article_bed
    api = bed.manager_api
    for worker in ("worker-1", "worker-2"):
        await bed.start_shim(worker)
    await allow(api, "worker-1", "secret:ml-jobs/db, serviceaccount")  # a rule without a target
    try:
        await bed.start_manager()

        async def told_malformed() -> list[str] | None:
            # A cluster-scoped object's Events go to the default namespace.
            told = await events_of(api, references.MALFORMED_REASON, "default")
            return [m for m in told if "rule 'serviceaccount'" in m] or None

        told = await wait_for(told_malformed, timeout=30, what="the malformed Event")
        assert f"{references.ANNOTATION}: rule 'serviceaccount'" in (told or [""])[0]

        job = mounting_the_secret(article.seed_job("02-light-job.yaml", delay_ms=1000))
        await api.create(R.JOBS, job, NS)

        async def message_with(words: str) -> str | None:
            message = await check_message(api, "light-job")
            return message if words in message else None

        message = await wait_for(
            lambda: message_with("cannot be read"), timeout=60, what="refused: malformed"
        )
        assert "rule 'serviceaccount': expected KIND:NAMESPACE/NAME" in (message or "")

        # Readable, but the Secret is not among what it allows.
        await allow(api, "worker-1", "secret:ml-jobs/db, serviceaccount:*/default")
        message = await wait_for(
            lambda: message_with("is not allowed"), timeout=60, what="refused: the Secret"
        )
        assert refused_on("worker-1") in (message or "")
        assert not (await bed.worker_apis["worker-1"].list(R.WORKLOADS, NS))["items"]

        await allow(api, "worker-1", "secret:ml-jobs/db-*, serviceaccount:*/default")
        wl = await wait_for(
            lambda: placed(api, "light-job"), timeout=60, what="placed once allowed"
        )
        assert wl is not None and wl["status"]["clusterName"] == "worker-1"
        await wait_for(lambda: complete(api, "light-job"), timeout=90, what="ran on worker-1")
    finally:
        await allow(api, "worker-1", None)
