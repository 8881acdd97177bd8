"""Kinds of job the manager queues but does not federate yet, as upstream MultiKueue treats a
kind without an adapter: the webhook suspends it and gives it to MultiKueue at creation, the
MultiKueue check rejects the workload with upstream's words, the workload is deactivated, and
nothing of it runs, on the manager or on any worker."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.binaries import operators
from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.jobset import JOBSETS, JobSetKind
from manager.kube import errors
from manager.kube import resources as R
from tests.integration.controllers.builders import jobset
from tests.integration.controllers.helpers import install_crds
from tests.integration.federation import article
from tests.integration.federation.bed import CHECK, Bed
from tests.integration.federation.test_never_twice_never_stuck import start

pytestmark = pytest.mark.full
NS = article.NS
Obj = dict[str, Any]


async def test_upstream_a_kind_without_a_multikueue_adapter_is_rejected_and_never_runs(
    article_bed: Bed,
) -> None:
    bed = article_bed
    api = bed.manager_api
    await install_crds(api, operators.JOBSET, JOBSETS)
    await start(bed)
    await api.create(JOBSETS, jobset(NS, "unfederated", "gpu-lq", workers=2), NS)
    js = await api.get(JOBSETS, "unfederated", NS)
    # The manager's webhook took it, as it takes Jobs: suspended at creation, and given to
    # MultiKueue, so a JobSet operator on the manager would leave it alone.
    assert js["spec"]["suspend"] is True
    assert js["spec"]["managedBy"] == C.MULTIKUEUE_MANAGED_BY
    name = JobSetKind().workload_key(js).split("/", 1)[1]

    async def rejected_and_deactivated() -> str | None:
        try:
            wl = await api.get(R.WORKLOADS, name, NS)
        except errors.NotFound:
            return None
        if ws.is_active(wl):
            return None
        for c in ws.status_of(wl).get("conditions") or []:
            if c["type"] == C.EVICTED and c["status"] == "True" and "rejected" in c["message"]:
                return str(c["message"])
        return None

    message = await wait_for(
        rejected_and_deactivated, timeout=60, what="the JobSet's workload rejected, deactivated"
    )
    assert message is not None
    expected = 'No multikueue adapter found for owner kind "jobset.x-k8s.io/v1alpha2, Kind=JobSet"'
    assert f"{CHECK}: {expected}" in message, message
    assert (await api.get(JOBSETS, "unfederated", NS))["spec"]["suspend"] is True
    for worker, wapi in bed.worker_apis.items():
        copies = (await wapi.list(R.WORKLOADS, NS))["items"]
        assert not [c for c in copies if c["metadata"]["name"] == name], worker
