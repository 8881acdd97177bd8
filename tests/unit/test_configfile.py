"""The manager's configuration file (``manager/configfile.py``): Kueue's Configuration where
the meaning is the same, kfed's own settings beside them, flags win, and a wrong key or value
is a clear error at start-up."""

from __future__ import annotations

from pathlib import Path

import pytest

from manager import main as manager_main
from manager.federation.settings import DispatchMode, FailoverPolicy

KUBECONFIG = ["--kubeconfig", "/dev/null"]

KUEUE = """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kfed-system
leaderElection: {leaderElect: true, leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 2s}
clientConnection: {qps: 50, burst: 100}
integrations: {frameworks: [batch/job, jobset.x-k8s.io/jobset]}
multiKueue:
  gcInterval: 2m
  origin: team-a
  workerLostTimeout: 15m
  dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-incremental
resources:
  deviceClassMappings: [{name: example.com/gpu, deviceClassNames: [gpu.example.com]}]
fairSharing: {enable: true}
kfed: {failoverPolicy: fast, admissionTimeout: 45s}
"""


def parse(tmp_path: Path, text: str, *flags: str) -> object:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return manager_main.parse_args([*KUBECONFIG, "--config", str(path), *flags])


def test_a_kueue_configuration_sets_what_means_the_same(tmp_path: Path) -> None:
    args = parse(tmp_path, KUEUE)
    settings = manager_main.settings_from(args)  # type: ignore[arg-type]
    assert settings.namespace == "kfed-system"
    assert settings.origin == "team-a"
    assert settings.gc_interval == 120.0
    assert settings.worker_lost_timeout == 900.0
    assert settings.dispatch_mode is DispatchMode.INCREMENTAL
    assert settings.failover_policy is FailoverPolicy.FAST
    assert settings.admission_timeout == 45.0
    assert (args.leader_lease_duration, args.leader_renew_deadline) == (15.0, 10.0)  # type: ignore[attr-defined]
    controllers = args.controller_settings  # type: ignore[attr-defined]
    assert controllers.fair_sharing is not None
    assert "jobset.x-k8s.io/jobset" in controllers.integrations
    assert controllers.device_class_mappings is not None
    assert args.config_warnings == [  # type: ignore[attr-defined]
        f"--config {tmp_path / 'config.yaml'}: clientConnection: Kueue's setting has no "
        "equivalent in kfed; ignored"
    ]


def test_flags_win_over_the_file(tmp_path: Path) -> None:
    args = parse(tmp_path, KUEUE, "--origin", "from-flag", "--failover-policy", "at-most-once")
    settings = manager_main.settings_from(args)  # type: ignore[arg-type]
    assert settings.origin == "from-flag"
    assert settings.failover_policy is FailoverPolicy.AT_MOST_ONCE
    assert settings.gc_interval == 120.0  # still the file's


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("apiVersion: v1\nkind: ConfigMap\n", "expected apiVersion config.kueue.x-k8s.io"),
        (KUEUE + "multikueue: {}\n", "unknown key 'multikueue'"),
        (KUEUE.replace("gcInterval: 2m", "gcInteval: 2m"), "unknown key 'multiKueue.gcInteval'"),
        (KUEUE.replace("failoverPolicy: fast", "failoverPolicy: never"), "failover-policy"),
        (KUEUE.replace("gcInterval: 2m", "gcInterval: soon"), "multiKueue.gcInterval"),
        (KUEUE.replace("admissionTimeout: 45s", "admisionTimeout: 45s"), "kfed.admisionTimeout"),
        (KUEUE.replace("enable: true", "enable: yes please"), "fairSharing.enable"),
        ("[", "not YAML"),
    ],
    ids=[
        "not a Configuration",
        "unknown section",
        "misspelt upstream key",
        "wrong value of kfed's own",
        "not a duration",
        "misspelt kfed key",
        "not a boolean",
        "not YAML",
    ],
)
def test_a_wrong_key_or_value_is_a_clear_error(
    tmp_path: Path, text: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        parse(tmp_path, text)
    assert ended.value.code == 2
    assert says in capsys.readouterr().err
