"""Everything the dispatcher reads about a workload, in one place: whether and where it is
federated, its manager Job, its copies and Jobs on the workers, and what each worker's
connection allows (the one failover timing, ``failover.may_move_at``). Reads only: the
informer caches and the per-workload records; every write is in ``writes.py``."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence

from manager.api import constants as C
from manager.api import federated
from manager.api.view import annotations_of, at, labels_of
from manager.controllers import conditions
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds import registry as job_kinds
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.state import ClusterState
from manager.federation.decisions import failover, following, leftovers
from manager.federation.engine.records import Records
from manager.federation.settings import (
    FAILOVER_POLICY_ANNOTATION,
    FailoverPolicy,
    FederationSettings,
    failover_policy,
)
from manager.federation.workers.registry import ClusterRegistry
from manager.federation.workers.remote import RemoteCluster
from manager.federation.workers.remoteobjects import FEDERATED_KINDS, JOBS_BY_WORKLOAD
from manager.kube.api import Obj

UNBLOCK_MARGIN = 0.05
"""Seconds after a block ends before looking again, so that the block has surely ended."""


def ours(remote_obj: Obj, origin: str) -> bool:
    """Made by this manager (its origin label), so kfed may change or delete it."""
    return labels_of(remote_obj).get(C.MULTIKUEUE_ORIGIN_LABEL) == origin


def made_for(remote_job: Obj, manager_wl: Obj) -> bool:
    """A remote Job made for this manager Workload (not for an earlier one of that name)."""
    workload = labels_of(remote_job).get(C.PREBUILT_WORKLOAD_LABEL)
    return bool(workload == manager_wl["metadata"]["name"])


def foreign_reason(kind: str, foreign: Obj) -> str:
    meta = foreign["metadata"]
    origin = labels_of(foreign).get(C.MULTIKUEUE_ORIGIN_LABEL)
    whose = f"another manager (origin {origin!r})" if origin else "someone else"
    return (
        f"a {kind} {meta['namespace']}/{meta['name']} that kfed did not create already exists "
        f"there (made by {whose}); kfed leaves it alone"
    )


def kind_of_job(job: Obj, kinds: Sequence[JobKind] = FEDERATED_KINDS) -> JobKind:
    """The kind of one of our remote jobs, by its apiVersion and kind (a Job when they are
    absent, as in list items)."""
    api_version, kind = job.get("apiVersion"), job.get("kind")
    for candidate in kinds:
        if (candidate.resource.api_version, candidate.resource.kind) == (api_version, kind):
            return candidate
    return BATCH_JOB


def run_facts(
    copy: Obj | None,
    jobs: list[tuple[JobKind, Obj]],
    stopped: Callable[[str], bool] = lambda _uid: False,
) -> leftovers.RunFacts:
    """The facts ``leftovers.run_end`` judges, from a copy (if any) and our jobs made for it
    on the same worker; ``stopped``: whether the manager stopped a job (by its uid)."""
    outcomes = [o for kind, job in jobs if (o := kind.outcome(job)) is not None]
    marked = [copy] if copy is not None else []
    marked += [job for _, job in jobs]

    def annotated(name: str) -> bool:
        return any(name in annotations_of(o) for o in marked)

    copy_conditions = ws.status_of(copy).get("conditions") if copy is not None else None
    finished = conditions.find(copy_conditions, C.FINISHED) if copy is not None else None
    copy_ended = copy is not None and ws.is_finished(copy)
    copy_succeeded = copy_ended and (finished or {}).get("reason") == C.REASON_SUCCEEDED
    return leftovers.RunFacts(
        ended=copy_ended or bool(outcomes),
        succeeded=copy_succeeded or any(o.succeeded for o in outcomes),
        fenced=annotated(leftovers.FENCED_ANNOTATION),
        deactivated=copy is not None and not ws.is_active(copy),
        evicted=copy is not None and (ws.is_evicted(copy) or conditions.is_true(copy, C.PREEMPTED)),
        stopped_by_manager=any(stopped(str(job["metadata"].get("uid", ""))) for _, job in jobs),
    )


class Lookups:
    def __init__(
        self,
        state: ClusterState,
        registry: ClusterRegistry,
        settings: FederationSettings,
        records: Records,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.state = state
        self.registry = registry
        self.settings = settings
        self.records = records
        self.clock = clock
        """Monotonic: blocks, placements and failover timings are measured on it."""

    # -- federated? ----------------------------------------------------------------------

    def multikueue_check(self, obj: Obj) -> tuple[str, list[str]] | None:
        """(check name, worker names of its MultiKueueConfig) when the workload is federated."""
        cq_name = at(obj, "status", "admission").get("clusterQueue")
        if cq_name is None:
            lq = self.state.local_queues.get(
                f"{obj['metadata']['namespace']}/{at(obj, 'spec').get('queueName')}"
            )
            cq_name = at(lq, "spec").get("clusterQueue")
        if not cq_name:
            return None
        return self.federation_of(str(cq_name))

    def federation_of(self, cluster_queue: str) -> tuple[str, list[str]] | None:
        """(check name, worker names of its MultiKueueConfig) when the ClusterQueue's
        workloads are federated (``api/federated.py``)."""
        found = federated.federation_of(
            self.state.cluster_queues.get(cluster_queue),
            self.state.admission_checks.get,
            self.registry.mk_configs.get,
        )
        return (found.check, list(found.clusters)) if found is not None else None

    def no_adapter(self, obj: Obj) -> str | None:
        """Upstream's rejection of a workload whose owner is of a kind MultiKueue cannot
        dispatch (None: kfed can: ``ClusterRegistry.kinds``)."""
        for ref in obj["metadata"].get("ownerReferences") or []:
            if not ref.get("controller"):
                continue
            if any(
                (ref.get("apiVersion"), ref.get("kind")) == (k.api_version, k.kind)
                for k in (kind.resource for kind in self.registry.kinds)
            ):
                return None
            group_version = str(ref.get("apiVersion", ""))
            if "/" not in group_version:
                group_version = f"/{group_version}"
            gvk = f"{group_version}, Kind={ref.get('kind')}"
            return f"No multikueue adapter found for owner kind {json.dumps(gvk)}"
        return None

    def not_managed_by_multikueue(self, obj: Obj) -> str | None:
        """Why the workload's Job must not be federated (None: it may). As upstream: a Job
        is federated only with ``spec.managedBy: kueue.x-k8s.io/multikueue``; without it the
        manager cluster's Job controller would run it too (the webhook sets it at creation,
        so a Job lacks it when created before its queue existed, when its queue label was
        added later, or when the webhook was not registered)."""
        job = self.manager_job(obj)
        if job is None:
            return None
        kind = self.kind_of(obj)
        managed_by = kind.managed_by(job)
        if managed_by == C.MULTIKUEUE_MANAGED_BY:
            return None
        # Upstream's words exactly (Go's %q quoting), so tools that read them keep working.
        expected, actual = json.dumps(C.MULTIKUEUE_MANAGED_BY), json.dumps(managed_by)
        return f"Expecting {kind.upstream_managed_by_field} to be {expected} not {actual}"

    # -- its objects ---------------------------------------------------------------------

    def manager_job(self, obj: Obj) -> Obj | None:
        found = self.state.job_of(obj)
        return found[1] if found is not None else None

    def kind_of(self, obj: Obj) -> JobKind:
        """The kind of job the workload was made for (a Job when no job owns it)."""
        found = job_kinds.owner_of(obj, tuple(self.registry.kinds))
        return found[0] if found is not None else BATCH_JOB

    def copies(self, key: str) -> dict[str, Obj]:
        """Remote copies of a workload, by worker (connected workers only)."""
        found = {}
        for remote in self.registry.active():
            obj = remote.workloads().get(key)
            if obj is not None:
                found[remote.name] = obj
        return found

    def finished_copy(self, key: str, copies: dict[str, Obj]) -> tuple[str, Obj] | None:
        """Of a workload's copies (``copies``), one whose run ended (``ended_there``), with
        its worker, if any."""
        for cluster, remote_wl in sorted(copies.items()):
            remote = self.registry.remote(cluster)
            if remote is not None and self.ended_there(remote, key, remote_wl):
                return cluster, remote_wl
        return None

    def ended_there(
        self,
        remote: RemoteCluster,
        key: str,
        copy: Obj | None,
        jobs: list[tuple[JobKind, Obj]] | None = None,
    ) -> bool:
        """The run of ``key`` on ``remote`` ended on its own, so it is the job's result: its
        copy says so, or one of our jobs there made for it does. The worker's shim writes
        the end on the copy a moment after its job ended (longer when it is busy): a copy
        judged meanwhile must count as finished, or its run would be collected as a leftover
        and the job run again. A run that was stopped (fenced, evicted, moved) never counts,
        whatever its job's condition says (``leftovers.run_end``). ``jobs``: our jobs there
        made for it, read afresh (default: the informer's, and the last state kept of one
        that was deleted)."""
        return self.run_end(remote, key, copy, jobs) is leftovers.RunEnd.RESULT

    def run_end(
        self,
        remote: RemoteCluster,
        key: str,
        copy: Obj | None,
        jobs: list[tuple[JobKind, Obj]] | None = None,
    ) -> leftovers.RunEnd:
        """How the run of ``key`` on ``remote`` stands (``ended_there``)."""
        if jobs is None:
            jobs = list(self.remote_jobs_of(remote, key))
            record = self.records.get(key)
            kept = record.ended_remote_jobs.get(remote.name) if record is not None else None
            if kept is not None:
                jobs.append((kind_of_job(kept, self.registry.kinds), kept))
        return leftovers.run_end(run_facts(copy, jobs, self.records.was_stopped))

    def counts(self, remote: RemoteCluster, key: str, job: Obj) -> bool:
        """``job`` (of ours on ``remote``, ended) is a run that counts as the result, judged
        with the copy there."""
        copy = remote.workloads().get(key)
        kind = kind_of_job(job, self.registry.kinds)
        facts = run_facts(copy, [(kind, job)], self.records.was_stopped)
        return leftovers.run_end(facts) is leftovers.RunEnd.RESULT

    def remote_job_name(self, obj: Obj) -> str | None:
        job = self.manager_job(obj)
        name = at(job, "metadata").get("name") or annotations_of(obj).get(C.JOB_NAME_ANNOTATION)
        return str(name) if name else None

    def same_named_remote_job(self, remote: RemoteCluster, obj: Obj) -> Obj | None:
        name = self.remote_job_name(obj)
        jobs = remote.jobs(self.kind_of(obj))
        if not name or jobs is None:
            return None
        return jobs.get(f"{obj['metadata']['namespace']}/{name}")

    def remote_job(self, remote: RemoteCluster, obj: Obj) -> Obj | None:
        """This workload's Job on the worker: ours by origin (the informer's selector) AND
        made for this very workload (its prebuilt-workload label). A Job of the same name
        left by an earlier workload of a same-named Job (still terminating) is not it."""
        found = self.same_named_remote_job(remote, obj)
        return found if found is not None and made_for(found, obj) else None

    def final_remote_job(self, remote: RemoteCluster, obj: Obj) -> Obj | None:
        """This workload's remote Job, or its last, ended state where the informer cannot
        show it (deleted by a worker's TTL controller, or not seen ended yet: see
        ``WorkloadRecord.ended_remote_jobs``)."""
        key = ws.key_of(obj)
        found = self.remote_job(remote, obj)
        if found is not None and self.kind_of(obj).outcome(found) is not None:
            # A stopped run's end (a fenced Job Failed by its deleted pods) is never copied.
            return found if self.counts(remote, key, found) else None
        record = self.records.get(key)
        kept = record.ended_remote_jobs.get(remote.name) if record is not None else None
        if kept is not None and made_for(kept, obj) and self.counts(remote, key, kept):
            return kept
        return found

    def remote_jobs_of(self, remote: RemoteCluster, key: str) -> list[tuple[JobKind, Obj]]:
        """Our jobs on the worker made for the workload ``key`` (whatever their name and
        kind), with their kind."""
        return remote.job_informers.by_index(JOBS_BY_WORKLOAD, key)

    # -- the workers -----------------------------------------------------------------------

    def maintenance(self, cluster: str) -> str:
        return federated.maintenance_of(self.registry.mk_clusters.get(cluster))

    def namespace_bound(self, cluster: str, namespace: str) -> bool:
        return federated.namespace_bound(self.registry.mk_clusters.get(cluster), namespace)

    def blocked_reason(self, key: str, cluster: str) -> str | None:
        record = self.records.get(key)
        blocked = record.blocked if record is not None else {}
        reason, until = blocked.get(cluster, ("", 0.0))
        return reason if self.clock() < until else None

    def unblocked_in(self, key: str) -> float | None:
        """Seconds until the first worker ``key`` is blocked from is considered again (a
        time, not an event, ends a block: nothing else would wake the workload then)."""
        record = self.records.get(key)
        now = self.clock()
        ends = [until for _, until in (record.blocked.values() if record else ()) if until > now]
        return min(ends) - now + UNBLOCK_MARGIN if ends else None

    def failover_policy(self, obj: Obj) -> FailoverPolicy:
        admission = at(obj, "status", "admission")
        cq = self.state.cluster_queues.get(str(admission.get("clusterQueue", ""))) or {}
        value = annotations_of(cq).get(FAILOVER_POLICY_ANNOTATION)
        return failover_policy(value, self.settings.failover_policy)

    def may_move_at(self, remote: RemoteCluster, obj: Obj) -> float:
        """When ``obj``'s copy on the lost worker ``remote`` has surely stopped (failover.py)."""
        state = remote.state
        return failover.may_move_at(
            self.settings,
            self.failover_policy(obj),
            could_fence=state.could_fence,
            last_renew_start=state.last_renew_start,
            lost_since=state.lost_since,
            now=self.clock(),
        )

    def lost_long_enough(self, remote: RemoteCluster, obj: Obj) -> bool:
        return not remote.connected and self.clock() >= self.may_move_at(remote, obj)

    def worker_facts(self, cluster: str, obj: Obj) -> following.WorkerFacts:
        """What following a workload placed on ``cluster`` needs to know about that worker."""
        remote = self.registry.remote(cluster) if cluster else None
        retired = self.registry.retired(cluster) if cluster and remote is None else None
        if retired is not None:
            # Its kubeconfig is now refused or gone: a lost worker like any other.
            return following.WorkerFacts(
                cluster,
                following.Connection.RETIRED,
                may_move_in=self.may_move_at(retired, obj) - self.clock(),
                lost_because=retired.state.message.removeprefix("Connection to worker lost: "),
            )
        if remote is None:
            registered = bool(cluster) and self.registry.mk_clusters.get(cluster) is not None
            return following.WorkerFacts(
                cluster,
                following.Connection.STARTING if registered else following.Connection.UNREGISTERED,
            )
        if not remote.connected:
            return following.WorkerFacts(
                cluster,
                following.Connection.LOST,
                may_move_in=self.may_move_at(remote, obj) - self.clock(),
                could_fence=remote.state.could_fence,
            )
        return following.WorkerFacts(
            cluster,
            following.Connection.CONNECTED,
            draining=self.maintenance(cluster) == "drain",
        )

    def remote_copies_stopped(self, obj: Obj) -> bool:
        """For the manager's eviction: no copy of it can still run anywhere."""
        key = ws.key_of(obj)
        if self.multikueue_check(obj) is None:
            return True
        if not self.registry.synced.is_set():
            return False
        for entry in self.registry.clusters.values():
            remote = entry.remote or entry.retired
            if remote is None:
                if entry.rejected is None:
                    return False  # not connected yet: we cannot know what runs there
                continue
            present = (
                remote.workloads().get(key) is not None or self.remote_job(remote, obj) is not None
            )
            if not present:
                continue
            if remote.connected or not self.lost_long_enough(remote, obj):
                return False
        return True
