"""Where a probe Job's pods run, per worker, from pod events the drill receives by watching
every worker directly (never through the proxy the drill cuts). Pure: events and their
arrival times come in as arguments.

A pod runs while its phase is Running and it is not being deleted (as the failover tests
count it). After every event the tracker looks at all workers at once: a *double run* is any
moment at which pods of the probe run on two workers or more. Looking after every event is a
sample at each change the benchmark can see, so no overlap it could observe goes uncounted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]


def is_running(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and not (
        pod.get("metadata") or {}
    ).get("deletionTimestamp")


@dataclass
class RunningPods:
    job: str
    """The probe job's name: pods carry it in their ``label``."""
    label: str = "job-name"
    """The pod label naming their job (a JobSet's pods: ``jobset.sigs.k8s.io/jobset-name``)."""
    running: dict[str, set[str]] = field(default_factory=dict)
    """worker -> uids of the probe's pods running there now."""
    first_running_at: dict[str, float] = field(default_factory=dict)
    stopped_at: dict[str, float] = field(default_factory=dict)
    """worker -> when its last running pod of the probe stopped (latest such moment)."""
    samples: int = 0
    max_clusters: int = 0
    double_run_at: float | None = None
    """The first moment two workers ran it at once, if ever."""

    def pod_event(self, worker: str, kind: str, pod: Obj, at: float) -> None:
        meta = pod.get("metadata") or {}
        if (meta.get("labels") or {}).get(self.label) != self.job:
            return
        uid = str(meta.get("uid", ""))
        pods = self.running.setdefault(worker, set())
        was_running = bool(pods)
        if kind != "DELETED" and is_running(pod):
            pods.add(uid)
        else:
            pods.discard(uid)
        if pods and not was_running:
            self.first_running_at.setdefault(worker, at)
        elif was_running and not pods:
            self.stopped_at[worker] = at
        self.sample(at)

    def sample(self, at: float) -> None:
        clusters = len(self.clusters())
        self.samples += 1
        self.max_clusters = max(self.max_clusters, clusters)
        if clusters >= 2 and self.double_run_at is None:
            self.double_run_at = at

    def clusters(self) -> list[str]:
        return sorted(w for w, pods in self.running.items() if pods)

    def running_elsewhere_since(self, than: str, after: float) -> float | None:
        """When pods of the probe first ran on a worker other than ``than``, at or after
        ``after``; None if not yet."""
        times = [
            at for worker, at in self.first_running_at.items() if worker != than and at >= after
        ]
        return min(times) if times else None

    @property
    def double_run(self) -> bool:
        return self.max_clusters >= 2
