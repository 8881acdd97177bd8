"""Where the manager's servers listen unless told: every interface in a Pod (deploy/), loopback
anywhere else (a manager run by hand, the demo, the test bed) — the Job webhook and the
aggregated visibility API as the observability port (docs/security.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml

from manager import main as manager_main

REPO = Path(__file__).resolve().parents[3]
KUBECONFIG = ["--kubeconfig", "/dev/null"]


@pytest.fixture
def in_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")


@pytest.fixture
def outside_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


def visibility_host(args: argparse.Namespace) -> str:
    """As ``run`` picks it: its own flag, else the webhook's."""
    return str(args.visibility_host or args.webhook_host)


@pytest.mark.usefixtures("outside_a_pod")
def test_outside_a_pod_the_webhook_and_visibility_listen_on_loopback() -> None:
    args = manager_main.parse_args(KUBECONFIG)

    assert args.webhook_host == "127.0.0.1"
    assert visibility_host(args) == "127.0.0.1"
    assert args.metrics_host == "127.0.0.1"


@pytest.mark.usefixtures("in_a_pod")
def test_in_a_pod_they_listen_on_every_interface() -> None:
    args = manager_main.parse_args([])

    assert args.webhook_host == "0.0.0.0"
    assert visibility_host(args) == "0.0.0.0"


@pytest.mark.usefixtures("outside_a_pod")
def test_the_flags_win() -> None:
    args = manager_main.parse_args(
        [*KUBECONFIG, "--webhook-host", "0.0.0.0", "--visibility-host", "10.0.0.7"]
    )

    assert args.webhook_host == "0.0.0.0"
    assert visibility_host(args) == "10.0.0.7"
    assert visibility_host(manager_main.parse_args([*KUBECONFIG, "--webhook-host", "::"])) == "::"


@pytest.mark.usefixtures("outside_a_pod")
@pytest.mark.parametrize("register", ["127.0.0.1", "localhost", "::1"])
def test_a_webhook_registered_at_loopback_listens_there(register: str) -> None:
    args = manager_main.parse_args([*KUBECONFIG, "--register-webhook-host", register])

    assert args.webhook_host == "127.0.0.1"


@pytest.mark.usefixtures("outside_a_pod")
def test_a_webhook_registered_elsewhere_needs_its_listening_address(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # kube-apiserver would dial 10.0.0.5 while the webhook listens on loopback: every queued
    # Job refused (failurePolicy Fail). Say so at start instead.
    with pytest.raises(SystemExit) as exit_:
        manager_main.parse_args([*KUBECONFIG, "--register-webhook-host", "10.0.0.5"])

    assert exit_.value.code == 2
    assert "--register-webhook-host 10.0.0.5 is not a loopback address" in capsys.readouterr().err
    args = manager_main.parse_args(
        [*KUBECONFIG, "--register-webhook-host", "10.0.0.5", "--webhook-host", "10.0.0.5"]
    )
    assert args.webhook_host == "10.0.0.5"


@pytest.mark.usefixtures("in_a_pod")
def test_deploys_manager_listens_where_kube_apiserver_and_the_kubelet_reach_it() -> None:
    deployment = yaml.safe_load((REPO / "deploy/manager/base/deployment.yaml").read_text())
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args = manager_main.parse_args(container["args"])

    assert args.webhook_host == "0.0.0.0"  # the Service's port 443 -> the Pod's 9443
    assert visibility_host(args) == "0.0.0.0"  # the APIService -> the Pod's 8082
    assert args.metrics_host == "0.0.0.0"  # the kubelet's probes, Prometheus
