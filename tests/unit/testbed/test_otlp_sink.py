"""The demo's trace receiver gets exactly what kfed exports over OTLP/HTTP when the
standard OTEL_* variables point at it."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.otlp_sink import TraceSink, story
from manager.telemetry import tracing


def test_spans_exported_over_otlp_http_arrive_decoded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = TraceSink(tmp_path / "spans.jsonl").start()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.endpoint)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "kfed-manager-under-test")
        provider = tracing.build_provider("kfed-manager")
        assert provider is not None
        with tracing.use_provider(provider):
            root = tracing.start_root("submit", attributes={"k8s.job.name": "light-job"})
            wl = {"metadata": {"uid": "u", "annotations": {tracing.TRACEPARENT_ANNOTATION: root}}}
            tracing.record(
                "dispatch",
                wl,
                attributes={"kfed.cluster": "worker-1", "kfed.dispatch.candidates": ["a", "b"]},
            )
        provider.shutdown()  # flushes the batch

        received = sink.trace(tracing.trace_id_of(wl))
        assert [s.name for s in received] == ["submit", "dispatch"]
        assert {s.service for s in received} == {"kfed-manager-under-test"}
        assert received[1].parent_span_id == received[0].span_id
        assert received[1].attributes["kfed.dispatch.candidates"] == ["a", "b"]
        assert "dispatch" in story(received) and "cluster=worker-1" in story(received)
        assert len((tmp_path / "spans.jsonl").read_text().splitlines()) == 2
    finally:
        sink.stop()
