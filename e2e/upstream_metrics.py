"""Extract upstream Kueue's Prometheus metrics from its Go source into
``tests/data/upstream-metrics-v0.17.0.json``: every registered metric's name, type, label
names and histogram buckets, and which of them kfed does not serve, and why.

    python -m e2e.upstream_metrics \\
        --source ~/go/pkg/mod/sigs.k8s.io/kueue@v0.17.0/pkg/metrics/metrics.go \\
        --newest /tmp/kueue-v0.19.2-metrics.go --newest-version v0.19.2

``--source`` is ``pkg/metrics/metrics.go`` of the version kfed follows (v0.17.0, from the Go
module cache); ``--newest`` the same file of upstream's newest release, read only for the
``multikueue_*`` family (v0.17.0 has none). Two MultiKueue metrics merged upstream after
that release are recorded by hand below (``UNRELEASED``), with the pull requests they come
from. The JSON is committed; the Go source is not.

A metric is taken when it is registered (``Register`` / ``RegisterLQMetrics``); its labels
are the first ``[]string{...}`` after its options (custom labels, appended at run time only
when configured, are not part of it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "upstream-metrics-v0.17.0.json"
MODULE = "sigs.k8s.io/kueue"
VERSION = "v0.17.0"

DEF_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]
"""client_golang's ``prometheus.DefBuckets``: a histogram that names no buckets gets these."""

SUBSYSTEMS = {"constants.KueueName": "kueue", "constants.MultiKueueName": "multikueue"}

_DEF = re.compile(
    r"(?P<var>\w+)\s*=\s*(?:trackGaugeVec\()?prometheus\.New(?P<kind>Counter|Gauge|Histogram)Vec\(",
)

NOT_APPLICABLE: dict[str, str] = {
    "kueue_build_info": "describes a Kueue (Go) build: git version and commit, Go version, "
    "compiler; kfed is not one, and a Kueue version label carrying kfed's version would mislead "
    "version-skew alerts. kfed's own build is kfed_build_info",
    "kueue_pods_ready_to_evicted_time_seconds": "waitForPodsReady: kfed does not implement it "
    "(no PodsReady condition, no PodsReadyTimeout eviction; docs/api.md)",
    "kueue_ready_wait_time_seconds": "waitForPodsReady (PodsReady condition): not implemented",
    "kueue_admitted_until_ready_wait_time_seconds": "waitForPodsReady (PodsReady condition): "
    "not implemented",
    "kueue_local_queue_ready_wait_time_seconds": "waitForPodsReady (PodsReady condition): "
    "not implemented",
    "kueue_local_queue_admitted_until_ready_wait_time_seconds": "waitForPodsReady (PodsReady "
    "condition): not implemented",
    "kueue_evicted_workloads_once_total": "its detailed_reason values (WaitForStart, "
    "WaitForRecovery) are waitForPodsReady's, and 'once' is kept in upstream's "
    "status.requeueState bookkeeping, which kfed does not write",
    "kueue_admission_cycle_preemption_skips": "kfed's admission core does not skip preemption "
    "candidates for another ClusterQueue's in the same cycle: it has nothing to count",
}
"""Upstream metrics whose meaning does not apply to kfed, with the reason (docs/metrics.md)."""

UNRELEASED: list[dict[str, Any]] = [
    {
        "name": "multikueue_cluster_status",
        "type": "gauge",
        "labels": ["cluster_queue", "cluster", "active", "replica_role"],
        "origin": "kubernetes-sigs/kueue pull request #13798 (merged to main, in no release as of "
        "v0.19.2)",
    },
    {
        "name": "multikueue_workloads_evicted_total",
        "type": "counter",
        "labels": ["cluster_queue", "cluster", "reason", "replica_role"],
        "origin": "kubernetes-sigs/kueue pull request #15288 (merged to main, in no release as of "
        "v0.19.2)",
    },
]


CONTROLLER_RUNTIME_ORIGIN = (
    "sigs.k8s.io/controller-runtime@v0.23.3 (the version in kueue v0.17.0's go.mod): "
    "pkg/internal/metrics/workqueue.go, pkg/internal/controller/metrics/metrics.go, "
    "pkg/metrics/client_go_adapter.go, pkg/metrics/leaderelection.go; copied by hand"
)
_WQ_BUCKETS = [1e-8 * 10**i for i in range(12)]
_RECONCILE_BUCKETS = [
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7),
    *(0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10),
    *(15, 20, 25, 30, 40, 50, 60),
]
CONTROLLER_RUNTIME: list[dict[str, Any]] = [
    {"name": "workqueue_depth", "type": "gauge", "labels": ["name", "controller", "priority"]},
    {"name": "workqueue_adds_total", "type": "counter", "labels": ["name", "controller"]},
    {
        "name": "workqueue_queue_duration_seconds",
        "type": "histogram",
        "labels": ["name", "controller"],
        "buckets": _WQ_BUCKETS,
    },
    {
        "name": "workqueue_work_duration_seconds",
        "type": "histogram",
        "labels": ["name", "controller"],
        "buckets": _WQ_BUCKETS,
    },
    {
        "name": "workqueue_unfinished_work_seconds",
        "type": "gauge",
        "labels": ["name", "controller"],
    },
    {
        "name": "workqueue_longest_running_processor_seconds",
        "type": "gauge",
        "labels": ["name", "controller"],
    },
    {"name": "workqueue_retries_total", "type": "counter", "labels": ["name", "controller"]},
    {
        "name": "controller_runtime_reconcile_total",
        "type": "counter",
        "labels": ["controller", "result"],
    },
    {
        "name": "controller_runtime_reconcile_errors_total",
        "type": "counter",
        "labels": ["controller"],
    },
    {
        "name": "controller_runtime_terminal_reconcile_errors_total",
        "type": "counter",
        "labels": ["controller"],
        "not_applicable": "kfed's reconcilers have no terminal (never retried) error: every "
        "failure is retried with the key's backoff",
    },
    {
        "name": "controller_runtime_reconcile_panics_total",
        "type": "counter",
        "labels": ["controller"],
        "not_applicable": "Go panics; an unexpected Python exception in a reconcile is counted "
        "as an error (controller_runtime_reconcile_errors_total) and retried",
    },
    {
        "name": "controller_runtime_reconcile_time_seconds",
        "type": "histogram",
        "labels": ["controller"],
        "buckets": _RECONCILE_BUCKETS,
    },
    {
        "name": "controller_runtime_max_concurrent_reconciles",
        "type": "gauge",
        "labels": ["controller"],
    },
    {"name": "controller_runtime_active_workers", "type": "gauge", "labels": ["controller"]},
    {
        "name": "controller_runtime_reconcile_timeouts_total",
        "type": "counter",
        "labels": ["controller"],
        "not_applicable": "kfed's reconcilers have no per-reconcile timeout (each API call has "
        "its own)",
    },
    {"name": "rest_client_requests_total", "type": "counter", "labels": ["code", "method", "host"]},
    {"name": "leader_election_master_status", "type": "gauge", "labels": ["name"]},
    {
        "name": "leader_election_slowpath_total",
        "type": "counter",
        "labels": ["name"],
        "not_applicable": "client-go's slow path (a full Lease update where a fast renewal "
        "failed); kfed's elector has one path",
    },
]


def _block(text: str, start: int) -> str:
    """From an opening parenthesis at ``start - 1`` to its match."""
    depth, i = 1, start
    while depth:
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "`":
            i = text.index("`", i + 1)
        elif c == '"':
            i = text.index('"', i + 1)
        i += 1
    return text[start : i - 1]


def _buckets(expr: str | None) -> list[float] | None:
    if expr is None:
        return None
    m = re.fullmatch(r"generateExponentialBuckets\((\d+)\)", expr.strip())
    if not m:
        raise ValueError(f"buckets I cannot read: {expr}")
    count = int(m.group(1))
    return [1.0] + [2.5 * 2**i for i in range(count - 1)]


def _registered(text: str) -> set[str]:
    names: set[str] = set()
    for fn in ("Register", "RegisterLQMetrics"):
        m = re.search(rf"func {fn}\(\) \{{", text)
        if m is None:
            continue
        body = _block(text, m.end())
        names.update(re.findall(r"(\w+),", body))
    return names


def parse(text: str) -> list[dict[str, Any]]:
    """Every registered metric vector of a ``pkg/metrics/metrics.go``."""
    registered = _registered(text)
    found = []
    for m in _DEF.finditer(text):
        if m.group("var") not in registered:
            continue
        body = _block(text, m.end())
        subsystem = re.search(r"Subsystem:\s*([\w.]+)", body)
        name = re.search(r'Name:\s*"(\w+)"', body)
        labels = re.search(r"\[\]string\{([^}]*)\}", body)
        buckets = re.search(r"Buckets:\s*([^,\n]+(?:\([^)]*\))?)", body)
        if subsystem is None or name is None or labels is None:
            raise ValueError(f"cannot read the definition of {m.group('var')}")
        kind = m.group("kind").lower()
        entry: dict[str, Any] = {
            "name": f"{SUBSYSTEMS[subsystem.group(1)]}_{name.group(1)}",
            "type": kind,
            "labels": re.findall(r'"(\w+)"', labels.group(1)),
        }
        if kind == "histogram":
            entry["buckets"] = _buckets(buckets.group(1) if buckets else None) or DEF_BUCKETS
        found.append(entry)
    return sorted(found, key=lambda e: str(e["name"]))


def build(source: Path, newest: Path, newest_version: str) -> dict[str, Any]:
    kueue = [m for m in parse(source.read_text()) if m["name"].startswith("kueue_")]
    for m in kueue:
        if m["name"] in NOT_APPLICABLE:
            m["not_applicable"] = NOT_APPLICABLE[m["name"]]
    multikueue = [m for m in parse(newest.read_text()) if m["name"].startswith("multikueue_")]
    for m in multikueue:
        m["origin"] = f"{MODULE}@{newest_version} pkg/metrics/metrics.go"
    return {
        "origin": {
            "kueue": f"{MODULE}@{VERSION} pkg/metrics/metrics.go (Register, RegisterLQMetrics; "
            "the local_queue_* metrics are behind upstream's LocalQueueMetrics feature gate)",
            "multikueue": f"{MODULE}@{newest_version} pkg/metrics/metrics.go (upstream's newest "
            "release when extracted), and the unreleased metrics named with their pull request",
            "generator": "python -m e2e.upstream_metrics",
            "replica_role": "upstream's values: leader, follower, standalone "
            "(pkg/util/roletracker)",
        },
        "kueue": kueue,
        "multikueue": multikueue + UNRELEASED,
        "controller_runtime_origin": CONTROLLER_RUNTIME_ORIGIN,
        "controller_runtime": CONTROLLER_RUNTIME,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--newest", type=Path, required=True)
    parser.add_argument("--newest-version", required=True)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    data = build(args.source, args.newest, args.newest_version)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(f"{args.out}: {len(data['kueue'])} kueue_*, {len(data['multikueue'])} multikueue_*")
    return 0


if __name__ == "__main__":
    sys.exit(main())
