"""One trace per workload, across the manager and the workers: a job that runs, is cut off
from the manager with its worker, and finishes elsewhere tells the whole story in one trace,
failover included."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from e2e.waiting import wait_for
from manager.api import constants as C
from manager.controllers import workloadstatus as ws
from manager.kube import resources as R
from manager.telemetry import tracing
from tests.integration.federation import article
from tests.integration.federation.bed import Bed
from tests.integration.federation.test_dispatch import complete, h100_job, placed
from tests.integration.federation.test_failover import running_pods

pytestmark = pytest.mark.full
NS = article.NS


def trace_of(spans: InMemorySpanExporter, trace_id: str) -> list[ReadableSpan]:
    return [
        s
        for s in spans.get_finished_spans()
        if s.context is not None and f"{s.context.trace_id:032x}" == trace_id
    ]


def attr(span: ReadableSpan, key: str) -> object:
    return (span.attributes or {}).get(key)


async def test_one_trace_from_submit_to_finish_with_the_failover(
    article_bed: Bed, spans: InMemorySpanExporter
) -> None:
    bed = article_bed
    await bed.start_federation()
    api = bed.manager_api
    await api.create(R.JOBS, h100_job("traced", delay_ms=6000), NS)
    wl = await wait_for(lambda: placed(api, "traced"), timeout=60, what="traced placed")
    first = ws.status_of(wl)["clusterName"]
    other = "worker-3" if first == "worker-2" else "worker-2"
    await wait_for(
        lambda: running_pods(bed.worker_apis[first], "traced"), timeout=60, what="running"
    )
    annotation = wl["metadata"]["annotations"][tracing.TRACEPARENT_ANNOTATION]
    remote_wl = await bed.worker_apis[first].get(R.WORKLOADS, wl["metadata"]["name"], NS)
    remote_job = await bed.worker_apis[first].get(R.JOBS, "traced", NS)
    for remote in (remote_wl, remote_job):
        assert remote["metadata"]["annotations"][tracing.TRACEPARENT_ANNOTATION] == annotation, (
            "the remote copies carry the workload's trace context"
        )

    bed.proxies[first].cut()
    await wait_for(
        lambda: running_pods(bed.worker_apis[other], "traced"),
        timeout=60,
        what=f"running on {other} after the cut",
    )
    bed.proxies[first].heal()
    await wait_for(lambda: complete(api, "traced"), timeout=60, what="traced completes")

    trace_id = tracing.trace_id_of(wl)
    finishes = await wait_for(
        lambda: [s for s in trace_of(spans, trace_id) if s.name == "finish"] or None,
        timeout=60,
        what="the finish span",
    )
    story = sorted(trace_of(spans, trace_id), key=lambda s: s.start_time or 0)
    names = Counter(s.name for s in story)
    t0 = story[0].start_time or 0
    print(
        "trace",
        trace_id,
        [
            (s.name, ((s.start_time or 0) - t0) // 10**6, ((s.end_time or 0) - t0) // 10**6)
            for s in story
        ],
    )

    # Manager and workers, one trace.
    roles = {attr(s, tracing.ROLE_ATTRIBUTE) for s in story}
    assert roles == {"manager", "worker"}
    (submit,) = [s for s in story if s.name == "submit"]
    assert submit.parent is None, "submit is the root"
    assert all(s.parent is not None for s in story if s is not submit)
    for step in ("queueing", "admission", "placement", "remote.queueing", "remote.admission"):
        assert names[step] >= 1, f"no {step} span in {names}"
    (admission,) = [s for s in story if s.name == "admission"][:1]
    assert attr(admission, "kueue.cluster_queue") == "gpu-cq"
    flavors = attr(admission, "kueue.flavors")
    assert isinstance(flavors, tuple) and "main: nvidia.com/gpu=h100" in flavors

    # The first placement, then the failover, then the second placement.
    dispatches = [s for s in story if s.name == "dispatch"]
    assert [attr(s, "kfed.cluster") for s in dispatches] == [first, other]
    assert attr(dispatches[1], "kfed.dispatch.candidates"), "candidates are recorded"
    created = [
        (attr(s, "kfed.cluster"), attr(s, "k8s.kind")) for s in story if s.name == "remote.create"
    ]
    assert (first, "Workload") in created and (other, "Workload") in created
    assert (first, "Job") in created and (other, "Job") in created
    (failover,) = [s for s in story if s.name == "failover"]
    assert attr(failover, "kfed.failover.reason") == "lost"
    assert attr(failover, "kfed.failover.from_cluster") == first
    assert dispatches[0].start_time < failover.start_time < dispatches[1].start_time  # type: ignore[operator]
    assert names["eviction"] >= 1 and names["requeue"] >= 1, "the manager evicted and requeued it"
    fenced = [s for s in story if s.name == "remote.eviction"]
    assert fenced, f"the cut worker's fencing is in the trace: {names}"
    assert attr(fenced[0], "kueue.eviction.reason") == C.REASON_DEACTIVATED

    # It ran to the end on the second worker; the manager closed the story.
    (running,) = [s for s in story if s.name == "remote.running"]
    assert attr(running, "kfed.succeeded") is True
    assert finishes is not None and attr(finishes[0], "kfed.cluster") == other
    started = time.time_ns() - 600 * 10**9
    assert all((s.start_time or 0) > started for s in story)
