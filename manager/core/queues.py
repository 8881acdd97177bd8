"""Pending workloads: one priority queue per ClusterQueue (``pending``), parking, backoff and
routing.

A workload reaches a ClusterQueue through its LocalQueue. Each ClusterQueue keeps a
binary heap ordered by priority (higher first), then queue-order time (older first),
then key (for determinism). The scheduler only ever looks at heads, so each decision
costs O(log n) regardless of how many workloads wait.

- BestEffortFIFO: a head that can't be admitted is *parked* (Kueue's "inadmissible"
  set) and the next one gets its turn. Parked workloads return to the heap only when
  something happens that could change the answer: quota freed in the ClusterQueue or
  its cohort, or a queue, cohort, flavor or namespace change. Returning them costs
  O(log n) each, paid for by the evaluation that parked them.
- StrictFIFO: a head that can't be admitted *blocks* its ClusterQueue until such an
  event, or until a workload that sorts before it arrives.
- A head that issued preemptions *holds* its ClusterQueue (either strategy) while its
  victims go, as Kueue's "sticky" head: nothing behind it is evaluated, and the scheduler
  evaluates it again in every cycle its cohort tree takes part in, so that quota freed
  for it is not handed to another queue's borrowing workload meanwhile.
- Evicted workloads carry a ``requeue_at`` time (the controller's backoff) and wait in
  a time-ordered heap until the caller's clock reaches it.

Removal is lazy: every heap item carries the sequence number it was pushed with, and
an item whose workload has moved on since is skipped when it reaches the top.
"""

from __future__ import annotations

import heapq

from manager.core import reasons
from manager.core.model import (
    ClusterQueueName,
    LocalQueue,
    LocalQueueKey,
    QueueingStrategy,
    StopPolicy,
    Workload,
    WorkloadKey,
)
from manager.core.pending import ClusterQueueQueue, Location, PendingWorkload, queue_order
from manager.core.reasons import PendingKind, PendingReason

_ROUTING_KINDS = frozenset(
    {
        PendingKind.LOCAL_QUEUE_MISSING,
        PendingKind.LOCAL_QUEUE_STOPPED,
        PendingKind.CLUSTER_QUEUE_MISSING,
        PendingKind.CLUSTER_QUEUE_INACTIVE,
        PendingKind.CLUSTER_QUEUE_STOPPED,
        PendingKind.BACKOFF,
    }
)
"""Reasons that stop being true once a workload is queued in a schedulable ClusterQueue."""


class QueueManager:
    def __init__(self) -> None:
        self.local_queues: dict[LocalQueueKey, LocalQueue] = {}
        self.queues: dict[ClusterQueueName, ClusterQueueQueue] = {}
        self.pending: dict[WorkloadKey, PendingWorkload] = {}
        self.by_local_queue: dict[LocalQueueKey, dict[WorkloadKey, PendingWorkload]] = {}
        self.ready: set[ClusterQueueName] = set()
        """ClusterQueues that may have an evaluable head (pruned lazily by heads())."""
        self.holding: set[ClusterQueueName] = set()
        """ClusterQueues that may be held by a preempting head (pruned lazily)."""
        self.changed_reasons: dict[WorkloadKey, PendingWorkload] = {}
        self._backoff: list[tuple[float, str, int]] = []
        self._seq = 0
        self._now = float("-inf")

    # -- routing ---------------------------------------------------------------------

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def set_reason(self, entry: PendingWorkload, reason: PendingReason) -> None:
        if entry.reason != reason:
            entry.reason = reason
            self.changed_reasons[entry.key] = entry

    def _detach(self, entry: PendingWorkload) -> None:
        if entry.cluster_queue is not None:
            queue = self.queues.get(entry.cluster_queue)
            if queue is not None:
                queue.members.pop(entry.key, None)
                queue.parked.pop(entry.key, None)
        entry.cluster_queue = None
        entry.location = Location.ORPHAN
        entry.seq = self._next_seq()  # invalidates heap and backoff items

    def _route(self, entry: PendingWorkload) -> None:
        """Place a detached workload where it belongs: its ClusterQueue, or nowhere."""
        # A fresh sequence number per placement: heap items left by an earlier stay of
        # the same key (same workload, older position) must never look current again.
        entry.seq = self._next_seq()
        lq = self.local_queues.get(entry.local_queue)
        if lq is None:
            self.set_reason(entry, reasons.local_queue_missing(entry.local_queue))
            return
        if lq.stop_policy is not StopPolicy.NONE:
            self.set_reason(entry, reasons.local_queue_stopped(entry.local_queue))
            return
        queue = self.queues.get(lq.cluster_queue)
        if queue is None:
            self.set_reason(entry, reasons.cluster_queue_missing(lq.cluster_queue))
            return
        entry.cluster_queue = queue.name
        queue.members[entry.key] = entry
        if entry.requeue_at is not None and entry.requeue_at > self._now:
            entry.location = Location.BACKOFF
            heapq.heappush(self._backoff, (entry.requeue_at, entry.key, entry.seq))
            self.set_reason(entry, reasons.backoff(entry.requeue_at))
            return
        entry.requeue_at = None
        self._activate(queue, entry)

    def _activate(self, queue: ClusterQueueQueue, entry: PendingWorkload) -> None:
        entry.location = Location.ACTIVE
        heapq.heappush(queue.heap, entry.heap_item())
        if queue.stopped_reason is not None:
            self.set_reason(entry, queue.stopped_reason)
            return
        if entry.reason is not None and entry.reason.kind in _ROUTING_KINDS:
            self.set_reason(entry, reasons.queued())
        self.ready.add(queue.name)

    def _reroute(self, entries: list[PendingWorkload]) -> None:
        for entry in entries:
            self._detach(entry)
            self._route(entry)

    # -- queues ----------------------------------------------------------------------

    def upsert_cluster_queue(self, name: ClusterQueueName, strategy: QueueingStrategy) -> None:
        queue = self.queues.get(name)
        if queue is None:
            self.queues[name] = ClusterQueueQueue(name, strategy)
            self._reroute(self._routed_to(name))
        else:
            queue.strict = strategy is QueueingStrategy.STRICT_FIFO
            queue.blocked_head = None
            queue.preempting_head = None

    def delete_cluster_queue(self, name: ClusterQueueName) -> None:
        queue = self.queues.get(name)
        if queue is None:
            return
        members = list(queue.members.values())
        for entry in members:
            self._detach(entry)
        del self.queues[name]
        self.ready.discard(name)
        for entry in members:
            self._route(entry)

    def set_stopped(self, name: ClusterQueueName, reason: PendingReason | None) -> None:
        """Mark a ClusterQueue unschedulable (inactive or stopped) or schedulable again."""
        queue = self.queues.get(name)
        if queue is None:
            return
        queue.stopped_reason = reason
        if reason is None:
            self.ready.add(name)
            for entry in queue.members.values():
                if (
                    entry.reason is not None
                    and entry.reason.kind in _ROUTING_KINDS
                    and entry.location is not Location.BACKOFF
                ):
                    self.set_reason(entry, reasons.queued())
            return
        self.ready.discard(name)
        for entry in queue.members.values():
            if entry.location is not Location.BACKOFF:
                self.set_reason(entry, reason)

    def upsert_local_queue(self, lq: LocalQueue) -> None:
        old = self.local_queues.get(lq.key)
        self.local_queues[lq.key] = lq
        if (
            old is None
            or old.cluster_queue != lq.cluster_queue
            or old.stop_policy != lq.stop_policy
        ):
            self._reroute(list(self.by_local_queue.get(lq.key, {}).values()))

    def delete_local_queue(self, key: LocalQueueKey) -> None:
        if self.local_queues.pop(key, None) is not None:
            self._reroute(list(self.by_local_queue.get(key, {}).values()))

    def _routed_to(self, name: ClusterQueueName) -> list[PendingWorkload]:
        return [
            entry
            for lq in self.local_queues.values()
            if lq.cluster_queue == name
            for entry in self.by_local_queue.get(lq.key, {}).values()
        ]

    def wake(self, names: list[ClusterQueueName]) -> None:
        """Something changed that could admit parked or blocking workloads: retry them."""
        for name in names:
            queue = self.queues.get(name)
            if queue is None:
                continue
            queue.unpark_all()
            if queue.stopped_reason is None:
                self.ready.add(name)

    def wake_all(self) -> None:
        self.wake(list(self.queues))

    # -- workloads -------------------------------------------------------------------

    def upsert(self, workload: Workload, *, order_time: float, requeue_at: float | None) -> bool:
        """Queue a workload, or update it; False when it was queued already, unchanged."""
        old = self.pending.get(workload.key)
        if old is not None:
            if old.workload == workload and old.requeue_at == requeue_at:
                return False
            self._forget(old)
        entry = PendingWorkload(workload, order_time=order_time, requeue_at=requeue_at)
        if old is not None:
            entry.reason = old.reason  # what the API shows; only report real changes
        self.pending[workload.key] = entry
        self.by_local_queue.setdefault(entry.local_queue, {})[entry.key] = entry
        self._route(entry)
        return True

    def remove(self, key: WorkloadKey) -> PendingWorkload | None:
        entry = self.pending.get(key)
        if entry is not None:
            self._forget(entry)
        return entry

    def _forget(self, entry: PendingWorkload) -> None:
        self._detach(entry)
        del self.pending[entry.key]
        siblings = self.by_local_queue.get(entry.local_queue)
        if siblings is not None:
            siblings.pop(entry.key, None)
            if not siblings:
                del self.by_local_queue[entry.local_queue]
        self.changed_reasons.pop(entry.key, None)

    def park(self, entry: PendingWorkload, reason: PendingReason) -> None:
        """Set an inadmissible head aside (BestEffortFIFO) until its queue is woken."""
        queue = self.queues[entry.cluster_queue] if entry.cluster_queue else None
        self.set_reason(entry, reason)
        if queue is None:
            return
        entry.location = Location.PARKED
        entry.seq = self._next_seq()
        queue.parked[entry.key] = entry
        if queue.blocked_head == entry.key:
            queue.blocked_head = None
            queue.preempting_head = None

    def block(self, entry: PendingWorkload, reason: PendingReason) -> None:
        """Keep an inadmissible head in place and stop its StrictFIFO queue until woken."""
        self.set_reason(entry, reason)
        if entry.cluster_queue is not None:
            queue = self.queues[entry.cluster_queue]
            queue.blocked_head = entry.key
            queue.preempting_head = None

    def hold_for_preemption(self, entry: PendingWorkload, reason: PendingReason) -> None:
        """A head whose victims are going: it holds its queue (nothing behind it is
        evaluated) and stays in every cycle of its cohort tree (``preempting_heads``)."""
        self.set_reason(entry, reason)
        if entry.cluster_queue is not None:
            queue = self.queues[entry.cluster_queue]
            queue.blocked_head = entry.key
            queue.preempting_head = entry.key
            self.holding.add(queue.name)

    def preempting_heads(self) -> list[PendingWorkload]:
        """Heads waiting for their victims, in ClusterQueue name order. Not in ``ready``:
        they alone never start a cycle (nothing can change for them until a release, which
        wakes their queue)."""
        found: list[PendingWorkload] = []
        for name in sorted(self.holding):
            queue = self.queues.get(name)
            entry = queue.held_by_preemptor() if queue is not None else None
            if entry is None:
                self.holding.discard(name)
            else:
                found.append(entry)
        return found

    def set_aside(self, entry: PendingWorkload, reason: PendingReason) -> None:
        """Park or block, as the ClusterQueue's queueing strategy says."""
        queue = self.queues.get(entry.cluster_queue) if entry.cluster_queue else None
        if queue is not None and queue.strict:
            self.block(entry, reason)
        else:
            self.park(entry, reason)

    # -- the scheduler's view --------------------------------------------------------

    def heads(self, now: float) -> list[PendingWorkload]:
        """One head per schedulable ClusterQueue, in ClusterQueue name order."""
        self._now = max(self._now, now)
        self._expire_backoff()
        heads: list[PendingWorkload] = []
        for name in sorted(self.ready):
            queue = self.queues.get(name)
            head = queue.peek() if queue is not None and queue.stopped_reason is None else None
            if head is None:
                self.ready.discard(name)
            else:
                heads.append(head)
        return heads

    def advance(self, now: float) -> None:
        self._now = max(self._now, now)

    def _expire_backoff(self) -> None:
        backoff = self._backoff
        while backoff and backoff[0][0] <= self._now:
            _, key, seq = heapq.heappop(backoff)
            entry = self.pending.get(WorkloadKey(key))
            if entry is None or entry.seq != seq or entry.location is not Location.BACKOFF:
                continue
            entry.requeue_at = None
            queue = self.queues[entry.cluster_queue] if entry.cluster_queue else None
            if queue is not None:
                self._activate(queue, entry)

    def next_requeue_at(self) -> float | None:
        backoff = self._backoff
        while backoff:
            at, key, seq = backoff[0]
            entry = self.pending.get(WorkloadKey(key))
            if entry is not None and entry.seq == seq and entry.location is Location.BACKOFF:
                return at
            heapq.heappop(backoff)
        return None

    def has_ready(self) -> bool:
        return bool(self.ready)

    def blocked_reason(self, entry: PendingWorkload) -> PendingReason | None:
        """For a StrictFIFO workload stuck behind a blocked head: say so."""
        if entry.cluster_queue is None or entry.location is not Location.ACTIVE:
            return None
        queue = self.queues.get(entry.cluster_queue)
        if queue is None or not queue.strict or queue.blocked_head in (None, entry.key):
            return None
        return reasons.blocked_by_head(queue.name, str(queue.blocked_head))

    def positions(self, name: ClusterQueueName, limit: int | None) -> list[PendingWorkload]:
        """Pending workloads of a ClusterQueue in queue order (parked and backed-off too)."""
        queue = self.queues.get(name)
        if queue is None:
            return []
        members = queue.members.values()
        if limit is None:
            return sorted(members, key=queue_order)
        return heapq.nsmallest(limit, members, key=queue_order)

    def take_changed_reasons(self) -> list[PendingWorkload]:
        changed = list(self.changed_reasons.values())
        self.changed_reasons = {}
        return changed
