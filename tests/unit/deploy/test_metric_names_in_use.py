"""Every metric name an expression of deploy/ uses (the Grafana dashboard's panels, the
PrometheusRules' alerts) is one kfed serves: the names are read from the exposition of the
registry a kfed process builds (``Metrics.for_process()``: every family is listed, with or
without samples), histograms with their ``_bucket``, ``_sum`` and ``_count`` series and
counters with ``_total``, as Prometheus stores them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from manager.telemetry.metrics import Metrics

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
DASHBOARD = DEPLOY / "observability" / "grafana" / "kfed-dashboard.json"
RULES = sorted(DEPLOY.glob("*/components/prometheus/prometheusrule.yaml"))

FROM_KUBE_STATE_METRICS = {"kube_pod_container_resource_limits"}
"""What the memory alerts compare kfed's RSS with: the container's limit, as kube-state-metrics
(part of kube-prometheus-stack, which the PrometheusRules are labelled for) serves it; no
kfed process can serve it."""

KEYWORDS = {
    *("and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right"),
    *("bool", "offset", "atan2", "inf", "nan"),
}
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(
    r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.IGNORECASE
)
_VARIABLES = re.compile(r"\$\{[^}]*\}|\$\w+")
_IDENTIFIER = re.compile(r"(?<![\w:.])([A-Za-z_:][\w:]*)(?![\w:])(?!\s*\()")


def metric_names(expr: str) -> set[str]:
    """The metric names of a PromQL expression: what is left once strings, label matchers,
    range and subquery brackets, grouping label lists, Grafana variables, function calls,
    keywords, numbers and durations are taken out."""
    text = _VARIABLES.sub(" ", _STRINGS.sub(" ", expr))
    text = _RANGES.sub(" ", _MATCHERS.sub(" ", text))
    text = _GROUPING.sub(" ", text)
    return {n for n in _IDENTIFIER.findall(text) if n.lower() not in KEYWORDS}


def served_names() -> set[str]:
    body, _ = Metrics.for_process().exposition()
    names: set[str] = set()
    for family in text_string_to_metric_families(body.decode()):
        if family.type == "counter":
            names.add(family.name + "_total")
        elif family.type == "histogram":
            names |= {family.name + s for s in ("_bucket", "_sum", "_count")}
        else:
            names.add(family.name)
    return names


def dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", []) if "expr" in t]


def rule_expressions() -> list[tuple[str, str]]:
    found = []
    for path in RULES:
        (rule,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
        for group in rule["spec"]["groups"]:
            for item in group["rules"]:
                found.append((item.get("alert") or item["record"], str(item["expr"])))
    return found


def test_the_name_extraction_keeps_metrics_and_drops_the_rest() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (cluster, le) (rate(kfed_dispatch_latency_seconds_bucket"
        '{cluster=~"$cluster", job!="x"}[$__rate_interval]))) > 5 and on (cluster) '
        "kfed_cluster_active offset 5m unless ignoring(state) (max(kfed_leader) or vector(0)) < 1"
        " - time() <= 6 * 3600"
    )

    assert metric_names(expr) == {
        "kfed_dispatch_latency_seconds_bucket",
        "kfed_cluster_active",
        "kfed_leader",
    }


def test_served_names_include_the_series_prometheus_stores() -> None:
    served = served_names()

    assert {"kfed_failovers_total", "kfed_dispatch_latency_seconds_bucket"} <= served
    assert {"kueue_pending_workloads", "workqueue_depth", "kfed_shim_fenced"} <= served
    assert "kfed_failovers" not in served, "counters are stored with _total"


def test_every_metric_the_dashboard_uses_is_served() -> None:
    served = served_names()
    expressions = dashboard_expressions()
    assert len(expressions) >= 10

    missing = {(name, expr) for expr in expressions for name in metric_names(expr) - served}

    assert not missing, "\n".join(f"{name} in {expr}" for name, expr in sorted(missing))


@pytest.mark.parametrize("alert,expr", rule_expressions(), ids=lambda v: str(v)[:40])
def test_every_metric_an_alert_uses_is_served(alert: str, expr: str) -> None:
    names = metric_names(expr)

    assert names, f"{alert}: no metric in {expr}"
    assert names - FROM_KUBE_STATE_METRICS, f"{alert}: no metric of kfed's in {expr}"
    not_served = names - served_names() - FROM_KUBE_STATE_METRICS
    assert not not_served, f"{alert}: not served: {sorted(not_served)}"
