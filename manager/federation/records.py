"""What the dispatcher remembers about each manager workload between two reconciles.

Everything else (the manager's Workload and Job, every remote copy and remote Job, each
worker's connection) is read from the informers at every reconcile; only what cannot be read
back from any cluster lives here, in one record per workload, dropped in one step when the
workload is done with (``Records.forget``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]


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


@dataclass
class WorkloadRecord:
    key: str = ""
    placed: dict[str, WorkloadRecord] | None = field(default=None, repr=False, compare=False)
    """Its owner's index of the records that hold a placement (kept by ``placement``)."""
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
    finished_remote_job: Obj | None = None
    """The last state of its finished remote Job, deleted (a worker's TTL controller) before
    the manager copied its final status."""
    blocked: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Workers it must not go to for now, with why and until when (monotonic): an object of
    the same name there that kfed did not create."""

    @property
    def placement(self) -> Placement | None:
        """Capacity-aware: the copy waiting to be admitted, and until when."""
        return self._placement

    @placement.setter
    def placement(self, value: Placement | None) -> None:
        # Indexed, so that summing what is in flight to each worker (at every placement)
        # reads the few records in flight, not every workload the manager knows.
        self._placement = value
        if self.placed is not None:
            if value is None:
                self.placed.pop(self.key, None)
            else:
                self.placed[self.key] = self


class Records:
    """One ``WorkloadRecord`` per manager workload key, created on first write."""

    def __init__(self) -> None:
        self._by_key: dict[str, WorkloadRecord] = {}
        self._placed: dict[str, WorkloadRecord] = {}

    def __call__(self, key: str) -> WorkloadRecord:
        """The record of ``key``, created empty when there is none (for writes)."""
        record = self._by_key.get(key)
        if record is None:
            record = self._by_key[key] = WorkloadRecord(key=key, placed=self._placed)
        return record

    def get(self, key: str) -> WorkloadRecord | None:
        """The record of ``key`` if there is one (for reads: creates nothing)."""
        return self._by_key.get(key)

    def forget(self, key: str) -> None:
        self._by_key.pop(key, None)
        self._placed.pop(key, None)

    def placement(self, key: str) -> Placement | None:
        record = self._by_key.get(key)
        return record.placement if record is not None else None

    def placements(self) -> Iterator[tuple[str, Placement]]:
        for key, record in list(self._placed.items()):
            if record.placement is not None:
                yield key, record.placement

    def waiting(self) -> list[str]:
        return [key for key, record in self._by_key.items() if record.waiting]

    def __len__(self) -> int:
        return len(self._by_key)


@dataclass
class Stats:
    """Counts the tests and benchmarks read (the metrics have the same, labelled)."""

    remote_workloads_created: int = 0
    remote_jobs_created: int = 0
    withdrawn: int = 0
    retries: int = 0
    dispatch_latencies: list[float] = field(default_factory=list)
