"""Where the kube layer reports what controller-runtime and client-go report as metrics:
work queue events, reconcile outcomes and REST calls.

The kube layer sits below ``manager.telemetry`` (import-linter's layers), so it cannot name
the ``Metrics`` object; it calls the process's ``KubeMetrics`` sink installed here instead
(as client-go's ``workqueue.SetProvider`` and ``metrics.Register`` are process-wide). None
is installed by default: nothing is recorded, at no cost. ``Metrics.for_process()`` installs
its own (one process serves one registry); a test installs one with ``installed(...)``.

State (queue depth, work in flight, the longest-running reconcile) is not pushed: the
metrics collector reads the live queues at scrape time (``workqueue.live_queues``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Literal, Protocol

ReconcileResult = Literal["success", "error", "requeue", "requeue_after"]
"""controller-runtime's ``controller_runtime_reconcile_total`` results."""


class KubeMetrics(Protocol):
    def queue_added(self, queue: str) -> None:
        """A key was put on a work queue (``workqueue_adds_total``)."""

    def queue_retried(self, queue: str) -> None:
        """A key was re-added after a failure, with backoff (``workqueue_retries_total``)."""

    def queue_waited(self, queue: str, seconds: float) -> None:
        """A key left the queue after waiting that long (``workqueue_queue_duration_seconds``)."""

    def reconciled(self, queue: str, result: ReconcileResult, seconds: float) -> None:
        """A key was processed (``workqueue_work_duration_seconds`` and the
        ``controller_runtime_reconcile_*`` metrics)."""

    def rest_request(self, host: str, method: str, code: str) -> None:
        """One request to an API server (``rest_client_requests_total``); ``code`` is the
        HTTP status, or ``<error>`` when none came back (as client-go labels it)."""


_sink: KubeMetrics | None = None


def sink() -> KubeMetrics | None:
    return _sink


def install(metrics: KubeMetrics | None) -> None:
    """Make ``metrics`` the process's sink (None: record nothing)."""
    global _sink
    _sink = metrics


@contextlib.contextmanager
def installed(metrics: KubeMetrics) -> Iterator[KubeMetrics]:
    """``metrics`` is the sink inside the block; the previous one again after it."""
    previous = _sink
    install(metrics)
    try:
        yield metrics
    finally:
        install(previous)
