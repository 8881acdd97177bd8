"""The pure parts of e2e/local/operators.py: which operators may run together, and how an
operator's webhook manifests become URL webhooks with our CA."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from e2e import binaries
from e2e.local import pki
from e2e.local.operatorcommands import WEBHOOK_PROBES, command
from e2e.local.operators import (
    JOBSET_POD_SELECTOR,
    LWS_POD_SELECTOR,
    check_names,
    crd_name,
    webhook_configurations,
)

# Shaped like JobSet's config/components/webhook/manifests.yaml (trimmed).
MANIFESTS = """
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service:
      name: webhook-service
      namespace: system
      path: /mutate-jobset-x-k8s-io-v1alpha2-jobset
  failurePolicy: Fail
  name: mjobset.kb.io
  rules:
  - apiGroups: [jobset.x-k8s.io]
    apiVersions: [v1alpha2]
    operations: [CREATE]
    resources: [jobsets]
  sideEffects: None
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}
  failurePolicy: Fail
  name: mpod.kb.io
  rules:
  - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  sideEffects: None
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service:
      name: webhook-service
      namespace: system
      path: /validate-jobset-x-k8s-io-v1alpha2-jobset
  failurePolicy: Fail
  name: vjobset.kb.io
  rules:
  - apiGroups: [jobset.x-k8s.io]
    apiVersions: [v1alpha2]
    operations: [CREATE, UPDATE]
    resources: [jobsets]
  sideEffects: None
"""


def test_webhooks_point_at_the_local_port_with_our_ca() -> None:
    ca = b"-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n"
    docs = webhook_configurations(MANIFESTS, prefix="jobset", port=4443, ca_pem=ca)
    assert [(d["kind"], d["metadata"]) for d in docs] == [
        ("MutatingWebhookConfiguration", {"name": "jobset-mutating-webhook-configuration"}),
        ("ValidatingWebhookConfiguration", {"name": "jobset-validating-webhook-configuration"}),
    ]
    hooks = {h["name"]: h for d in docs for h in d["webhooks"]}
    assert hooks["mjobset.kb.io"]["clientConfig"] == {
        "url": "https://127.0.0.1:4443/mutate-jobset-x-k8s-io-v1alpha2-jobset",
        "caBundle": base64.b64encode(ca).decode(),
    }
    assert hooks["vjobset.kb.io"]["failurePolicy"] == "Fail"
    # Only the pod webhook is narrowed to JobSet pods.
    assert hooks["mpod.kb.io"]["objectSelector"] == JOBSET_POD_SELECTOR
    assert "objectSelector" not in hooks["mjobset.kb.io"]
    assert "objectSelector" not in hooks["vjobset.kb.io"]


def test_operators_come_in_start_order_without_duplicates() -> None:
    assert check_names(["kuberay", "trainer", "jobset", "kuberay"]) == (
        "jobset",
        "trainer",
        "kuberay",
    )
    assert check_names([]) == ()


def test_unknown_operator_and_trainer_without_jobset_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown operator 'kueue'"):
        check_names(["jobset", "kueue"])
    with pytest.raises(ValueError, match="trainer needs jobset"):
        check_names(["trainer"])


def test_crd_name_from_a_controller_gen_file_name() -> None:
    path = Path("crds/trainer.kubeflow.org_clustertrainingruntimes.yaml")
    assert crd_name(path) == "crd/clustertrainingruntimes.trainer.kubeflow.org"


def test_lws_pod_webhooks_see_only_leaderworkerset_pods() -> None:
    manifests = MANIFESTS.replace("jobset", "leaderworkerset")
    docs = webhook_configurations(manifests, prefix="lws", port=4443, ca_pem=b"PEM")
    assert [d["metadata"]["name"] for d in docs] == [
        "lws-mutating-webhook-configuration",
        "lws-validating-webhook-configuration",
    ]
    hooks = {h["name"]: h for d in docs for h in d["webhooks"]}
    assert hooks["mpod.kb.io"]["objectSelector"] == LWS_POD_SELECTOR


def test_lws_runs_with_its_certificates_ours_and_no_leader_election(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(binaries, "operator_path", lambda name, versions=None: Path(f"/bin/{name}"))
    serving = pki.CertificateAuthority("test-ca").issue("webhooks", server_hosts=("127.0.0.1",))
    argv, env = command(
        "lws",
        kubeconfig=tmp_path / "kubeconfig",
        home=tmp_path / "lws",
        versions="pinned",
        serving=serving,
        health=1001,
        metrics=1002,
        webhook=1003,
    )
    config_file = tmp_path / "lws" / "config.yaml"
    assert argv == [
        "/bin/lws",
        f"--kubeconfig={tmp_path / 'kubeconfig'}",
        f"--config={config_file}",
        "--zap-encoder=console",
    ]
    assert env is None
    config = yaml.safe_load(config_file.read_text())
    certs = tmp_path / "lws" / "certs"
    assert config == {
        "apiVersion": "config.lws.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"port": 1003, "host": "127.0.0.1", "certDir": str(certs)},
        "metrics": {"bindAddress": "127.0.0.1:1002"},
        "health": {"healthProbeBindAddress": "127.0.0.1:1001"},
    }
    assert (certs / "tls.crt").read_bytes() == serving.cert_pem
    assert "lws" in WEBHOOK_PROBES
