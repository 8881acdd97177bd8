"""One OpenTelemetry trace per workload, from submission to finish, across clusters.

A workload's life is spread over many reconciles, processes and clusters, so no span stays
open for it. Instead the trace's root is fixed once, when the manager creates the Workload
for a submitted Job: its W3C ``traceparent`` goes into the ``kfed.io/traceparent``
annotation. Every later step (queueing, admission, dispatch, remote creation, remote
admission, running, failover, finish) records a span under that root, with the step's real
start and end times. The manager copies the annotation onto the remote Workload and Job
when it creates them, so the worker shim's spans join the same trace. A Workload that was
not created from a Job (and so has no annotation) gets a trace id derived from its uid.

Configuration is OpenTelemetry's own: spans are exported over OTLP/HTTP when
``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._TRACES_ENDPOINT``) is set, named by
``OTEL_SERVICE_NAME``, sampled by ``OTEL_TRACES_SAMPLER``; with no endpoint, or with
``OTEL_SDK_DISABLED=true``, nothing is exported and recording costs next to nothing. The
trace ids still appear in log lines, so logs of one workload can be found together.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import random
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from manager.api.view import annotations_of, at
from manager.telemetry import logfmt

TRACEPARENT_ANNOTATION = "kfed.io/traceparent"
"""W3C trace context of the workload's trace, written once when the object is created."""

ROLE_ATTRIBUTE = "kfed.role"
"""``manager`` or ``worker``: which side of the federation recorded a span."""

INSTRUMENTATION = "kfed"
_propagator = TraceContextTextMapPropagator()
_provider: trace.TracerProvider | None = None

Obj = Mapping[str, Any]


# -- set-up -------------------------------------------------------------------------------


def exporting_configured(environ: Mapping[str, str] | None = None) -> bool:
    """True when the OTEL_* environment asks for spans to be exported."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
        return False
    return bool(
        env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )


def configure(service_name: str) -> TracerProvider | None:
    """Install an exporting tracer provider if the environment asks for one.

    Returns it (call ``shutdown()`` on it to flush at exit), or None when tracing is off.
    """
    provider = build_provider(service_name)
    if provider is not None:
        trace.set_tracer_provider(provider)
    return provider


def build_provider(service_name: str) -> TracerProvider | None:
    """A provider exporting over OTLP/HTTP as the OTEL_* environment says, or None."""
    if not exporting_configured():
        return None
    # Imported here: the exporter pulls in protobuf, which processes without tracing skip.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    resource = Resource.create(
        {"service.name": os.environ.get("OTEL_SERVICE_NAME") or service_name}
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


@contextlib.contextmanager
def use_provider(provider: trace.TracerProvider) -> Iterator[None]:
    """Record into ``provider`` instead of the global one (tests: one exporter per test)."""
    global _provider
    previous, _provider = _provider, provider
    try:
        yield
    finally:
        _provider = previous


def tracer() -> trace.Tracer:
    provider = _provider or trace.get_tracer_provider()
    return provider.get_tracer(INSTRUMENTATION)


# -- a workload's trace context -------------------------------------------------------------


def _derived_context(uid: str) -> SpanContext:
    digest = hashlib.sha256(f"kfed-trace:{uid}".encode()).digest()
    return SpanContext(
        trace_id=int.from_bytes(digest[:16], "big") or 1,
        span_id=int.from_bytes(digest[16:24], "big") or 1,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )


def _span_context_from(traceparent: str) -> SpanContext | None:
    ctx = _propagator.extract({"traceparent": traceparent})
    span_context = trace.get_current_span(ctx).get_span_context()
    return span_context if span_context.is_valid else None


def _traceparent(span_context: SpanContext) -> str:
    return (
        f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-"
        f"{int(span_context.trace_flags):02x}"
    )


def span_context_of(obj: Obj) -> SpanContext:
    """The root of ``obj``'s trace: from its annotation, else derived from its uid."""
    meta = at(obj, "metadata")
    value = annotations_of(obj).get(TRACEPARENT_ANNOTATION)
    if value:
        found = _span_context_from(str(value))
        if found is not None:
            return found
    return _derived_context(str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"))


def traceparent_of(obj: Obj) -> str:
    """The annotation value to write on objects created for ``obj`` (its remote copies)."""
    return _traceparent(span_context_of(obj))


def trace_id_of(obj: Obj) -> str:
    return f"{span_context_of(obj).trace_id:032x}"


def _context_of(obj: Obj) -> otel_context.Context:
    return trace.set_span_in_context(NonRecordingSpan(span_context_of(obj)))


# -- recording ------------------------------------------------------------------------------


def _ns(moment: float | str | None) -> int | None:
    """Epoch nanoseconds from seconds or a Kubernetes timestamp; None stays None."""
    if moment is None or moment == "":
        return None
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment.replace("Z", "+00:00")).timestamp()
    return int(moment * 1e9)


def _clean(attributes: Mapping[str, Any]) -> dict[str, AttributeValue]:
    out: dict[str, AttributeValue] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, list | tuple):
            out[key] = [str(v) for v in value]
        elif isinstance(value, bool | int | float | str):
            out[key] = value
        else:
            out[key] = str(value)
    return out


def start_root(
    name: str, *, start: float | str | None = None, attributes: Mapping[str, Any] | None = None
) -> str:
    """Record the first span of a new workload trace; return the traceparent to annotate.

    When no tracer records (tracing off), fresh ids are made up anyway, so the annotation
    (and the trace id in log lines) exists whatever the configuration.
    """
    span = tracer().start_span(
        name,
        context=otel_context.Context(),
        start_time=_ns(start),
        attributes=_clean(attributes or {}),
    )
    span_context = span.get_span_context()
    span.end()
    if not span_context.is_valid:
        span_context = SpanContext(
            trace_id=random.getrandbits(128) or 1,
            span_id=random.getrandbits(64) or 1,
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
    return _traceparent(span_context)


def record(
    name: str,
    obj: Obj,
    *,
    start: float | str | None = None,
    end: float | str | None = None,
    attributes: Mapping[str, Any] | None = None,
    error: str | None = None,
) -> None:
    """Record one finished step of ``obj``'s life as a span of its trace.

    ``start``/``end`` are epoch seconds or Kubernetes timestamps (default: now); a step that
    began before this process saw it (time spent queueing) keeps its real start.
    """
    start_ns, end_ns = _ns(start), _ns(end)
    if start_ns is not None and end_ns is not None and end_ns < start_ns:
        end_ns = start_ns
    span = tracer().start_span(
        name, context=_context_of(obj), start_time=start_ns, attributes=_clean(attributes or {})
    )
    if error:
        span.set_status(trace.Status(trace.StatusCode.ERROR, error))
    span.end(end_time=end_ns)


@contextlib.contextmanager
def workload_context(obj: Obj | None) -> Iterator[None]:
    """Make ``obj``'s trace current: log lines written meanwhile carry its trace id (and, in
    JSON, the workload, its ClusterQueue, job and worker)."""
    if obj is None:
        yield
        return
    token = otel_context.attach(_context_of(obj))
    try:
        with logfmt.log_about(logfmt.fields_of_workload(obj)):
            yield
    finally:
        otel_context.detach(token)


# -- log lines ------------------------------------------------------------------------------

TraceIdFilter = logfmt.TraceIdFilter
LOG_FORMAT = logfmt.TEXT_FORMAT


def configure_logging(level: str = "INFO", fmt: str = "text") -> None:
    """Log lines with the current workload's trace id, for processes of kfed (``logfmt``)."""
    logfmt.configure(level, fmt)


def setup(
    service_name: str, log_level: str = "INFO", log_format: str = "text"
) -> TracerProvider | None:
    """Logging and tracing for one kfed process (manager, worker shim)."""
    configure_logging(log_level, log_format)
    provider = configure(service_name)
    logging.getLogger(__name__).info(
        "tracing: %s",
        "exporting over OTLP/HTTP" if provider is not None else "off (no OTLP endpoint set)",
    )
    return provider
