"""The workload trace context: written once, read everywhere, exported only when asked."""

from __future__ import annotations

import logging

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from manager.telemetry import tracing


def workload(uid: str = "u-1", traceparent: str | None = None) -> dict[str, object]:
    annotations = {tracing.TRACEPARENT_ANNOTATION: traceparent} if traceparent else {}
    return {
        "metadata": {
            "name": "wl",
            "namespace": "ns",
            "uid": uid,
            "creationTimestamp": "2026-11-29T10:00:00Z",
            "annotations": annotations,
        }
    }


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, False),
    ],
)
def test_exporting_only_when_an_endpoint_is_configured(
    environ: dict[str, str], expected: bool
) -> None:
    assert tracing.exporting_configured(environ) is expected


def test_configure_without_endpoint_installs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    assert tracing.configure("kfed-test") is None


def test_the_annotation_is_the_trace_root(spans: InMemorySpanExporter) -> None:
    parent = tracing.start_root("submit", start="2026-11-29T10:00:00Z")
    obj = workload(traceparent=parent)
    assert tracing.traceparent_of(obj) == parent
    tracing.record("queueing", obj, start="2026-11-29T10:00:00Z", attributes={"q": "gpu-cq"})
    submit, queueing = spans.get_finished_spans()
    assert submit.name == "submit" and submit.parent is None
    assert queueing.context is not None and submit.context is not None
    assert queueing.context.trace_id == submit.context.trace_id
    assert queueing.parent is not None and queueing.parent.span_id == submit.context.span_id
    assert queueing.start_time == 1_795_946_400 * 10**9  # the Workload's creation, not now
    assert queueing.attributes == {"q": "gpu-cq"}


def test_without_annotation_the_trace_is_derived_from_the_uid() -> None:
    first, again, other = workload("u-1"), workload("u-1"), workload("u-2")
    assert tracing.trace_id_of(first) == tracing.trace_id_of(again)
    assert tracing.trace_id_of(first) != tracing.trace_id_of(other)
    assert tracing.traceparent_of(first).startswith(f"00-{tracing.trace_id_of(first)}-")


def test_a_garbled_annotation_falls_back_to_the_uid() -> None:
    assert tracing.trace_id_of(workload("u-1", traceparent="nonsense")) == tracing.trace_id_of(
        workload("u-1")
    )


def test_a_root_is_made_up_even_when_nothing_records() -> None:
    # No provider installed here: the no-op tracer; ids must still be valid and fresh.
    first, second = tracing.start_root("submit"), tracing.start_root("submit")
    assert first != second
    assert tracing.trace_id_of(workload(traceparent=first)) == first.split("-")[1]


def test_end_before_start_is_clamped(spans: InMemorySpanExporter) -> None:
    tracing.record("running", workload(), start=20.0, end=10.0, error="failed")
    (span,) = spans.get_finished_spans()
    assert span.end_time == span.start_time
    assert not span.status.is_ok


def test_log_lines_carry_the_trace_id() -> None:
    obj = workload()
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    handler.addFilter(tracing.TraceIdFilter())
    log = logging.getLogger("kfed-test-tracing")
    log.addHandler(handler)
    try:
        with tracing.workload_context(obj):
            log.warning("inside")
        log.warning("outside")
    finally:
        log.removeHandler(handler)
    inside, outside = records
    assert inside.trace == f" trace={tracing.trace_id_of(obj)}"  # type: ignore[attr-defined]
    assert outside.trace == ""  # type: ignore[attr-defined]
