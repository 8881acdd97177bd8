"""A run that ended on a worker while the manager could not see it counts as ended from the
moment the manager reads it afresh (``Collector.recover``), not from the moment the job
informer's resumed watch shows it: until then the informer still shows the job running, and
the reconcile that records the run read only the informer (a flaky drill in CI: the run was
judged unfinished, and the job's result was never copied)."""

from __future__ import annotations

import copy
from typing import Any, cast

from kubernetes_asyncio.client import ApiClient

from manager.api import constants as C
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.state import ClusterState
from manager.federation.decisions import leftovers
from manager.federation.engine.applier import Applier
from manager.federation.engine.collecting import Collector
from manager.federation.engine.lookups import Lookups
from manager.federation.engine.records import Records, Stats, ToldRefusals
from manager.federation.engine.retaining import Retaining
from manager.federation.settings import FederationSettings
from manager.federation.workers.registry import ClusterRegistry
from manager.federation.workers.remote import RemoteCluster
from manager.kube.api import KubeApi, Obj

SETTINGS = FederationSettings()
NS = "team-a"
WORKLOAD = "job-heavy-job-1a2b3"
KEY = f"{NS}/{WORKLOAD}"


def manager_workload() -> Obj:
    """Taken off its worker meanwhile: requeued, no quota held."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": WORKLOAD,
            "namespace": NS,
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "heavy-job", "controller": True}
            ],
        },
        "spec": {"queueName": "gpu"},
        "status": {},
    }


def remote_job(ended: bool) -> Obj:
    status: dict[str, Any] = {"active": 1}
    if ended:
        status = {
            "succeeded": 1,
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True"},
                {"type": "Complete", "status": "True"},
            ],
        }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "heavy-job",
            "namespace": NS,
            "labels": {C.PREBUILT_WORKLOAD_LABEL: WORKLOAD},
        },
        "spec": {},
        "status": status,
    }


def unfinished_copy() -> Obj:
    wl = manager_workload()
    wl["status"] = {"conditions": [{"type": "Admitted", "status": "True"}]}
    return wl


class Bed:
    """A manager's lookups over hand-filled caches and one worker whose job informer still
    shows the job running (its watch has not resumed yet)."""

    def __init__(self) -> None:
        self.state = ClusterState(KubeApi(cast(ApiClient, object()), name="unit"))
        self.records = Records()
        registry = ClusterRegistry(KubeApi(cast(ApiClient, object()), name="unit"), SETTINGS)
        self.look = Lookups(self.state, registry, SETTINGS, self.records)
        self.worker = RemoteCluster(
            "worker-1", KubeApi(cast(ApiClient, None), name="worker-1"), SETTINGS
        )
        self.state.workloads.cache[KEY] = manager_workload()
        self.state.jobs.cache[f"{NS}/heavy-job"] = {
            "metadata": {"name": "heavy-job", "namespace": NS},
            "spec": {"suspend": True},
        }
        jobs = self.worker.jobs()
        assert jobs is not None
        jobs._store(f"{NS}/heavy-job", remote_job(ended=False))  # what the informer still shows
        self.requeued: list[str] = []
        applier = Applier(
            self.state,
            registry,
            self.records,
            cast(Any, None),
            cast(Any, None),
            settings=SETTINGS,
            stats=Stats(),
            told_refusals=ToldRefusals(),
        )
        retaining = Retaining(self.state, SETTINGS, tell=self.state.events)
        self.collector = Collector(self.look, applier, self.requeued.append, retaining)


def test_the_informer_alone_shows_the_run_unfinished() -> None:
    bed = Bed()
    assert not bed.look.ended_there(bed.worker, KEY, unfinished_copy())
    found = bed.look.final_remote_job(bed.worker, bed.state.workloads.cache[KEY])
    assert found is not None and BATCH_JOB.outcome(found) is None


async def test_a_run_read_ended_on_return_is_recorded_though_the_informer_shows_it_running() -> (
    None
):
    bed = Bed()
    fresh: list[tuple[JobKind, Obj]] = [(BATCH_JOB, remote_job(ended=True))]

    deleted = await bed.collector._judge(
        leftovers.Moment.RETURNING,
        bed.worker,
        unfinished_copy(),
        fresh,
    )

    assert not deleted, "its run is the job's result: never collected"
    assert bed.requeued == [KEY], "the reconcile records it"
    assert bed.look.ended_there(bed.worker, KEY, unfinished_copy()), "ended, for the reconcile"
    final = bed.look.final_remote_job(bed.worker, bed.state.workloads.cache[KEY])
    assert final is not None and BATCH_JOB.outcome(final) is not None, "its result is copied"


async def test_an_ended_run_of_a_workload_already_gone_leaves_no_record_behind() -> None:
    bed = Bed()
    del bed.state.workloads.cache[KEY]
    fresh: list[tuple[JobKind, Obj]] = [(BATCH_JOB, remote_job(ended=True))]

    bed.collector._keep_ended(bed.worker, KEY, unfinished_copy(), fresh)

    assert bed.records.get(KEY) is None, "nothing would ever forget it"


def test_the_informer_wins_once_it_shows_the_run_ended_too() -> None:
    bed = Bed()
    bed.records(KEY).ended_remote_jobs["worker-1"] = remote_job(ended=True)
    later = copy.deepcopy(remote_job(ended=True))
    later["status"]["completionTime"] = "2026-12-01T20:00:00Z"
    jobs = bed.worker.jobs()
    assert jobs is not None
    jobs._store(f"{NS}/heavy-job", later)

    final = bed.look.final_remote_job(bed.worker, bed.state.workloads.cache[KEY])

    assert final is later


def fenced_failed_job() -> Obj:
    """Its copy was fenced and its running pods deleted: with backoffLimit 0 it ended Failed."""
    job = remote_job(ended=False)
    job["metadata"]["annotations"] = {leftovers.FENCED_ANNOTATION: "manager lease expired"}
    job["status"] = {"failed": 1, "conditions": [{"type": "Failed", "status": "True"}]}
    return job


def fenced_copy() -> Obj:
    wl = unfinished_copy()
    wl["metadata"]["annotations"] = {leftovers.FENCED_ANNOTATION: "manager lease expired"}
    wl["spec"]["active"] = False
    return wl


class DeletedCopies:
    """The collector's writes, recorded."""

    def __init__(self) -> None:
        self.deleted: list[tuple[str, str]] = []

    async def delete_copy(self, remote: RemoteCluster, key: str, obj: Obj | None) -> bool:
        self.deleted.append((remote.name, key))
        return True


async def test_a_fenced_run_read_failed_on_return_is_collected_never_its_result() -> None:
    """Issue 30, item 3: the fenced copy's Job ended Failed (its running pods were deleted)
    and was kept as the run that "ended while it was unreachable"; the healthy second run was
    then stopped and the job recorded Failed."""
    bed = Bed()
    writes = DeletedCopies()
    bed.collector.applier.write = cast(Any, writes)
    fresh: list[tuple[JobKind, Obj]] = [(BATCH_JOB, fenced_failed_job())]

    deleted = await bed.collector._judge(
        leftovers.Moment.RETURNING, bed.worker, fenced_copy(), fresh
    )

    assert deleted and writes.deleted == [("worker-1", KEY)], "a leftover: collected"
    assert bed.requeued == [], "nothing to record"
    record = bed.records.get(KEY)
    assert record is None or not record.ended_remote_jobs, "never kept as a result"
    assert not bed.look.ended_there(bed.worker, KEY, fenced_copy(), fresh)


def test_a_kept_end_of_a_fenced_run_is_never_copied_to_the_manager() -> None:
    """Its Job deleted after it ended (kept from the DELETED event): still a stopped run."""
    bed = Bed()
    bed.records(KEY).ended_remote_jobs["worker-1"] = fenced_failed_job()

    assert not bed.look.ended_there(bed.worker, KEY, None)
    found = bed.look.final_remote_job(bed.worker, bed.state.workloads.cache[KEY])
    assert found is None or BATCH_JOB.outcome(found) is None
