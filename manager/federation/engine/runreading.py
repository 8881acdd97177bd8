"""The part of a workload's group read about its runs on the workers: what making a copy the
one run needs (``winning.WinFacts``), its job there and the manager's (``jobsync``), and
which copies ended unseen. Reads only: the informers, and the fresh reads never-twice needs,
each named with its reason."""

from __future__ import annotations

from manager.api import constants as C
from manager.api import draclaims
from manager.api.view import items
from manager.controllers import conditions
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.base import JobKind
from manager.federation.decisions import jobsync, samename, winning
from manager.federation.engine import topologyback
from manager.federation.engine.lookups import Lookups, foreign_reason
from manager.federation.engine.topologyview import TopologyView
from manager.federation.workers.remote import RemoteCluster
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import Obj


class RunReader:
    def __init__(self, look: Lookups, topology: TopologyView) -> None:
        self.look = look
        self.topology = topology
        """TAS: the workers' racks, to spell out where a workload's pods went."""
        self.registry = look.registry
        self.settings = look.settings

    # -- winning -------------------------------------------------------------------------

    async def wins(
        self, key: str, obj: Obj, copies: dict[str, Obj], now: float, ended_on: str = ""
    ) -> dict[str, winning.WinFacts]:
        """For each connected worker holding a copy: what making it the one run needs
        (``ended_on``: the worker its run ended on, if any)."""
        record = self.look.records.get(key)
        found = {}
        for cluster, copy_ in copies.items():
            remote = self.registry.remote(cluster)
            if remote is None:
                continue
            may_win = cluster == ended_on or (ws.is_admitted(copy_) and not ws.is_evicted(copy_))
            taken = record is not None and cluster in record.name_taken
            found[cluster] = await self._win(obj, remote, copies, now, taken, may_win)
        return found

    async def _win(
        self,
        obj: Obj,
        remote: RemoteCluster,
        copies: dict[str, Obj],
        now: float,
        taken: bool,
        may_win: bool,
    ) -> winning.WinFacts:
        kind = self.look.kind_of(obj)
        name, namespace = obj["metadata"]["name"], obj["metadata"]["namespace"]
        job_name = self.look.remote_job_name(obj) or ""
        if taken and job_name:
            # Fresh: creating our job met AlreadyExists, and the informer shows ours only
            # (and may lag): whose is the object of that name?
            existing = await self._get(remote, kind.resource, namespace, job_name)
        else:
            existing = self.look.same_named_remote_job(remote, obj)
        job = self._there("Job", kind.resource.kind, existing, name, f"{namespace}/{job_name}")
        has_job = self.look.manager_job(obj) is not None
        templates: tuple[winning.NameThere, ...] = ()
        # Read only where the copy may win now (the reads are fresh, on two clusters).
        if may_win and has_job and job.whose is samename.SameName.NONE:
            templates = await self._templates(obj, remote)
        return winning.WinFacts(
            remote.name,
            now,
            others=tuple(sorted(c for c in copies if c != remote.name)),
            has_job=has_job,
            job=job,
            job_read_afresh=taken,
            templates=templates,
            foreign_object_recheck=self.settings.foreign_object_recheck,
        )

    async def _templates(self, obj: Obj, remote: RemoteCluster) -> tuple[winning.NameThere, ...]:
        """Each ResourceClaimTemplate its pods claim devices from, the manager's and the
        winner's. Fresh, both: the manager's is copied as it is now, and no informer watches
        them on the worker (a same-named one not ours must be found before any pod could be
        made from it)."""
        names = draclaims.template_names(items(obj, "spec", "podSets"))
        namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        what = "ResourceClaimTemplate"
        found = []
        for template in names:
            try:
                source = await self.look.state.api.get(
                    R.RESOURCE_CLAIM_TEMPLATES, template, namespace
                )
            except errors.NotFound:
                found.append(winning.NameThere(what, f"{namespace}/{template}"))
                break
            there = await self._get(remote, R.RESOURCE_CLAIM_TEMPLATES, namespace, template)
            found.append(
                self._there(what, what, there, name, f"{namespace}/{template}", source=source)
            )
        return tuple(found)

    def _there(
        self,
        kind: str,
        real_kind: str,
        existing: Obj | None,
        workload_name: str,
        name: str,
        source: Obj | None = None,
    ) -> winning.NameThere:
        whose = samename.judge(existing, origin=self.settings.origin, workload_name=workload_name)
        if existing is None:
            return winning.NameThere(kind, name, whose, source=source)
        meta = existing["metadata"]
        return winning.NameThere(
            kind,
            f"{meta['namespace']}/{meta['name']}",
            whose,
            deleting=bool(meta.get("deletionTimestamp")),
            foreign_reason=foreign_reason(real_kind, existing)
            if whose is samename.SameName.FOREIGN
            else "",
            source=source,
        )

    @staticmethod
    async def _get(remote: RemoteCluster, res: R.Resource, namespace: str, name: str) -> Obj | None:
        try:
            return await remote.api.get(res, name, namespace)
        except errors.NotFound:
            return None

    # -- copies that ended unseen --------------------------------------------------------

    def holders(self, key: str) -> tuple[str, ...]:
        """Connected workers holding a copy of ``key`` or one of our jobs made for it."""
        return tuple(
            remote.name
            for remote in self.registry.active()
            if remote.workloads().get(key) is not None or self.look.remote_jobs_of(remote, key)
        )

    async def ended_unseen(self, key: str, holders: tuple[str, ...]) -> frozenset[str]:
        """Of ``holders``, those where the run of ``key`` ended. Fresh: when the worker was
        just reachable again, the informers may still show a job running that ended while it
        could not be seen (found in CI: the copy was deleted with its completed job, and the
        job was about to run again)."""
        ended = set()
        for cluster in holders:
            remote = self.registry.remote(cluster)
            if remote is None:
                continue
            if await self._finished_there(remote, key):
                ended.add(cluster)
        return frozenset(ended)

    async def _finished_there(self, remote: RemoteCluster, key: str) -> bool:
        namespace, name = key.split("/", 1)
        try:
            fresh = await self._get(remote, R.WORKLOADS, namespace, name)
            jobs = await self._fresh_jobs_of(remote, key)
        except errors.KubeError:
            return True  # cannot tell: keep it; the next reconcile looks again
        return self.look.ended_there(remote, key, fresh, jobs)

    async def _fresh_jobs_of(self, remote: RemoteCluster, key: str) -> list[tuple[JobKind, Obj]]:
        """Our jobs on ``remote`` made for the workload ``key``, listed afresh, every kind
        the worker serves."""
        namespace, name = key.split("/", 1)
        selector = f"{remote.origin_selector},{C.PREBUILT_WORKLOAD_LABEL}={name}"
        found: list[tuple[JobKind, Obj]] = []
        for kind in list(remote.job_informers):
            listed = await remote.api.list(kind.resource, namespace, label_selector=selector)
            found.extend((kind, job) for job in listed["items"])
        return found

    # -- status back -----------------------------------------------------------------------

    def sync(self, cluster: str, obj: Obj) -> jobsync.SyncFacts | None:
        """The manager's job and the remote job on ``cluster`` that counts (None: the
        worker is not connected)."""
        remote = self.registry.remote(cluster)
        if remote is None:
            return None
        job = self.look.manager_job(obj)
        kind = self.look.kind_of(obj)
        remote_job = self.look.final_remote_job(remote, obj)
        current = kind.mirrored_status(job) if job is not None else {}
        copied = remote.workloads().get(ws.key_of(obj))
        back = topologyback.to_bring_back(cluster, obj, copied, self.topology.of(remote))
        return jobsync.SyncFacts(
            cluster,
            current,
            kind.status_for_manager(remote_job) if job is not None and remote_job else None,
            suspended=job is not None and kind.is_suspended(job) and not kind.held_for_worker(job),
            remote_ended=remote_job is not None and kind.outcome(remote_job) is not None,
            counters=kind.status_counters,
            finished_by_job=kind.workload_finished_by_job,
            topology=back[0] if back else None,
            topology_text=back[1] if back else "",
        )

    def run_end(self, cluster: str, obj: Obj, copy_: Obj) -> jobsync.RunEnd | None:
        """How the run on ``cluster`` ended: its copy's Finished condition, or (the shim has
        not written it yet) the end of its job there that counts (never a stopped run's)."""
        remote = self.registry.remote(cluster)
        if remote is None:
            return None
        finished = conditions.find(ws.status_of(copy_).get("conditions"), C.FINISHED)
        if finished is not None:
            succeeded = finished.get("reason") == C.REASON_SUCCEEDED
            return jobsync.RunEnd(succeeded, str(finished.get("message", "")))
        key = ws.key_of(obj)
        ended = [
            k.outcome(j)
            for k, j in self.look.remote_jobs_of(remote, key)
            if self.look.counts(remote, key, j)
        ]
        outcome = next((o for o in ended if o is not None), None)
        return jobsync.RunEnd(outcome.succeeded, outcome.message) if outcome else None
