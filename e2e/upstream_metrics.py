"""Extract upstream Kueue's Prometheus metrics from its Go source into
``tests/data/upstream-metrics-<version>.json``: every registered metric's name, type, label
names and histogram buckets, which of them kfed does not serve, and why, and (with
``--history``) the release that added each.

    python -m e2e.upstream_metrics \\
        --source ~/go/pkg/mod/sigs.k8s.io/kueue@v0.17.0/pkg/metrics/metrics.go \\
        --newest /tmp/kueue-v0.19.2-metrics.go --newest-version v0.19.2

    python -m e2e.upstream_metrics --version v0.19.2 \\
        --source /tmp/kueue-v0.19.2-metrics.go \\
        --newest /tmp/kueue-v0.19.2-metrics.go --newest-version v0.19.2 \\
        --history v0.17.0=~/go/pkg/mod/sigs.k8s.io/kueue@v0.17.0/pkg/metrics/metrics.go \\
        --history v0.18.0=/tmp/kueue-v0.18.0-metrics.go \\
        --history v0.19.0=/tmp/kueue-v0.19.0-metrics.go

``--source`` is ``pkg/metrics/metrics.go`` of the version the file describes (``--version``,
v0.17.0 by default: the one in the Go module cache; a newer one from upstream's repository,
``git show v0.19.2:pkg/metrics/metrics.go``); ``--newest`` the same file of upstream's newest
release, read only for the ``multikueue_*`` family (v0.17.0 has none). Two MultiKueue metrics
merged upstream after that release are recorded by hand below (``UNRELEASED``), with the
pull requests they come from. ``--history VERSION=PATH`` (oldest first) gives earlier
releases' files: a ``kueue_*`` metric the oldest lacks gets ``added_in``, the first of them
(or ``--version``) that has it. The JSON is committed; the Go source is not.

A metric is taken when it is registered (by ``Register`` / ``RegisterLQMetrics``, also under a
feature gate there, which is then recorded as ``feature_gate``); its labels are the first
``[]string{...}`` after its options (custom labels, appended at run time only when
configured, are not part of it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
MODULE = "sigs.k8s.io/kueue"
VERSION = "v0.17.0"
"""The version kfed followed first, the default ``--version``."""


def out_path(version: str) -> Path:
    return DATA / f"upstream-metrics-{version}.json"


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

NOT_APPLICABLE_SINCE_V018: dict[str, str] = {
    "kueue_evicted_workloads_once_total": "'once' is decided by upstream's "
    "status.schedulingStats.evictions (counted only when a workload's first eviction of that "
    "reason and underlying cause is recorded there), which kfed does not write (docs/api.md: "
    "stored, not acted on)",
    "kueue_local_queue_admission_fair_sharing_usage": "admission fair sharing "
    "(ClusterQueue spec.admissionScope, LocalQueue status.fairSharing."
    "admissionFairSharingStatus): kfed admits in queue order and keeps no such usage "
    "(docs/api.md: stored, not acted on)",
}
"""The reasons that changed or were added with upstream v0.18 and v0.19 (v0.18 renamed the
once-counter's ``detailed_reason`` label ``underlying_cause``)."""


def not_applicable(version: str) -> dict[str, str]:
    """The not-applicable table for the metrics of upstream ``version``."""
    if _version_key(version) < _version_key("v0.18.0"):
        return dict(NOT_APPLICABLE)
    return {**NOT_APPLICABLE, **NOT_APPLICABLE_SINCE_V018}


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


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
CONTROLLER_RUNTIME_ORIGINS = {
    "v0.17.0": CONTROLLER_RUNTIME_ORIGIN,
    "v0.19.2": "sigs.k8s.io/controller-runtime@v0.24.1 (the version in kueue v0.19.2's "
    "go.mod): the same files as v0.23.3's, with the same names, types, labels and buckets "
    "(only workqueue_retries_total's help text changed); copied by hand",
}
"""Where the controller-runtime list comes from, per upstream version described."""
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
    expr = expr.strip()
    if m := re.fullmatch(r"generateExponentialBuckets\((\d+)\)", expr):
        count = int(m.group(1))
        return [1.0] + [2.5 * 2**i for i in range(count - 1)]
    if m := re.fullmatch(r"prometheus\.ExponentialBuckets\(([\d.]+),\s*([\d.]+),\s*(\d+)\)", expr):
        start, factor, count = float(m.group(1)), float(m.group(2)), int(m.group(3))
        return [round(start * factor**i, 12) for i in range(count)]
    if expr == "prometheus.DefBuckets":
        return list(DEF_BUCKETS)
    raise ValueError(f"buckets I cannot read: {expr}")


def _registered(text: str) -> dict[str, str | None]:
    """Every metric variable a ``MustRegister`` of ``Register`` or ``RegisterLQMetrics``
    names, with the feature gate an ``if features.Enabled(...)`` around that call needs
    (None: registered unconditionally)."""
    names: dict[str, str | None] = {}
    for fn in ("Register", "RegisterLQMetrics"):
        m = re.search(rf"func {fn}\(\) \{{", text)
        if m is None:
            continue
        start = m.end()
        body = _block(text, start)
        gated: list[tuple[int, int, str]] = []
        for g in re.finditer(r"if features\.Enabled\(features\.(\w+)\) \{", body):
            inner = _block(body, g.end())
            gated.append((g.end(), g.end() + len(inner), g.group(1)))
        for call in re.finditer(r"MustRegister\(", body):
            args = _block(body, call.end())
            gate = next((name for lo, hi, name in gated if lo <= call.start() < hi), None)
            for var in re.findall(r"\b(\w+)\b", args):
                names.setdefault(var, gate)
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
        buckets = re.search(r"Buckets:\s*([\w.]+(?:\([^)]*\))?)", body)
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
        if gate := registered[m.group("var")]:
            entry["feature_gate"] = gate
        found.append(entry)
    return sorted(found, key=lambda e: str(e["name"]))


def build(
    source: Path,
    newest: Path,
    newest_version: str,
    *,
    version: str = VERSION,
    history: list[tuple[str, Path]] | None = None,
) -> dict[str, Any]:
    kueue = [m for m in parse(source.read_text()) if m["name"].startswith("kueue_")]
    skipped = not_applicable(version)
    earlier = [(v, {m["name"] for m in parse(p.read_text())}) for v, p in history or []]
    for m in kueue:
        if m["name"] in skipped:
            m["not_applicable"] = skipped[m["name"]]
        if earlier and m["name"] not in earlier[0][1]:
            m["added_in"] = next((v for v, names in earlier if m["name"] in names), version)
    multikueue = [m for m in parse(newest.read_text()) if m["name"].startswith("multikueue_")]
    for m in multikueue:
        m["origin"] = f"{MODULE}@{newest_version} pkg/metrics/metrics.go"
    origin = {
        "kueue": f"{MODULE}@{version} pkg/metrics/metrics.go (Register, RegisterLQMetrics; "
        "the local_queue_* metrics are behind upstream's LocalQueueMetrics feature gate)",
    }
    if earlier:
        origin["added_in"] = (
            f"compared with {', '.join(v for v, _ in earlier)}: added_in is the first release "
            f"with the metric, of those and {version}"
        )
    return {
        "origin": {
            **origin,
            "multikueue": f"{MODULE}@{newest_version} pkg/metrics/metrics.go (upstream's newest "
            "release when extracted), and the unreleased metrics named with their pull request",
            "generator": "python -m e2e.upstream_metrics",
            "replica_role": "upstream's values: leader, follower, standalone "
            "(pkg/util/roletracker)",
        },
        "kueue": kueue,
        "multikueue": multikueue + UNRELEASED,
        "controller_runtime_origin": CONTROLLER_RUNTIME_ORIGINS[version],
        "controller_runtime": CONTROLLER_RUNTIME,
    }


def _history(value: str) -> tuple[str, Path]:
    version, _, path = value.partition("=")
    if not version or not path:
        raise argparse.ArgumentTypeError(f"expected VERSION=PATH, got {value!r}")
    return version, Path(path).expanduser()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--newest", type=Path, required=True)
    parser.add_argument("--newest-version", required=True)
    parser.add_argument("--version", default=VERSION, choices=sorted(CONTROLLER_RUNTIME_ORIGINS))
    parser.add_argument("--history", type=_history, action="append", default=[])
    parser.add_argument(
        "--out", type=Path, help="default: tests/data/upstream-metrics-VERSION.json"
    )
    args = parser.parse_args(argv)
    data = build(
        args.source, args.newest, args.newest_version, version=args.version, history=args.history
    )
    args.out = args.out or out_path(args.version)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(f"{args.out}: {len(data['kueue'])} kueue_*, {len(data['multikueue'])} multikueue_*")
    return 0


if __name__ == "__main__":
    sys.exit(main())
