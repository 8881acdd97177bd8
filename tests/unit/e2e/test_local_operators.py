"""The pure parts of e2e/local/operators.py: which operators may run together, and how an
operator's webhook manifests become URL webhooks with our CA."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest
import yaml
from tenacity import wait_none

from e2e import binaries
from e2e.local import operators, pki
from e2e.local.errors import KubectlError
from e2e.local.operatorcommands import (
    APPWRAPPER_CONFIG,
    APPWRAPPER_NAMESPACE,
    WEBHOOK_PROBES,
    appwrapper_objects,
    command,
)
from e2e.local.operators import (
    JOBSET_POD_SELECTOR,
    LWS_POD_SELECTOR,
    WITHOUT_WEBHOOKS,
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


def test_appwrapper_runs_from_its_configmap_without_webhooks_or_leader_election(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(binaries, "operator_path", lambda name, versions=None: Path(f"/bin/{name}"))
    serving = pki.CertificateAuthority("test-ca").issue("webhooks", server_hosts=("127.0.0.1",))
    kubeconfig = tmp_path / "kubeconfig"
    argv, env = command(
        "appwrapper",
        kubeconfig=kubeconfig,
        home=tmp_path / "appwrapper",
        versions="pinned",
        serving=serving,
        health=1001,
        metrics=1002,
        webhook=1003,
    )
    assert argv == [
        "/bin/appwrapper",
        f"--kubeconfig={kubeconfig}",
        f"--config={APPWRAPPER_CONFIG}",
        "--zap-encoder=console",
    ]
    assert env == {"NAMESPACE": APPWRAPPER_NAMESPACE, "KUBECONFIG": str(kubeconfig)}
    namespace, config_map = appwrapper_objects(1001)
    assert namespace["metadata"] == {"name": APPWRAPPER_NAMESPACE}
    assert config_map["metadata"] == {"name": APPWRAPPER_CONFIG, "namespace": APPWRAPPER_NAMESPACE}
    [(key, text)] = config_map["data"].items()  # the operator refuses more than one key
    assert key == "config.yaml"
    assert yaml.safe_load(text) == {
        "controllerManager": {
            "health": {"bindAddress": "127.0.0.1:1001"},
            "metrics": {"bindAddress": "0"},
            "leaderElection": False,
        },
        "webhooksEnabled": False,
        "appwrapper": {
            "userRBACAdmissionCheck": False,
            "autopilot": {"injectAntiAffinities": False, "monitorNodes": False},
        },
    }
    assert "appwrapper" in WITHOUT_WEBHOOKS and "appwrapper" not in WEBHOOK_PROBES


class ApplyRecorder:
    """A LocalCluster's kubectl, as apply_crd_directories calls it: each apply answers with
    the next of ``answers`` (an error's stderr, or None for success); every wait succeeds."""

    name = "worker-1"

    def __init__(self, *answers: str | None) -> None:
        self.answers = list(answers)
        self.applies = 0

    def kubectl(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        if args[0] != "apply":
            return subprocess.CompletedProcess(["kubectl", *args], 0, "", "")
        self.applies += 1
        stderr = self.answers.pop(0)
        result = subprocess.CompletedProcess(["kubectl", "--kubeconfig=k", *args], 0, "", "")
        if stderr is not None:
            result.returncode, result.stderr = 1, stderr
            raise KubectlError(result)
        return result


SERVER_TIMEOUT = (
    "Error from server (Timeout): Timeout: request did not complete within requested timeout"
    " - context deadline exceeded"
)


def test_a_crd_apply_the_api_server_timed_out_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(operators, "wait_random_exponential", lambda **_: wait_none())
    crd = tmp_path / "crds" / "jobset.x-k8s.io_jobsets.yaml"
    crd.parent.mkdir()
    crd.write_text("kind: CustomResourceDefinition\n")
    cluster = ApplyRecorder(SERVER_TIMEOUT, SERVER_TIMEOUT, None)
    operators.apply_crd_directories(cluster, [crd.parent])  # type: ignore[arg-type]
    assert cluster.applies == 3


def test_a_crd_apply_that_fails_otherwise_fails_at_once(tmp_path: Path) -> None:
    crd = tmp_path / "jobset.x-k8s.io_jobsets.yaml"
    crd.write_text("kind: CustomResourceDefinition\n")
    cluster = ApplyRecorder('error: the path "x" does not exist')
    with pytest.raises(KubectlError, match="does not exist"):
        operators.apply_crd_directories(cluster, [crd])  # type: ignore[arg-type]
    assert cluster.applies == 1


def test_a_crd_apply_timing_out_every_time_gives_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(operators, "wait_random_exponential", lambda **_: wait_none())
    crd = tmp_path / "jobset.x-k8s.io_jobsets.yaml"
    crd.write_text("kind: CustomResourceDefinition\n")
    cluster = ApplyRecorder(*[SERVER_TIMEOUT] * operators.CRD_APPLY_ATTEMPTS)
    with pytest.raises(KubectlError, match="request did not complete"):
        operators.apply_crd_directories(cluster, [crd])  # type: ignore[arg-type]
    assert cluster.applies == operators.CRD_APPLY_ATTEMPTS
