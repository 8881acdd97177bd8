"""The manager's configuration file (``manager/configfile.py``): Kueue's Configuration where
the meaning is the same, kfed's own settings beside them, flags win, and a wrong key or value
is a clear error at start-up."""

from __future__ import annotations

from pathlib import Path

import pytest

from manager import main as manager_main
from manager.federation.settings import DispatchMode, FailoverPolicy

KUBECONFIG = ["--kubeconfig", "/dev/null"]
RAY = "ray.io/raycluster"

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
    assert (args.kube_api_qps, args.kube_api_burst) == (50.0, 100)  # type: ignore[attr-defined]
    assert args.config_warnings == []  # type: ignore[attr-defined]


def test_without_client_connection_the_client_has_no_limit(tmp_path: Path) -> None:
    args = parse(tmp_path, KUEUE.replace("clientConnection: {qps: 50, burst: 100}\n", ""))
    assert args.kube_api_qps == 0.0  # type: ignore[attr-defined]


def test_an_upstream_setting_with_no_equivalent_is_named_in_a_warning(tmp_path: Path) -> None:
    # v1beta2's waitForPodsReady is on by being there: it has no `enable` (v1beta1's)
    args = parse(tmp_path, KUEUE + "waitForPodsReady: {timeout: 5m}\n")
    assert args.config_warnings == [  # type: ignore[attr-defined]
        f"--config {tmp_path / 'config.yaml'}: waitForPodsReady.timeout: Kueue's setting has no "
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
        (KUEUE.replace("qps: 50", "qps: fast"), "clientConnection.qps"),
        (KUEUE.replace("burst: 100", "burst: 0"), "--kube-api-burst must be at least 1"),
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
        "qps not a number",
        "no burst with a qps",
        "not YAML",
    ],
)
def test_a_wrong_key_or_value_is_a_clear_error(
    tmp_path: Path, text: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert says in refused(tmp_path, text, capsys)


def refused(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> str:
    """The usage error the manager stops with on a file of ``text``."""
    with pytest.raises(SystemExit) as ended:
        parse(tmp_path, text)
    assert ended.value.code == 2
    return capsys.readouterr().err


def only_kfed(settings: str) -> str:
    """A configuration file that sets only ``kfed: {settings}``."""
    return f"apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nkfed: {{{settings}}}\n"


def own(tmp_path: Path, settings: str, *flags: str) -> object:
    """The manager's arguments from a file that sets only ``kfed: {settings}``."""
    return parse(tmp_path, only_kfed(settings), *flags)


@pytest.mark.parametrize(
    ("settings", "dest", "expected"),
    [
        ("metricsSecure: true", "metrics_secure", True),
        ("metricsSecure: false", "metrics_secure", False),
        ("topologyAwareScheduling: true, fairSharing: true", "fair_sharing", True),
        ("workerLeaseDuration: 1m30s", "lease_duration", 90.0),
        ("finishedRetention: 24h", "finished_retention", 86400.0),
        ("dispatchWorkers: 4", "dispatch_workers", 4),
        ("eventQps: 2.5", "event_qps", 2.5),
        ("failoverPolicy: fast", "failover_policy", FailoverPolicy.FAST),
        ("dispatchMode: all-at-once", "dispatch_mode", DispatchMode.ALL_AT_ONCE),
        ("logFormat: json", "log_format", "json"),
        ("integrations: [batch/job, ray.io/raycluster]", "integrations", f"batch/job,{RAY}"),
        ("integrations: batch/job", "integrations", "batch/job"),
    ],
    ids=[
        "bool true", "bool false", "two bools", "duration", "duration in hours", "int",
        "float", "enum", "enum by upstream's flag name", "choice", "list", "list as text",
    ],
)  # fmt: skip
def test_each_kind_of_kfed_setting_is_read_as_its_flag_reads_it(
    tmp_path: Path, settings: str, dest: str, expected: object
) -> None:
    assert getattr(own(tmp_path, settings), dest) == expected


def test_a_switch_from_the_file_reaches_what_it_turns_on(tmp_path: Path) -> None:
    args = own(tmp_path, "fairSharing: true, topologyAwareScheduling: true")
    controllers = args.controller_settings  # type: ignore[attr-defined]
    assert controllers.fair_sharing is not None
    assert args.topology_aware_scheduling is True  # type: ignore[attr-defined]


def test_a_switch_the_file_turns_on_is_on_whatever_the_flags(tmp_path: Path) -> None:
    # a store_true flag cannot be given "off" on the command line: the file's true stays
    assert own(tmp_path, "metricsSecure: true", "--metrics-port", "9").metrics_secure is True  # type: ignore[attr-defined]
    assert own(tmp_path, "metricsSecure: false", "--metrics-secure").metrics_secure is True  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ("metricsSecure: yes please", "kfed.metricsSecure: expected true or false"),
        ("metricsSecure: 1", "kfed.metricsSecure: expected true or false"),
        ("workerLeaseDuration: true", "kfed.workerLeaseDuration: expected a string or a number"),
        ("workerLeaseDuration: soon", "kfed.workerLeaseDuration: 'soon' is not a value of"),
        ("dispatchWorkers: 2.5", "kfed.dispatchWorkers: '2.5' is not a value of --dispatch"),
        ("failoverPolicy: twice", "kfed.failoverPolicy: 'twice' is not a value of --failover"),
        ("logFormat: xml", "kfed.logFormat: 'xml' is not one of text, json (--log-format)"),
        ("namespace: [a, b]", "kfed.namespace: expected a string or a number"),
        ("integrations: [batch/job, 3]", "kfed.integrations: expected a list of names"),
        ("config: other.yaml", "unknown key 'kfed.config'"),
    ],
    ids=[
        "bool as text", "bool as number", "duration as bool", "not a duration", "int as float",
        "enum not a member", "choice not a member", "list for a scalar", "list of not names",
        "the file names itself",
    ],
)  # fmt: skip
def test_a_wrong_kfed_value_is_an_error_naming_its_key(
    tmp_path: Path, settings: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert says in refused(tmp_path, only_kfed(settings), capsys)


def test_an_upstream_value_its_flag_refuses_is_an_error_naming_the_upstream_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = KUEUE.replace("multikueue-dispatcher-incremental", "by-lottery")
    assert (
        "multiKueue.dispatcherName: 'kueue.x-k8s.io/by-lottery' is not a value of --dispatch-mode"
        in refused(tmp_path, text, capsys)
    )
