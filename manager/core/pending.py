"""One pending workload and one ClusterQueue's queue of them: the heap ordered by priority
(higher first), then queue-order time (older first), then key; where each entry is
(active, parked, backing off, set aside); and the StrictFIFO and preemption holds on the
head. ``QueueManager`` (``queues``) routes workloads to these queues and moves them."""

from __future__ import annotations

import heapq
from enum import Enum

from manager.core.model import (
    ClusterQueueName,
    LocalQueueKey,
    Namespace,
    QueueingStrategy,
    Workload,
    WorkloadKey,
)
from manager.core.reasons import PendingReason

_HeapItem = tuple[int, float, str, int]
"""(-priority, queue-order time, key, sequence number)."""


class Location(Enum):
    ORPHAN = "orphan"  # no usable LocalQueue/ClusterQueue: not queued anywhere
    BACKOFF = "backoff"  # in its ClusterQueue, waiting for requeue_at
    ACTIVE = "active"  # in its ClusterQueue's heap
    PARKED = "parked"  # in its ClusterQueue, inadmissible until an event


class PendingWorkload:
    __slots__ = (
        "_shape",
        "cluster_queue",
        "key",
        "local_queue",
        "location",
        "namespace",
        "order_time",
        "reason",
        "requeue_at",
        "seq",
        "workload",
    )

    def __init__(self, workload: Workload, *, order_time: float, requeue_at: float | None) -> None:
        self.workload = workload
        self.key = workload.key
        self.namespace: Namespace = workload.namespace
        self.local_queue: LocalQueueKey = workload.local_queue
        self.order_time = order_time
        self.requeue_at = requeue_at
        self.cluster_queue: ClusterQueueName | None = None
        self.location = Location.ORPHAN
        self.seq = 0
        self.reason: PendingReason | None = None
        self._shape: tuple[object, ...] | None = None

    @property
    def shape(self) -> tuple[object, ...]:
        """What flavor assignment reads of the workload (its pod sets), hashable: two
        workloads of one shape and priority get the same answer from the same state."""
        if self._shape is None:
            self._shape = tuple(
                (
                    ps.name,
                    ps.count,
                    ps.min_count,
                    tuple(sorted(ps.requests.items())),
                    tuple(sorted(ps.node_selector.items())),
                    ps.node_affinity,
                    ps.tolerations,
                    ps.topology_request,
                )
                for ps in self.workload.pod_sets
            )
        return self._shape

    def heap_item(self) -> _HeapItem:
        return (-self.workload.priority, self.order_time, self.key, self.seq)


class ClusterQueueQueue:
    """The pending workloads of one ClusterQueue."""

    __slots__ = (
        "blocked_head",
        "heap",
        "members",
        "name",
        "parked",
        "preempting_head",
        "stopped_reason",
        "strict",
    )

    def __init__(self, name: ClusterQueueName, strategy: QueueingStrategy) -> None:
        self.name = name
        self.strict = strategy is QueueingStrategy.STRICT_FIFO
        self.members: dict[WorkloadKey, PendingWorkload] = {}
        self.heap: list[_HeapItem] = []
        self.parked: dict[WorkloadKey, PendingWorkload] = {}
        self.blocked_head: WorkloadKey | None = None
        self.preempting_head: WorkloadKey | None = None
        """The blocked head is waiting for its victims (it may hold any queue, not only a
        StrictFIFO one): the scheduler keeps evaluating it alongside other heads."""
        self.stopped_reason: PendingReason | None = None
        """Why nothing here can be admitted now (inactive or stopped), or None."""

    def peek(self) -> PendingWorkload | None:
        """The head, or None when empty or blocked (StrictFIFO)."""
        heap = self.heap
        members = self.members
        while heap:
            item = heap[0]
            entry = members.get(WorkloadKey(item[2]))
            if entry is None or entry.seq != item[3] or entry.location is not Location.ACTIVE:
                heapq.heappop(heap)
                continue
            if self.blocked_head == entry.key:
                return None
            self.blocked_head = None
            self.preempting_head = None
            return entry
        return None

    def held_by_preemptor(self) -> PendingWorkload | None:
        """The head waiting for its victims, if it is still this queue's to evaluate."""
        key = self.preempting_head
        if key is None or key != self.blocked_head or self.stopped_reason is not None:
            return None
        entry = self.members.get(key)
        return entry if entry is not None and entry.location is Location.ACTIVE else None

    def unpark_all(self) -> None:
        self.blocked_head = None
        self.preempting_head = None
        parked = self.parked
        if not parked:
            return
        if len(parked) * 4 > len(self.heap):
            # Cheaper to rebuild the heap at C speed than to push one by one.
            for entry in parked.values():
                entry.location = Location.ACTIVE
            self.heap = [
                e.heap_item() for e in self.members.values() if e.location is Location.ACTIVE
            ]
            heapq.heapify(self.heap)
        else:
            for entry in parked.values():
                entry.location = Location.ACTIVE
                heapq.heappush(self.heap, entry.heap_item())
        self.parked = {}


def queue_order(entry: PendingWorkload) -> tuple[int, float, str]:
    return (-entry.workload.priority, entry.order_time, entry.key)
