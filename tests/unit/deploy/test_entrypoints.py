"""The two entry points in a Pod: without --kubeconfig they use the Pod's ServiceAccount;
outside a Pod that is a clear usage error; the webhook's certificate and registration
choices cannot be combined in ways that contradict each other."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import pytest

from manager import main as manager_main
from manager.kube.api import InClusterConfigError, KubeApi, running_in_cluster
from worker_shim import main as shim_main

Parse = Callable[[list[str] | None], argparse.Namespace]
PARSERS: list[Parse] = [manager_main.parse_args, shim_main.parse_args]


@pytest.fixture
def in_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")


@pytest.fixture
def outside_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


@pytest.mark.usefixtures("in_a_pod")
@pytest.mark.parametrize("parse", PARSERS)
def test_in_a_pod_no_kubeconfig_means_the_service_account(parse: Parse) -> None:
    assert parse([]).kubeconfig is None


@pytest.mark.usefixtures("outside_a_pod")
@pytest.mark.parametrize("parse", PARSERS)
def test_outside_a_pod_a_kubeconfig_is_required(
    parse: Parse, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse([])

    assert exit_.value.code == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .endswith("--kubeconfig is required outside a Pod (KUBERNETES_SERVICE_HOST is not set)")
    )


@pytest.mark.usefixtures("outside_a_pod")
def test_a_kubeconfig_works_anywhere(tmp_path: Path) -> None:
    assert manager_main.parse_args(["--kubeconfig", str(tmp_path)]).kubeconfig == str(tmp_path)


@pytest.mark.usefixtures("in_a_pod")
def test_the_in_cluster_webhook_flags() -> None:
    args = manager_main.parse_args(
        ["--webhook-cert-secret", "kfed-manager-webhook-cert", "--webhook-service", "kfed-manager"]
    )

    assert args.webhook_cert_secret == "kfed-manager-webhook-cert"
    assert args.webhook_service == "kfed-manager"
    assert args.webhook_service_port == 443


@pytest.mark.usefixtures("in_a_pod")
@pytest.mark.parametrize(
    "flags",
    [
        ["--webhook-cert-dir", "/certs", "--webhook-cert-secret", "s"],
        ["--register-webhook-host", "127.0.0.1", "--webhook-service", "kfed-manager"],
    ],
)
def test_contradicting_webhook_flags_are_refused(
    flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        manager_main.parse_args(flags)

    assert "not allowed with argument" in capsys.readouterr().err


def test_running_in_cluster_reads_the_kubelet_variable() -> None:
    assert running_in_cluster({"KUBERNETES_SERVICE_HOST": "10.96.0.1"})
    assert not running_in_cluster({"KUBERNETES_SERVICE_HOST": ""})
    assert not running_in_cluster({})


async def test_in_cluster_loading_without_a_mounted_account_says_what_is_missing(
    tmp_path: Path,
) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}

    with pytest.raises(InClusterConfigError, match="Service token file does not exist"):
        await KubeApi.from_in_cluster(
            token_file=tmp_path / "token", ca_file=tmp_path / "ca.crt", environ=env
        )
    with pytest.raises(InClusterConfigError, match="Service host/port is not set"):
        await KubeApi.from_in_cluster(environ={})
