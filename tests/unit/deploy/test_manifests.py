"""deploy/ files that must stay equal to something else, read without a cluster:

- deploy/crds: the CRDs generated from manager/api (kustomize cannot reach ../crds);
- the cert-manager overlay's webhook configuration: what the manager registers itself;
- the Grafana dashboard: only the metric names the team agreed on, one panel per question;
- the OpenTelemetry collector configuration: every pipeline part is defined, the ports
  match the Service and the manager's OTLP endpoint.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from manager.api import crdgen
from manager.federation.webhooks import webhookconfig

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"
DASHBOARD = DEPLOY / "observability" / "grafana" / "kfed-dashboard.json"
COLLECTOR = DEPLOY / "observability" / "collector"

AGREED_METRICS = {
    "kueue_pending_workloads",
    "kueue_quota_reserved_workloads_total",
    "kueue_admitted_workloads_total",
    "kueue_evicted_workloads_total",
    "kueue_finished_workloads_total",
    "kueue_quota_reserved_wait_time_seconds",
    "kueue_admission_wait_time_seconds",
    "kueue_admission_attempts_total",
    "kueue_admission_attempt_duration_seconds",
    "kueue_reserving_active_workloads",
    "kueue_admitted_active_workloads",
    "kueue_cluster_queue_status",
    "kueue_cluster_queue_resource_usage",
    "kueue_cluster_queue_nominal_quota",
    "kueue_cluster_queue_borrowing_limit",
    "multikueue_workloads_dispatched_total",
    "multikueue_workloads_admitted_total",
    "kfed_dispatch_latency_seconds",
    "kfed_failovers_total",
    "kfed_cluster_active",
    "kfed_cluster_maintenance",
    "kfed_cluster_free_capacity",
    "kfed_remote_objects_created_total",
    "kfed_leader",
    "kfed_shim_fenced",
    "kfed_shim_fencing_events_total",
}
HISTOGRAMS = {
    "kueue_quota_reserved_wait_time_seconds",
    "kueue_admission_wait_time_seconds",
    "kueue_admission_attempt_duration_seconds",
    "kfed_dispatch_latency_seconds",
}


def load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


# -- CRDs ------------------------------------------------------------------------------------


def test_the_deploy_copy_of_the_crds_is_current() -> None:
    problems = crdgen.check_dir(DEPLOY / "crds")

    assert not problems, "\n".join([*problems, "regenerate: kfed crds --out-dir deploy/crds"])


def test_the_crd_kustomization_lists_exactly_the_generated_files() -> None:
    kustomization = yaml.safe_load((DEPLOY / "crds" / "kustomization.yaml").read_text())

    assert sorted(kustomization["resources"]) == sorted(crdgen.render_all())


# -- the webhook configuration --------------------------------------------------------------


def test_the_cert_manager_webhook_configuration_is_the_one_the_manager_registers() -> None:
    (static,) = load(
        DEPLOY / "manager/components/webhook-cert-manager/mutatingwebhookconfiguration.yaml"
    )
    service = webhookconfig.ServiceReference("kueue-system", "kfed-manager")
    registered = webhookconfig.webhook_configuration(service=service, ca_bundle=b"CA")
    del registered["webhooks"][0]["clientConfig"]["caBundle"]

    annotations = static["metadata"].pop("annotations")
    assert annotations == {"cert-manager.io/inject-ca-from": "kueue-system/kfed-manager-webhook"}
    assert static == registered


def test_the_cert_manager_certificate_names_the_webhook_service() -> None:
    objects = {
        (o["kind"], o["metadata"]["name"]): o
        for o in load(DEPLOY / "manager/components/webhook-cert-manager/certificates.yaml")
    }
    serving = objects[("Certificate", "kfed-manager-webhook")]["spec"]

    assert set(serving["dnsNames"]) >= {"kfed-manager.kueue-system.svc"}
    assert serving["issuerRef"]["name"] == "kfed-webhook-ca", "the CA, not self-signed leaves"
    assert objects[("Certificate", "kfed-webhook-ca")]["spec"]["isCA"] is True


# -- the dashboard ---------------------------------------------------------------------------


def expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def test_the_dashboard_uses_only_the_agreed_metric_names() -> None:
    used = set()
    for expr in expressions():
        for name in re.findall(r"\b((?:kueue|multikueue|kfed)_[a-z_]+)", expr):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            assert base in AGREED_METRICS, f"{name} in {expr}"
            if name != base:
                assert base in HISTOGRAMS, f"{name}: {base} is not a histogram"
            used.add(base)
    assert len(used) >= 12


def test_the_dashboard_answers_the_operators_questions() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = {p["title"]: p for p in dashboard["panels"] if p["type"] != "row"}
    text = {title: " ".join(t["expr"] for t in p["targets"]) for title, p in panels.items()}

    def panel_with(*needles: str) -> None:
        assert any(all(n in e for n in needles) for e in text.values()), needles

    panel_with("kueue_pending_workloads", "cluster_queue")
    panel_with("kueue_admitted", "cluster_queue")
    p50_p99 = ("histogram_quantile(0.5", "histogram_quantile(0.99")
    panel_with(*p50_p99, "kueue_admission_wait")
    panel_with(*p50_p99, "kfed_dispatch_latency", "(le, cluster)")
    panel_with("kfed_failovers_total", "reason")
    panel_with("kfed_cluster_active")
    panel_with("kfed_cluster_free_capacity", "flavor")
    panel_with("kueue_cluster_queue_resource_usage", "kueue_cluster_queue_nominal_quota")
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert dashboard["uid"] == "kfed-overview"
    for panel in panels.values():
        assert panel["datasource"]["uid"] == "${datasource}", "the data source is chosen on import"


# -- the collector ---------------------------------------------------------------------------


def test_every_collector_pipeline_part_is_defined_and_exported_where_the_manager_sends() -> None:
    config = yaml.safe_load((COLLECTOR / "otel-collector.yaml").read_text())
    pipelines = config["service"]["pipelines"]

    for name, pipeline in pipelines.items():
        for part in ("receivers", "processors", "exporters"):
            for item in pipeline[part]:
                assert item in config[part], f"{name}: {part[:-1]} {item} is not defined"
    assert pipelines["traces"]["receivers"] == ["otlp"]
    assert config["receivers"]["otlp"]["protocols"]["http"]["endpoint"] == "0.0.0.0:4318"
    service = yaml.safe_load((COLLECTOR / "service.yaml").read_text())
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert ports["otlp-http"] == 4318

    overlay = (DEPLOY / "manager/overlays/observability/kustomization.yaml").read_text()
    assert "value: http://otel-collector.kfed-observability.svc:4318" in overlay


def test_collector_relabel_replacements_escape_the_dollar_sign() -> None:
    """The collector expands ${...} and $x in its configuration: a Prometheus ``$1`` must
    be written ``$$1`` to reach Prometheus intact."""
    text = (COLLECTOR / "otel-collector.yaml").read_text()

    assert re.findall(r"(?<!\$)\$(?=\d)", text) == []
