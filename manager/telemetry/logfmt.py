"""Log lines of kfed's processes, as text for people or as JSON for log pipelines.

``--log-format json`` writes one JSON object per line with upstream Kueue's keys (its zap
encoder's ``level``, ``ts``, ``logger``, ``msg``; the objects a line is about as
``klog.KObj`` renders them: ``"workload": {"name": ..., "namespace": ...}``,
``"clusterQueue": {"name": ...}``, ``"job": {...}``; ``"cluster"`` for a worker's name) and
``traceID`` where a workload's trace is current. The objects come from ``log_about``, which
the reconcilers enter with the object they work on (``tracing.workload_context`` does it for a
Workload), and from ``extra={"cluster": ...}`` on a call.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from opentelemetry import trace

from manager.api.view import at

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s:%(trace)s %(message)s"

_ABOUT: ContextVar[Mapping[str, Any] | None] = ContextVar("kfed_log_about", default=None)
"""The objects the current reconcile is about, as JSON fields."""


def fields_of_workload(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A Workload's fields in a log line: itself, its ClusterQueue, its job, its worker."""
    meta = at(obj, "metadata")
    status = at(obj, "status")
    fields: dict[str, Any] = {
        "workload": {"name": meta.get("name"), "namespace": meta.get("namespace")}
    }
    cluster_queue = at(status, "admission").get("clusterQueue")
    if cluster_queue:
        fields["clusterQueue"] = {"name": cluster_queue}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            fields["job"] = {"name": ref.get("name"), "namespace": meta.get("namespace")}
    if status.get("clusterName"):
        fields["cluster"] = status["clusterName"]
    return fields


@contextlib.contextmanager
def log_about(fields: Mapping[str, Any]) -> Iterator[None]:
    """Log lines written inside carry ``fields`` (in JSON; text lines are unchanged)."""
    token = _ABOUT.set({**(_ABOUT.get() or {}), **fields})
    try:
        yield
    finally:
        _ABOUT.reset(token)


class TraceIdFilter(logging.Filter):
    """Adds ``trace`` to every record: `` trace=<id>`` inside a workload's context, else ""."""

    def filter(self, record: logging.LogRecord) -> bool:
        span_context = trace.get_current_span().get_span_context()
        record.trace = f" trace={span_context.trace_id:032x}" if span_context.is_valid else ""
        record.trace_id = f"{span_context.trace_id:032x}" if span_context.is_valid else ""
        record.about = _ABOUT.get() or {}
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record, with upstream Kueue's keys."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "level": record.levelname.lower(),
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "logger": record.name,
            "caller": f"{record.module}.py:{record.lineno}",
            "msg": record.getMessage(),
        }
        line.update(getattr(record, "about", {}) or {})
        cluster = getattr(record, "cluster", None)
        if cluster:
            line["cluster"] = cluster
        trace_id = getattr(record, "trace_id", "")
        if trace_id:
            line["traceID"] = trace_id
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure(level: str = "INFO", fmt: str = "text") -> None:
    """Log lines of a kfed process, in ``fmt`` (``text`` or ``json``)."""
    if fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r} is not one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler()
    handler.addFilter(TraceIdFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=[handler])
