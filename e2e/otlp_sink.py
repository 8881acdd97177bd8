"""A tiny OTLP/HTTP trace receiver for the demo and local runs: no collector, no Jaeger.

kfed's processes export spans to ``http://127.0.0.1:<port>`` (``OTEL_EXPORTER_OTLP_ENDPOINT``)
exactly as they would to a real collector; this receiver decodes them (protobuf, OTLP's
default encoding over HTTP), keeps them in memory, appends them to a JSON-lines file, and can
print one workload's trace as a time-ordered story.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass(frozen=True)
class SinkSpan:
    service: str
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def decode(body: bytes) -> list[SinkSpan]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        service = str(resource.get("service.name", "?"))
        for scope_spans in resource_spans.scope_spans:
            for s in scope_spans.spans:
                spans.append(
                    SinkSpan(
                        service=service,
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_span_id=s.parent_span_id.hex(),
                        name=s.name,
                        start_ns=s.start_time_unix_nano,
                        end_ns=s.end_time_unix_nano,
                        attributes={a.key: _value(a.value) for a in s.attributes},
                    )
                )
    return spans


class TraceSink:
    def __init__(self, path: Path, host: str = "127.0.0.1", port: int = 0) -> None:
        self.path = path
        self.spans: list[SinkSpan] = []
        self._lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    received = decode(body)
                except Exception:
                    self.send_error(400, "not an OTLP protobuf trace export")
                    return
                sink.add(received)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet: the demo prints what matters

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> TraceSink:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add(self, spans: list[SinkSpan]) -> None:
        with self._lock:
            self.spans.extend(spans)
            with self.path.open("a") as f:
                for s in spans:
                    f.write(json.dumps(asdict(s)) + "\n")

    def trace(self, trace_id: str) -> list[SinkSpan]:
        with self._lock:
            return sorted(
                (s for s in self.spans if s.trace_id == trace_id), key=lambda s: s.start_ns
            )


def story(spans: list[SinkSpan]) -> str:
    """One line per span: offset from the first, duration, who recorded it, what it says."""
    if not spans:
        return "   (no spans received yet)"
    t0 = spans[0].start_ns
    lines = []
    for s in spans:
        a = s.attributes
        detail = ", ".join(
            f"{k.split('.', 1)[-1]}={a[k]}"
            for k in (
                "kfed.cluster",
                "k8s.kind",
                "kueue.flavors",
                "kfed.failover.reason",
                "kfed.dispatch.reason",
                "kfed.succeeded",
            )
            if k in a
        )
        lines.append(
            f"   +{(s.start_ns - t0) / 1e9:7.3f}s {(s.end_ns - s.start_ns) / 1e6:9.1f} ms  "
            f"{s.service:<17} {s.name:<18} {detail}"
        )
    return "\n".join(lines)
