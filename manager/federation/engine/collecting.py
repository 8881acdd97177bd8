"""Leftovers on the workers: copies the manager no longer places there, and our Jobs whose
Workload is gone. Collected when a lost worker comes back (before anything else happens
there) and every ``gc_interval``. A finished copy of a live workload is never collected: the
run it records is the job's result (the reconcile copies it first); a run that was stopped
(fenced, evicted, moved: ``leftovers.run_end``) is no result, and is collected. Nor, until
its retention is over, the copy (with our Job) of a finished workload's run on the worker it
ran on."""

from __future__ import annotations

import logging
from collections.abc import Callable

from manager.api import constants as C
from manager.api.view import labels_of
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.base import JobKind
from manager.federation.decisions import actions as do
from manager.federation.decisions import checkstatus, leftovers
from manager.federation.engine.applier import Applier
from manager.federation.engine.lookups import Lookups, run_facts
from manager.federation.engine.retaining import Retaining, ran_on
from manager.federation.workers.remote import RemoteCluster
from manager.federation.workers.remoteobjects import workload_keys_of_job
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import Obj
from manager.telemetry import tracing

log = logging.getLogger(__name__)


class Collector:
    def __init__(
        self,
        look: Lookups,
        applier: Applier,
        requeue: Callable[[str], None],
        retaining: Retaining,
    ) -> None:
        self.look = look
        self.applier = applier
        self.requeue = requeue
        self.state = look.state
        self.retaining = retaining

    async def recover(self, remote: RemoteCluster) -> None:
        """Before anything else happens on a worker that was lost: remove copies the manager
        no longer places there (the workload moved, finished or is gone). Read afresh: the
        informers may not have caught up with what happened there while it was unreachable
        (a copy that finished meanwhile must be seen finished, never deleted as a leftover)."""
        jobs: dict[str, list[tuple[JobKind, Obj]]] = {}
        try:
            fresh = await remote.api.list(R.WORKLOADS, label_selector=remote.origin_selector)
            # Our jobs too: the informers may still show a job as running that ended while
            # the worker could not be seen (they re-list on their own time).
            for kind in list(remote.job_informers):
                listed = await remote.api.list(kind.resource, label_selector=remote.origin_selector)
                for job in listed["items"]:
                    for key in workload_keys_of_job(job):
                        jobs.setdefault(key, []).append((kind, job))
        except errors.KubeError as err:
            log.info("not recovering %s yet (%s): the garbage collection will", remote.name, err)
            return
        for copy_ in fresh["items"]:
            key = ws.key_of(copy_)
            await self._judge(leftovers.Moment.RETURNING, remote, copy_, jobs.get(key, []))
        await self._collect_orphan_jobs(remote)
        await self._collect_orphan_templates(remote)

    def _keep_ended(
        self, remote: RemoteCluster, key: str, copy_: Obj, jobs: list[tuple[JobKind, Obj]]
    ) -> None:
        """Remember the ended job of a run that counts (read afresh), for the reconcile."""
        if self.state.workloads.get(key) is None:
            return  # nothing to record it on; its record would outlive it
        for kind, job in jobs:
            if kind.outcome(job) is None:
                continue
            # A stopped run (a fenced Job Failed by its deleted pods) is no result: never kept.
            facts = run_facts(copy_, [(kind, job)], self.look.records.was_stopped)
            run = leftovers.run_end(facts)
            if run is leftovers.RunEnd.RESULT:
                self.applier.note_ended_run(key, remote.name, job)
                log.info("the run of %s on %s ended while it was unreachable", key, remote.name)

    def workload_facts(self, key: str) -> leftovers.WorkloadFacts:
        obj = self.state.workloads.get(key)
        if obj is None:
            return leftovers.WorkloadFacts(exists=False)
        status = ws.status_of(obj)
        cluster = str(status.get("clusterName") or "")
        federated = self.look.multikueue_check(obj)
        ready = federated is not None and checkstatus.check_state(obj, federated[0])[0] == "Ready"
        placement = self.look.records.placement(key)
        placed_on = {cluster} if cluster else set()
        if placement is not None:
            placed_on.add(placement.cluster)
        return leftovers.WorkloadFacts(
            finished=ws.is_finished(obj),
            holds_quota=ws.has_reservation(obj),
            runs_on=cluster if ready else "",
            placed_on=frozenset(placed_on),
            ran_on=ran_on(obj),
            retention_left=self.retaining.left(obj),
        )

    async def _judge(
        self,
        moment: leftovers.Moment,
        remote: RemoteCluster,
        copy_: Obj,
        jobs: list[tuple[JobKind, Obj]] | None = None,
    ) -> bool:
        """Judge one copy (with our jobs there made for it, read afresh, when given) and carry
        the verdict out; True when it was deleted."""
        key = ws.key_of(copy_)
        copy_facts = leftovers.CopyFacts(
            remote.name,
            finished=self.look.ended_there(remote, key, copy_, jobs),
            active=ws.is_active(copy_),
        )
        verdict = leftovers.judge_copy(moment, copy_facts, self.workload_facts(key))
        if verdict is leftovers.Verdict.RECORD:
            # The reconcile records that run (it never runs again) from what was read here:
            # the job informer may show it running for a while yet.
            self._keep_ended(remote, key, copy_, jobs or [])
            self.requeue(key)
        if verdict is not leftovers.Verdict.DELETE:
            return False
        obj = self.state.workloads.get(key)
        with tracing.workload_context(obj or copy_):
            await self.applier.collect(remote, key, do.CollectCopy(str(moment), obj))
        return True

    async def collect_garbage(self) -> int:
        """Delete remote copies of our origin whose manager workload is gone or finished."""
        removed = 0
        for remote in self.look.registry.active():
            for copy_ in list(remote.workloads().items()):
                removed += await self._judge(leftovers.Moment.SWEEP, remote, copy_)
            removed += await self._collect_orphan_jobs(remote)
            removed += await self._collect_orphan_templates(remote)
        return removed

    async def _collect_orphan_templates(self, remote: RemoteCluster) -> int:
        """Our ResourceClaimTemplates on a worker whose workload has no copy there and is not
        placed there (left by a copy deleted while the worker was unreachable, or whose
        deletion failed): one listing of ours per sweep, on workers that serve DRA."""
        if not remote.serves_devices:
            return 0
        try:
            listed = await remote.api.list(
                R.RESOURCE_CLAIM_TEMPLATES, label_selector=remote.origin_selector
            )
        except errors.KubeError as err:
            log.info("listing our ResourceClaimTemplates on %s: %s", remote.name, err)
            return 0
        removed = 0
        for template in listed["items"]:
            meta = template["metadata"]
            workload = labels_of(template).get(C.PREBUILT_WORKLOAD_LABEL, "")
            key = f"{meta['namespace']}/{workload}"
            if leftovers.template_is_orphan(
                remote.name,
                deleting=bool(meta.get("deletionTimestamp")),
                copy_exists=remote.workloads().get(key) is not None,
                workload=self.workload_facts(key),
            ):
                orphan = do.CollectOrphan(R.RESOURCE_CLAIM_TEMPLATES, template)
                await self.applier.collect(remote, key, orphan)
                removed += 1
        return removed

    async def _collect_orphan_jobs(self, remote: RemoteCluster) -> int:
        """Our Jobs on a worker whose Workload is gone there and on the manager (left by a
        copy deleted while the worker was unreachable, or by an earlier registration): they
        would block a same-named Job submitted again."""
        removed = 0
        for kind, jobs in list(remote.job_informers.items()):
            removed += await self._collect_orphans_of(remote, kind, jobs.items())
        return removed

    async def _collect_orphans_of(
        self, remote: RemoteCluster, kind: JobKind, jobs: list[Obj]
    ) -> int:
        removed = 0
        for job in jobs:
            meta = job["metadata"]
            workload = labels_of(job).get(C.PREBUILT_WORKLOAD_LABEL, "")
            key = f"{meta['namespace']}/{workload}"
            if leftovers.job_is_orphan(
                deleting=bool(meta.get("deletionTimestamp")),
                copy_exists=remote.workloads().get(key) is not None,
                workload=self.workload_facts(key),
            ):
                orphan = do.CollectOrphan(kind.resource, job, foreground=True)
                await self.applier.collect(remote, key, orphan)
                removed += 1
        return removed
