"""How long each finished workload's objects stay on its worker, read from the manager's
objects (``retention.py`` decides): its ClusterQueue's ``kfed.io/finished-retention``, else
the manager's ``--finished-retention``. A value that is not a duration is told once, as a
Warning Event on the ClusterQueue and in the log, and the manager's setting applies."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from manager.api.view import annotations_of, at
from manager.controllers import workloadstatus as ws
from manager.controllers.state import ClusterState
from manager.federation.decisions import retention
from manager.federation.settings import (
    RAN_ON_ANNOTATION,
    RETENTION_ANNOTATION,
    FederationSettings,
)
from manager.kube.api import Obj
from manager.kube.events import EventSink
from manager.kube.informer import Event

log = logging.getLogger(__name__)

INVALID_REASON = "InvalidFinishedRetention"
"""The Warning Event on a ClusterQueue whose ``kfed.io/finished-retention`` is unusable."""


def ran_on(workload: Obj) -> str:
    """The worker a finished workload's run ended on: ``kfed.io/ran-on`` where the dispatcher
    had to record it, else ``status.clusterName``."""
    annotations = annotations_of(workload)
    return str(
        annotations.get(RAN_ON_ANNOTATION) or ws.status_of(workload).get("clusterName") or ""
    )


class Retaining:
    def __init__(
        self,
        state: ClusterState,
        settings: FederationSettings,
        *,
        tell: EventSink,
        clock: Callable[[], float] = time.time,
        on_change: Callable[[str], None] | None = None,
    ) -> None:
        self.state = state
        self.settings = settings
        self.tell = tell
        """Where an unusable value is told (the federation's status door)."""
        self.clock = clock
        """Wall clock: finish times are the API server's, and survive a manager restart."""
        self.on_change = on_change
        """Called with a ClusterQueue's name when its retention changed."""
        self._told: dict[str, str | None] = {}
        """ClusterQueue -> the annotation value last seen (so each bad value is told once)."""
        state.cluster_queues.subscribe(self._on_cluster_queue)

    def _on_cluster_queue(self, event: Event) -> None:
        name = event.key
        if event.type == "DELETED":
            self._told.pop(name, None)
            return
        value = annotations_of(event.obj).get(RETENTION_ANNOTATION)
        if name in self._told and self._told[name] == value:
            return
        first = name not in self._told
        self._told[name] = value
        _, problem = retention.retention_for(value, self.settings.finished_retention)
        if problem is not None:
            message = self._problem_message(name, problem)
            log.warning("%s", message)
            self.tell.warning(event.obj, INVALID_REASON, message)
        if not first and self.on_change is not None:
            self.on_change(name)

    def _problem_message(self, cluster_queue: str, problem: str) -> str:
        fallback = retention.format_duration(self.settings.finished_retention)
        return (
            f"ClusterQueue {cluster_queue}: annotation {RETENTION_ANNOTATION} {problem}; "
            f"finished workloads use the manager's --finished-retention ({fallback}) instead"
        )

    def retention_of(self, workload: Obj) -> float:
        """Seconds its finished run's objects are kept (its ClusterQueue's, else the
        manager's)."""
        cq = self.state.cluster_queues.get(self.state.queued_cluster_queue(workload))
        value = annotations_of(cq).get(RETENTION_ANNOTATION)
        seconds, _ = retention.retention_for(value, self.settings.finished_retention)
        return seconds

    def left(self, workload: Obj) -> float:
        """Seconds its finished run's objects are still kept (0: collect them now); 0 for a
        workload that is not finished, or is being deleted."""
        if not ws.is_finished(workload) or at(workload, "metadata").get("deletionTimestamp"):
            return 0.0
        return retention.time_left(
            retention.finished_at(workload), self.retention_of(workload), self.clock()
        )
