"""Kube-apiserver requests per workload, on the manager and on each worker, from each
apiserver's ``apiserver_request_total`` counter. Pure: Prometheus text and numbers in.

A dispatch mode reads every cluster's counter three times: before an idle window (the
manager ready, nothing submitted), after it (= before the measured window) and when every
workload has finished. The measured window holds every request any client made to that
apiserver: kfed's manager and shims, the benchmark (its one ``POST jobs`` per workload on
the manager, its watches), the controller-manager, scheduler and kwok, and the apiserver
itself. Part of that happens with no workload at all (lease renewals, watches that end and
are re-opened, resyncs): the idle window's rate, times the measured window's length, is
that background, and *net* = measured minus background. A ``WATCH`` is counted when it
ends, not when it starts.

Keys are ``VERB resource[/subresource]`` (``PATCH workloads/status``, ``POST jobs``; the API
group left out), or ``VERB /path`` for non-resource requests (``GET /metrics``: the
benchmark's own reads of this counter).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

METRIC = "apiserver_request_total"
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

EVENT_WRITES = ("POST events", "PATCH events", "PUT events")
"""The keys of Kubernetes Events written (new ones, and repeats' counts)."""

Counts = dict[str, int]
"""``VERB resource[/subresource]`` -> requests (or, for failures, with `` -> code``)."""


def request_key(labels: Mapping[str, str]) -> str:
    verb, resource = labels.get("verb", ""), labels.get("resource", "")
    sub = labels.get("subresource", "")
    if not resource:
        return f"{verb} /{sub.lstrip('/')}"
    return f"{verb} {resource}/{sub}" if sub else f"{verb} {resource}"


@dataclass
class Snapshot:
    """One read of one apiserver's counter."""

    requests: Counts = field(default_factory=dict)
    failed: Counts = field(default_factory=dict)
    """``VERB resource -> code`` for answers of 400 and above (conflicts, not found...)."""


def parse(text: str) -> Snapshot:
    """The counter, summed over codes, scopes, groups and versions."""
    result = Snapshot()
    prefix = METRIC + "{"
    for line in text.splitlines():
        if not line.startswith(prefix):
            continue
        labels_text, _, value_text = line[len(prefix) :].rpartition("}")
        labels = dict(_LABEL.findall(labels_text))
        value = int(float(value_text.split()[0]))
        key = request_key(labels)
        result.requests[key] = result.requests.get(key, 0) + value
        code = labels.get("code", "")
        if code.isdigit() and int(code) >= 400:
            failed = f"{key} -> {code}"
            result.failed[failed] = result.failed.get(failed, 0) + value
    return result


def difference(before: Mapping[str, int], after: Mapping[str, int]) -> Counts:
    """What was added between two reads, keys with nothing added left out. A counter lower
    than before means its apiserver restarted: all of ``after`` is new (Prometheus' rule)."""
    result = {}
    for key, value in after.items():
        added = value - before.get(key, 0)
        if added < 0:
            added = value
        if added:
            result[key] = added
    return result


def window(before: Snapshot, after: Snapshot) -> Snapshot:
    return Snapshot(
        difference(before.requests, after.requests), difference(before.failed, after.failed)
    )


def total(counts: Mapping[str, int | float]) -> float:
    return float(sum(counts.values()))


@dataclass
class ClusterRequests:
    """One cluster's requests in the measured and in the idle window."""

    name: str
    workloads: int
    """Workloads this cluster served: every submitted one on the manager; on a worker, those
    placed there (the chosen worker)."""
    measured: Snapshot
    idle: Snapshot
    window_seconds: float
    idle_seconds: float

    @property
    def requests(self) -> int:
        """Every request in the measured window."""
        return int(total(self.measured.requests))

    @property
    def scale(self) -> float:
        """Idle window -> measured window."""
        return self.window_seconds / self.idle_seconds if self.idle_seconds > 0 else 0.0

    def background(self, key: str | None = None) -> float:
        """Requests the measured window would have held with no workload (all, or one key)."""
        idle = self.idle.requests
        return (total(idle) if key is None else idle.get(key, 0)) * self.scale

    def net(self, key: str | None = None) -> float:
        measured = self.measured.requests
        return (total(measured) if key is None else measured.get(key, 0)) - self.background(key)

    def per_workload(self, value: float) -> float | None:
        return value / self.workloads if self.workloads else None

    def top(self, n: int = 5) -> list[tuple[str, float]]:
        """The keys that cost the most per workload, net of the background."""
        if not self.workloads:
            return []
        keys = set(self.measured.requests) | set(self.idle.requests)
        ranked = sorted(((k, self.net(k) / self.workloads) for k in keys), key=lambda kv: -kv[1])
        return [(k, v) for k, v in ranked[:n] if v > 0]

    def top_background(self, n: int = 4) -> list[tuple[str, float]]:
        """The idle window's requests per second, most frequent first."""
        if self.idle_seconds <= 0:
            return []
        ranked = sorted(self.idle.requests.items(), key=lambda kv: -kv[1])
        return [(k, v / self.idle_seconds) for k, v in ranked[:n]]

    def to_json(self) -> dict[str, Any]:
        def r(value: float | None) -> float | None:
            return None if value is None else round(value, 2)

        keys = sorted(
            set(self.measured.requests) | set(self.idle.requests),
            key=lambda k: (-self.measured.requests.get(k, 0), k),
        )
        return {
            "workloads": self.workloads,
            "requests": self.requests,
            "background": r(self.background()),
            "background_per_second": r(
                total(self.idle.requests) / self.idle_seconds if self.idle_seconds > 0 else None
            ),
            "per_workload": r(self.per_workload(self.requests)),
            "net_per_workload": r(self.per_workload(self.net())),
            "top_net_per_workload": {k: r(v) for k, v in self.top(8)},
            # kfed's, and on a full bed also the controller-manager's, scheduler's and
            # kubelet's (kwok's): Events count as writes like any other object.
            "event_writes_net_per_workload": r(
                self.per_workload(sum(self.net(k) for k in EVENT_WRITES))
            ),
            "by_request": {
                k: {
                    "requests": self.measured.requests.get(k, 0),
                    "idle": self.idle.requests.get(k, 0),
                    "net_per_workload": r(self.per_workload(self.net(k))),
                }
                for k in keys
            },
            "failed": dict(sorted(self.measured.failed.items(), key=lambda kv: -kv[1])),
            "failed_idle": dict(sorted(self.idle.failed.items(), key=lambda kv: -kv[1])),
        }


def combined(name: str, clusters: Iterable[ClusterRequests], workloads: int) -> ClusterRequests:
    """Several clusters as one (the workers), their windows of the same length."""
    parts = list(clusters)
    measured, idle = Snapshot(), Snapshot()
    for part in parts:
        for into, source in (
            (measured.requests, part.measured.requests),
            (measured.failed, part.measured.failed),
            (idle.requests, part.idle.requests),
            (idle.failed, part.idle.failed),
        ):
            for key, value in source.items():
                into[key] = into.get(key, 0) + value
    return ClusterRequests(
        name=name,
        workloads=workloads,
        measured=measured,
        idle=idle,
        window_seconds=parts[0].window_seconds if parts else 0.0,
        idle_seconds=parts[0].idle_seconds if parts else 0.0,
    )


@dataclass
class ApiRequests:
    """Every cluster's requests in one dispatch mode; the manager first, then the workers."""

    window_seconds: float
    idle_seconds: float
    clusters: list[ClusterRequests]

    @classmethod
    def of(
        cls,
        reads: Mapping[str, tuple[Snapshot, Snapshot, Snapshot]],
        *,
        manager: str,
        workloads: int,
        placements: Mapping[str, int],
        idle_seconds: float,
        window_seconds: float,
    ) -> ApiRequests:
        """``reads``: per cluster, the counter before the idle window, before the measured
        window and after it."""
        clusters = []
        for name in [manager, *sorted(n for n in reads if n != manager)]:
            idle_start, start, end = reads[name]
            clusters.append(
                ClusterRequests(
                    name=name,
                    workloads=workloads if name == manager else placements.get(name, 0),
                    measured=window(start, end),
                    idle=window(idle_start, start),
                    window_seconds=window_seconds,
                    idle_seconds=idle_seconds,
                )
            )
        return cls(window_seconds, idle_seconds, clusters)

    @property
    def manager(self) -> ClusterRequests:
        return self.clusters[0]

    @property
    def workers(self) -> list[ClusterRequests]:
        return self.clusters[1:]

    def all_workers(self) -> ClusterRequests:
        """Every worker's requests over every workload (also copies that did not run)."""
        return combined("workers (all)", self.workers, self.manager.workloads)

    def chosen_worker(self) -> ClusterRequests:
        """The workers that ran workloads, over the workloads they ran: the cost of a
        workload on the worker it was placed on (an idle worker is left out)."""
        ran = [w for w in self.workers if w.workloads]
        return combined("chosen worker", ran, sum(w.workloads for w in ran))

    def rows(self) -> list[ClusterRequests]:
        return [*self.clusters, self.chosen_worker(), self.all_workers()]

    def to_json(self) -> dict[str, Any]:
        return {
            "window_seconds": round(self.window_seconds, 2),
            "idle_window_seconds": round(self.idle_seconds, 2),
            "counted": (
                "every request each kube-apiserver served (apiserver_request_total): kfed "
                "manager and shims, the benchmark (1 POST jobs per workload on the manager, "
                "its watches), controller-manager, scheduler, kwok; WATCH counted when it "
                "ends; background = idle window's requests x window / idle window; net = "
                "requests - background"
            ),
            "clusters": {c.name: c.to_json() for c in self.rows()},
        }
