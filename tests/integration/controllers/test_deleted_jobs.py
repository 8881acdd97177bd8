"""A job being deleted gets no new Workload, as upstream's job reconciler only drops
finalizers for a job with a deletion timestamp.

Under foreground deletion (``kubectl delete --cascade=foreground``, or a client's
``propagationPolicy: Foreground``) the garbage collector deletes the job's Workload first and
the job itself only afterwards. Before, kfed's job controller saw a job without a Workload in
between and made a new one, which was admitted (and, on a manager, placed on a worker) once
more: a copy created twice on a worker of upstream Kueue (CI, 2026-12-06,
``test_kfed_manager_runs_the_article_jobs_on_a_worker_running_upstream_kueue``). Here a
finalizer of the test's own holds the job in that state for as long as the test needs, and
the test deletes the Workload itself, as the garbage collector does (whose monitor of a
custom resource starts up to 30 s after the cluster: waiting for it would time the test by
the garbage collector's discovery instead)."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.binaries import operators
from e2e.waiting import wait_for
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.batchjob import BatchJob
from manager.controllers.jobkinds.jobset import JOBSETS, JobSetKind
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi
from tests.integration.controllers import builders as b
from tests.integration.controllers.conftest import (
    StartController,
    h100_queue,
)
from tests.integration.controllers.helpers import install_crds

pytestmark = pytest.mark.full
Obj = dict[str, Any]
HOLD = "kfed.test/hold"
"""The test's finalizer: the job stays deleting, without its Workload, until it is lifted."""
RUNNING_MS = 600_000


def a_job(ns: str, name: str, queue: str) -> Obj:
    return b.job(ns, name, queue, delay_ms=RUNNING_MS, model="h100")


def a_jobset(ns: str, name: str, queue: str) -> Obj:
    return b.jobset(ns, name, queue, workers=2, model="h100", delay_ms=RUNNING_MS)


KINDS: dict[str, tuple[R.Resource, JobKind, Any]] = {
    "job": (R.JOBS, BatchJob(), a_job),
    "jobset": (JOBSETS, JobSetKind(), a_jobset),
}


async def workload_of(api: KubeApi, res: R.Resource, kind: JobKind, ns: str, name: str) -> Obj:
    """The Workload of job ``name`` (the job must exist), or {} when it has none."""
    key = kind.workload_key(await api.get(res, name, ns))
    try:
        return await api.get(R.WORKLOADS, key.split("/", 1)[1], ns)
    except errors.NotFound:
        return {}


@pytest.mark.parametrize("kind_name", sorted(KINDS))
async def test_upstream_a_job_being_deleted_gets_no_new_workload(
    api: KubeApi,
    ns: str,
    unique: str,
    cluster_objects: list[tuple[R.Resource, str]],
    start_controller: StartController,
    kind_name: str,
) -> None:
    res, kind, build = KINDS[kind_name]
    if res is JOBSETS:
        await install_crds(api, operators.JOBSET, JOBSETS)
    await h100_queue(api, ns, f"del-{unique}", gpus=8, cleanup=cluster_objects)
    await start_controller()

    held = build(ns, "held", "q")
    held["metadata"]["finalizers"] = [HOLD]
    await api.create(res, held, ns)

    async def admitted(name: str) -> Obj | None:
        wl = await workload_of(api, res, kind, ns, name)
        return wl if wl and ws.is_admitted(wl) else None

    first = await wait_for(lambda: admitted("held"), timeout=30, what="held admitted")
    assert first is not None
    try:
        await api.delete(res, "held", ns, propagation="Foreground")
        await api.delete(R.WORKLOADS, first["metadata"]["name"], ns, uid=first["metadata"]["uid"])
        # The controller saw that deletion before it sees a job created after it: once the
        # later job has its Workload, the held one would have had a new one too.
        await api.create(res, build(ns, "later", "q"), ns)
        await wait_for(lambda: admitted("later"), timeout=30, what="later admitted")
        job = await api.get(res, "held", ns)
        assert job["metadata"].get("deletionTimestamp"), "still being deleted"
        assert await workload_of(api, res, kind, ns, "held") == {}
    finally:
        await api.patch(res, "held", {"metadata": {"finalizers": None}}, ns)

    async def held_gone() -> bool:
        try:
            await api.get(res, "held", ns)
        except errors.NotFound:
            return True
        return False

    await wait_for(held_gone, timeout=60, what="the held job gone once its finalizer is lifted")
