"""What the dispatcher remembers about each manager workload between two reconciles.

Everything else (the manager's Workload and Job, every remote copy and remote Job, each
worker's connection) is read from the informers at every reconcile; only what cannot be read
back from any cluster lives here, in one record per workload, dropped in one step when the
workload is done with (``Records.forget``)."""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

STOPPED_MEMORY = 3600.0
"""Seconds the manager remembers a remote job it stopped (its end is never a result): far
longer than a deleted job's pods take to go."""


@dataclass
class Placement:
    """A copy sent to one worker and not admitted there yet (capacity-aware mode)."""

    cluster: str
    worker_cluster_queue: str
    usage: dict[tuple[str, str, str], int]
    deadline: float
    reason: str
    waiting_message: str = ""
    """The check's Pending message, written with ``nominatedClusterNames`` only if the copy
    waits (``nominate_at``)."""
    nominate_at: float | None = None
    """When to write that nomination (monotonic); None once written, or not to be. Most
    copies are admitted well before: the write would be one more per workload, and one more
    writer racing the reservation's and the admission's writes (409s)."""
    topology: Mapping[str, Mapping[tuple[str, ...], Mapping[str, int]]] = field(
        default_factory=dict
    )
    """TAS: what the manager expects the copy to hold, per worker flavor and leaf domain, until
    the worker admits it (its report then says so itself): ``decisions/topology.py``."""


@dataclass
class InFlight:
    """What has been sent to one worker and not admitted there yet: the copies waiting and
    their usage, (worker ClusterQueue, worker flavor, resource) -> amount."""

    waiting: int = 0
    usage: dict[tuple[str, str, str], int] = field(default_factory=dict)

    def add(self, placement: Placement, sign: int) -> None:
        self.waiting += sign
        for k, v in placement.usage.items():
            left = self.usage.get(k, 0) + sign * v
            if left:
                self.usage[k] = left
            else:
                self.usage.pop(k, None)


class PlacementIndex:
    """The records that hold a placement, and what is in flight to each worker: read at
    every placement for every worker, so kept up to date as placements change instead of
    summed over the records each time (that sum grew with the backlog times the workers)."""

    def __init__(self) -> None:
        self.records: dict[str, WorkloadRecord] = {}
        self.by_worker: dict[str, InFlight] = {}

    def change(self, record: WorkloadRecord, old: Placement | None, new: Placement | None) -> None:
        if old is not None:
            totals = self.by_worker[old.cluster]
            totals.add(old, -1)
            if not totals.waiting:
                del self.by_worker[old.cluster]
        if new is None:
            self.records.pop(record.key, None)
            return
        self.records[record.key] = record
        self.by_worker.setdefault(new.cluster, InFlight()).add(new, 1)


@dataclass
class WorkloadRecord:
    key: str = ""
    index: PlacementIndex | None = field(default=None, repr=False, compare=False)
    """Its owner's index of the placements (kept by ``placement``)."""
    _placement: Placement | None = field(default=None, repr=False)
    tried: set[str] = field(default_factory=set)
    """Workers whose copy was withdrawn (not admitted in time) since the last full round."""
    waiting: bool = False
    """No worker can admit it now: placed again when capacity changes (``rescan``)."""
    unplaceable_since: float | None = None
    """When every worker first said it can never hold it as configured (monotonic)."""
    round: tuple[int, float] | None = None
    """Incremental mode: how many workers hold copies, and since when."""
    reserved_at: float | None = None
    """When the manager reserved its quota (monotonic): dispatch latency counts from here."""
    winner: str | None = None
    """The worker it runs on, as soon as it is chosen (AllAtOnce / Incremental)."""
    ended_remote_jobs: dict[str, Obj] = field(default_factory=dict)
    """By worker: the last state of its remote job there once it ended, where the informer
    cannot show it: deleted (a worker's TTL controller) before the manager copied its final
    status, or read afresh when the worker came back while the informer still shows it
    running (its watch resumes on its own time). Judged when read, like a job still there: a
    stopped run's end (fenced, evicted, moved) is never the result (``leftovers.run_end``)."""
    copy_taken: set[str] = field(default_factory=set)
    """Workers where creating its copy met AlreadyExists: the next read looks at that name
    afresh (whose is it?) and forgets it."""
    name_taken: set[str] = field(default_factory=set)
    """Workers where creating its job met AlreadyExists: the next read looks at that name
    afresh (the informer shows ours only, and may lag) until it is judged."""
    blocked: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Workers it must not go to for now, with why and until when (monotonic): an object of
    the same name there that kfed did not create."""

    @property
    def placement(self) -> Placement | None:
        """Capacity-aware: the copy waiting to be admitted, and until when."""
        return self._placement

    @placement.setter
    def placement(self, value: Placement | None) -> None:
        old, self._placement = self._placement, value
        if self.index is not None:
            self.index.change(self, old, value)


class Records:
    """One ``WorkloadRecord`` per manager workload key, created on first write."""

    def __init__(self) -> None:
        self._by_key: dict[str, WorkloadRecord] = {}
        self._index = PlacementIndex()
        self._stopped: dict[str, float] = {}
        """UIDs of remote jobs the manager deleted before they ended, with when (monotonic);
        kept apart from the workload's record, which is forgotten as the job is deleted."""

    def __call__(self, key: str) -> WorkloadRecord:
        """The record of ``key``, created empty when there is none (for writes)."""
        record = self._by_key.get(key)
        if record is None:
            record = self._by_key[key] = WorkloadRecord(key=key, index=self._index)
        return record

    def get(self, key: str) -> WorkloadRecord | None:
        """The record of ``key`` if there is one (for reads: creates nothing)."""
        return self._by_key.get(key)

    def forget(self, key: str) -> None:
        record = self._by_key.pop(key, None)
        if record is not None:
            record.placement = None

    def stopped(self, job_uid: str, now: float | None = None) -> None:
        """The manager is deleting the remote job ``job_uid`` before its run ended (moved,
        drained, withdrawn, evicted): if it now ends Failed (its pods deleted), that end is
        never the job's result. In memory only: a manager restart forgets it."""
        now = time.monotonic() if now is None else now
        self._stopped.pop(job_uid, None)
        self._stopped[job_uid] = now
        for uid, since in list(self._stopped.items()):  # oldest first
            if now - since < STOPPED_MEMORY:
                break
            del self._stopped[uid]

    def was_stopped(self, job_uid: str) -> bool:
        return job_uid in self._stopped

    def placement(self, key: str) -> Placement | None:
        record = self._by_key.get(key)
        return record.placement if record is not None else None

    def placements(self) -> Iterator[tuple[str, Placement]]:
        for key, record in list(self._index.records.items()):
            if record.placement is not None:
                yield key, record.placement

    def in_flight(self, worker: str) -> InFlight:
        """What has been sent to ``worker`` and not admitted there yet (do not change it)."""
        return self._index.by_worker.get(worker) or InFlight()

    def waiting(self) -> list[str]:
        return [key for key, record in self._by_key.items() if record.waiting]

    def __len__(self) -> int:
        return len(self._by_key)


TOLD_REFUSALS = 4096
"""Refusals for references remembered (workload, worker), so each is told by one Event."""


class ToldRefusals:
    """Which ``kfed.io/allowed-references`` refusal was told for a workload and worker (by a
    Warning Event, once): read by the group read, remembered by the applier as it tells."""

    def __init__(self, kept: int = TOLD_REFUSALS) -> None:
        self.kept = kept
        self._told: OrderedDict[tuple[str, str], str] = OrderedDict()

    @staticmethod
    def who(obj: Obj) -> str:
        meta = obj["metadata"]
        return str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")

    def said(self, who: str, worker: str) -> str | None:
        return self._told.get((who, worker))

    def remember(self, who: str, worker: str, refusal: str) -> None:
        self._told[(who, worker)] = refusal
        self._told.move_to_end((who, worker))
        while len(self._told) > self.kept:
            self._told.popitem(last=False)


DISPATCH_LATENCIES_KEPT = 10_000


@dataclass
class Stats:
    """Counts the tests and benchmarks read (the metrics have the same, labelled)."""

    remote_workloads_created: int = 0
    remote_jobs_created: int = 0
    withdrawn: int = 0
    retries: int = 0
    dispatch_latencies: deque[float] = field(
        default_factory=lambda: deque(maxlen=DISPATCH_LATENCIES_KEPT)
    )
    """The latest dispatch latencies (seconds), for tests and benchmarks: a long-running
    manager keeps the last ``DISPATCH_LATENCIES_KEPT`` (the metrics histogram has them all)."""
