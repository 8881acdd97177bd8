"""kfed's log lines in JSON (``--log-format json``): one object per line, upstream Kueue's
keys, the workload a reconcile is about and its trace id."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from manager.telemetry import logfmt, tracing

WORKLOAD = {
    "metadata": {
        "name": "job-train-1a2b3",
        "namespace": "ml-jobs",
        "uid": "u-1",
        "ownerReferences": [{"kind": "Job", "name": "train", "controller": True}],
    },
    "status": {"admission": {"clusterQueue": "gpu-cq"}, "clusterName": "worker-2"},
}


@pytest.fixture
def captured() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(logfmt.TraceIdFilter())
    handler.setFormatter(logfmt.JsonFormatter())
    logger = logging.getLogger("kfed.test.logfmt")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield logger, stream
    finally:
        logger.removeHandler(handler)


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_line_inside_a_workloads_reconcile_names_it_as_upstream_does(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = captured
    with tracing.workload_context(WORKLOAD):
        logger.info("placed %s", "it")
    (line,) = lines(stream)
    assert line["level"] == "info" and line["msg"] == "placed it"
    assert line["logger"] == "kfed.test.logfmt" and str(line["ts"]).endswith("Z")
    assert line["workload"] == {"name": "job-train-1a2b3", "namespace": "ml-jobs"}
    assert line["clusterQueue"] == {"name": "gpu-cq"}
    assert line["job"] == {"name": "train", "namespace": "ml-jobs"}
    assert line["cluster"] == "worker-2"
    assert line["traceID"] == tracing.trace_id_of(WORKLOAD)


def test_a_line_outside_names_nothing_and_takes_a_cluster_given_by_the_call(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = captured
    logger.warning("worker lost", extra={"cluster": "worker-1"})
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logger.exception("failed")
    first, second = lines(stream)
    assert first == {
        "level": "warning",
        "ts": first["ts"],
        "logger": "kfed.test.logfmt",
        "caller": first["caller"],
        "msg": "worker lost",
        "cluster": "worker-1",
    }
    assert "RuntimeError: boom" in str(second["error"])


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="log format"):
        logfmt.configure("INFO", "xml")
