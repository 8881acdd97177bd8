"""Upstream Kueue's own configuration files, given to the manager's ``--config`` as they are
(issue 44, item 6): each starts the manager; every Kueue key kfed does not act on is named,
by its dotted path, in a warning; ``multiKueue.incrementalDispatcherConfig.stepSize`` is the
incremental dispatcher's step; and a key that is no Kueue key, or a value Kueue would refuse,
still stops it with an error naming the key.

The files are in tests/data/upstream-config/, each with a header saying where it came from:
config/components/manager/controller_manager_config.yaml at v0.17.0, v0.18.6 and v0.19.2 (the
file upstream's manifests and Helm chart start from), the MultiKueue manager's configuration
of upstream's v0.19.2 end-to-end tests (tls, featureGates, a v1beta2 fairSharing), and a
v1beta1 file of upstream's v0.17.0 end-to-end tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from manager import main as manager_main
from manager.federation.settings import DispatchMode

DATA = Path(__file__).resolve().parents[1] / "data" / "upstream-config"
RELEASES = ("v0.17.0", "v0.18.6", "v0.19.2")

NOT_FEDERATED = "ray.io/rayservice"
KFED_ALL = (
    "batch/job, jobset.x-k8s.io/jobset, ray.io/raycluster, ray.io/rayjob, "
    "trainer.kubeflow.org/trainjob, "
    "kubeflow.org/pytorchjob, kubeflow.org/mpijob, kubeflow.org/tfjob, kubeflow.org/xgboostjob, "
    "kubeflow.org/paddlejob, kubeflow.org/jaxjob, leaderworkerset.x-k8s.io/leaderworkerset, "
    "workload.codeflare.dev/appwrapper, statefulset, deployment, pod"
)
RELEASE_FILE_WARNS = [
    "health.healthProbeBindAddress",
    "metrics.bindAddress",
    "webhook.port",
    "leaderElection.resourceName",
    "controller.groupKindConcurrency",
    "integrations.frameworks",
]
SERVING_KINDS = ",pod,deployment,statefulset,leaderworkerset.x-k8s.io/leaderworkerset"
KFED_KINDS_BEFORE_V019 = (
    "batch/job,kubeflow.org/mpijob,ray.io/rayjob,ray.io/raycluster,jobset.x-k8s.io/jobset,"
    "kubeflow.org/paddlejob,kubeflow.org/pytorchjob,kubeflow.org/tfjob,kubeflow.org/xgboostjob,"
    "kubeflow.org/jaxjob,workload.codeflare.dev/appwrapper,trainer.kubeflow.org/trainjob"
    + SERVING_KINDS
)
KFED_KINDS_V019 = (  # v0.19.2's file leaves the Kubeflow training operators' jobs out
    "batch/job,kubeflow.org/mpijob,ray.io/rayjob,ray.io/raycluster,jobset.x-k8s.io/jobset,"
    "workload.codeflare.dev/appwrapper,trainer.kubeflow.org/trainjob" + SERVING_KINDS
)


def upstream(name: str) -> Path:
    return DATA / name


def release_file(release: str) -> Path:
    return upstream(f"{release}-controller_manager_config.yaml")


def start(config: Path, *flags: str) -> object:
    """The manager's arguments with ``--config config``, as its start-up reads them."""
    return manager_main.parse_args(["--kubeconfig", "/dev/null", "--config", str(config), *flags])


def warned(args: object, config: Path) -> list[str]:
    """The dotted path each warning of the start-up leads with, in order."""
    prefix = f"--config {config}: "
    warnings: list[str] = args.config_warnings  # type: ignore[attr-defined]
    assert all(w.startswith(prefix) for w in warnings), warnings
    return [w.removeprefix(prefix).split(": ", 1)[0] for w in warnings]


def warning_of(args: object, path: str) -> str:
    (line,) = [w for w in args.config_warnings if f": {path}: " in w]  # type: ignore[attr-defined]
    return str(line)


@pytest.mark.parametrize(
    ("release", "not_federated", "kept", "qps", "burst"),
    [
        ("v0.17.0", NOT_FEDERATED, KFED_KINDS_BEFORE_V019, 50.0, 100),
        ("v0.18.6", NOT_FEDERATED, KFED_KINDS_BEFORE_V019, 50.0, 100),
        ("v0.19.2", NOT_FEDERATED, KFED_KINDS_V019, 300.0, 500),
    ],
    ids=RELEASES,
)
def test_upstreams_example_configuration_starts_the_manager_naming_what_kfed_ignores(
    release: str, not_federated: str, kept: str, qps: float, burst: int
) -> None:
    config = release_file(release)
    args = start(config)
    assert warned(args, config) == RELEASE_FILE_WARNS
    assert warning_of(args, "integrations.frameworks").endswith(
        f"integrations.frameworks: {not_federated}: Kueue integrations kfed does not federate; "
        f"ignored (kfed's: {KFED_ALL})"
    )
    assert warning_of(args, "webhook.port").endswith(
        "webhook.port: Kueue's setting has no equivalent in kfed; ignored"
    )
    # what kfed acts on is taken
    assert (args.kube_api_qps, args.kube_api_burst) == (qps, burst)  # type: ignore[attr-defined]
    assert args.integrations == kept  # type: ignore[attr-defined]
    controllers = args.controller_settings  # type: ignore[attr-defined]
    assert controllers.integrations == tuple(kept.split(","))
    assert controllers.fair_sharing is None  # the file leaves fairSharing out (commented)


def test_upstreams_multikueue_manager_configuration_starts_the_manager() -> None:
    """v1beta2's fairSharing is on by being there (it has no `enable`); tls is Kueue's alone,
    its one feature gate (manager quota automation) is kfed's too."""
    config = upstream("v0.19.2-e2e-multikueue-baseline.yaml")
    args = start(config)
    assert warned(args, config) == [
        "metrics.enableClusterQueueResources",
        "controller.groupKindConcurrency",
        "tls.minVersion",
        "tls.cipherSuites",
    ]  # every framework it names (pod, deployment, statefulset) is kfed's too
    # featureGates.MultiKueueManagerQuotaAutomation: true is acted on (docs/federation.md).
    assert args.manager_quota_automation is True  # type: ignore[attr-defined]
    controllers = args.controller_settings  # type: ignore[attr-defined]
    assert controllers.fair_sharing is not None
    assert [s.value for s in controllers.fair_sharing.preemption_strategies] == [
        "LessThanOrEqualToFinalShare",
        "LessThanInitialShare",
    ]
    assert controllers.integrations == ("batch/job", "pod", "deployment", "statefulset")


def test_an_upstream_v1beta1_configuration_starts_the_manager() -> None:
    config = upstream("v0.17.0-e2e-certmanager-v1beta1.yaml")
    args = start(config)
    assert warned(args, config) == [
        "metrics.enableClusterQueueResources",
        "controller.groupKindConcurrency",
        "waitForPodsReady.enable",
        "internalCertManagement.enable",
    ]
    assert args.controller_settings.fair_sharing is None  # type: ignore[attr-defined]
    assert args.kube_api_burst == 100  # type: ignore[attr-defined]


DOCUMENTED = """
multiKueue:
  dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-incremental
  incrementalDispatcherConfig:
    stepSize: 1
resources:
  excludeResourcePrefixes: []
  quotaCheckStrategy: BlockUndeclared
admissionFairSharing:
  usageHalfLifeTime: 168h
  usageSamplingInterval: 5m
  resourceWeights: {cpu: 2.0, memory: 1.0}
visibilityServer: {bindAddress: 0.0.0.0, bindPort: 8082}
tls:
  minVersion: VersionTLS12
  cipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]
  curvePreferences: [29, 23]
waitForPodsReady:
  timeout: 5m
  recoveryTimeout: 3m
  blockAdmission: false
  requeuingStrategy: {timestamp: Eviction, backoffLimitCount: null, backoffBaseSeconds: 60}
manageJobsWithoutQueueName: true
managedJobsNamespaceSelector:
  matchExpressions:
  - {key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, kueue-system]}
internalCertManagement: {enable: false, webhookServiceName: "", webhookSecretName: ""}
objectRetentionPolicies: {workloads: {afterFinished: null, afterDeactivatedByKueue: null}}
pprofBindAddress: :8083
"""
"""Settings upstream documents beside its example file (its commented-out lines, the
MultiKueue and admission fair sharing pages of its site, the v1beta2 reference): each key of
the issue's list is here."""

DOCUMENTED_WARNS = [
    "resources.excludeResourcePrefixes",
    "resources.quotaCheckStrategy",
    "admissionFairSharing.usageHalfLifeTime",
    "admissionFairSharing.usageSamplingInterval",
    "admissionFairSharing.resourceWeights",
    "visibilityServer.bindAddress",
    "visibilityServer.bindPort",
    "tls.minVersion",
    "tls.cipherSuites",
    "tls.curvePreferences",
    "waitForPodsReady.timeout",
    "waitForPodsReady.recoveryTimeout",
    "waitForPodsReady.blockAdmission",
    "waitForPodsReady.requeuingStrategy.timestamp",
    "waitForPodsReady.requeuingStrategy.backoffBaseSeconds",
    "manageJobsWithoutQueueName",
    "managedJobsNamespaceSelector.matchExpressions",
    "internalCertManagement.enable",
    "internalCertManagement.webhookServiceName",
    "internalCertManagement.webhookSecretName",
    "pprofBindAddress",
]


def with_documented(tmp_path: Path, release: str, extra: str = DOCUMENTED) -> Path:
    """Upstream's example file of ``release`` with ``extra``'s keys added (none of which it
    sets already: it has them commented out)."""
    text = release_file(release).read_text()
    assert not set(yaml.safe_load(text)) & set(yaml.safe_load(extra))
    config = tmp_path / f"{release}-documented.yaml"
    config.write_text(text + extra)
    return config


@pytest.mark.parametrize("release", RELEASES)
def test_upstreams_example_with_its_documented_settings_starts_the_manager(
    tmp_path: Path, release: str
) -> None:
    config = with_documented(tmp_path, release)
    args = start(config)
    assert warned(args, config) == RELEASE_FILE_WARNS + DOCUMENTED_WARNS
    assert warning_of(args, "resources.quotaCheckStrategy").endswith(
        "resources.quotaCheckStrategy: Kueue's setting has no equivalent in kfed; ignored"
    )
    settings = manager_main.settings_from(args)  # type: ignore[arg-type]
    assert settings.dispatch_mode is DispatchMode.INCREMENTAL
    assert settings.incremental_step == 1


def test_the_incremental_step_of_the_file_yields_to_the_flag(tmp_path: Path) -> None:
    args = start(with_documented(tmp_path, "v0.19.2"), "--incremental-step", "4")
    assert manager_main.settings_from(args).incremental_step == 4  # type: ignore[arg-type]


def test_the_incremental_step_is_ignored_as_upstream_ignores_it_with_its_gate_off(
    tmp_path: Path,
) -> None:
    gate = "featureGates: {MultiKueueIncrementalDispatcherConfig: false}\n"
    args = start(with_documented(tmp_path, "v0.19.2", DOCUMENTED + gate))
    assert manager_main.settings_from(args).incremental_step == 3  # type: ignore[arg-type]
    assert warning_of(args, "multiKueue.incrementalDispatcherConfig.stepSize").endswith(
        "multiKueue.incrementalDispatcherConfig.stepSize: ignored, as Kueue ignores it with "
        "featureGates.MultiKueueIncrementalDispatcherConfig false"
    )


def test_fair_sharing_is_on_in_a_v1beta2_file_by_being_there(tmp_path: Path) -> None:
    """As upstream's v1beta2 has it; ``enable: false`` (v1beta1's key, which kfed's own
    documentation showed in v1beta2 files) still turns it off."""
    config = tmp_path / "config.yaml"
    head = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
    config.write_text(head + "fairSharing: {preemptionStrategies: [LessThanInitialShare]}\n")
    fair_sharing = start(config).controller_settings.fair_sharing  # type: ignore[attr-defined]
    assert [s.value for s in fair_sharing.preemption_strategies] == ["LessThanInitialShare"]
    config.write_text(head + "fairSharing: {}\n")
    assert start(config).controller_settings.fair_sharing is not None  # type: ignore[attr-defined]
    config.write_text(
        head + "fairSharing: {enable: false, preemptionStrategies: [LessThanInitialShare]}\n"
    )
    assert start(config).controller_settings.fair_sharing is None  # type: ignore[attr-defined]


def changed(tmp_path: Path, old: str, new: str) -> Path:
    """v0.19.2's example with its documented settings, ``old`` (once in it) made ``new``:
    in the settings added to it where ``old`` is one of theirs, else in upstream's text."""
    if old in DOCUMENTED:
        assert DOCUMENTED.count(old) == 1
        return with_documented(tmp_path, "v0.19.2", DOCUMENTED.replace(old, new))
    config = with_documented(tmp_path, "v0.19.2")
    text = config.read_text()
    assert text.count(old) == 1
    config.write_text(text.replace(old, new))
    return config


def refused(config: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """The usage error the manager stops with at start-up on ``config``."""
    with pytest.raises(SystemExit) as ended:
        start(config)
    assert ended.value.code == 2
    return capsys.readouterr().err


V1BETA1 = "v0.17.0-e2e-certmanager-v1beta1.yaml"


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (("tls:\n  minVersion", "tls:\n  minVersoin"),
         "tls.minVersoin' (known in tls: cipherSuites, curvePreferences, minVersion)"),
        (("stepSize: 1", "step: 1"), "unknown key 'multiKueue.incrementalDispatcherConfig.step'"),
        (("bindPort: 8082", "bindport: 8082"), "unknown key 'visibilityServer.bindport'"),
        (("\npprofBindAddress: :8083", "\npprofBindAdress: :8083"),
         "unknown key 'pprofBindAdress' (known: "),
        (("\nwebhook:\n  port: 9443", "\nwebhook:\n  prot: 9443"), "unknown key 'webhook.prot'"),
        (("tls:\n", "queueVisibility: {updateIntervalSeconds: 5}\ntls:\n"),
         "queueVisibility is a key of config.kueue.x-k8s.io/v1beta1, not of "
         "config.kueue.x-k8s.io/v1beta2"),
        (("timeout: 5m", "enable: true"),
         "unknown key 'waitForPodsReady.enable' (known in waitForPodsReady: blockAdmission, "
         "recoveryTimeout, requeuingStrategy, timeout); waitForPodsReady.enable is a key of "
         "config.kueue.x-k8s.io/v1beta1"),
    ],
    ids=[
        "misspelt tls key", "misspelt stepSize", "misspelt visibilityServer key",
        "misspelt top-level key", "misspelt key of a section kfed ignores",
        "a v1beta1 key in a v1beta2 file", "v1beta1's waitForPodsReady.enable in v1beta2",
    ],
)  # fmt: skip
def test_a_key_that_is_not_kueues_stops_the_manager_naming_it(
    tmp_path: Path,
    change: tuple[str, str],
    says: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = changed(tmp_path, *change)
    err = refused(config, capsys)
    assert f"--config {config}: " in err
    assert says in err


def test_a_v1beta2_key_in_a_v1beta1_file_stops_the_manager_saying_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "v1beta1.yaml"
    config.write_text(upstream(V1BETA1).read_text() + "visibilityServer: {bindPort: 8082}\n")
    err = refused(config, capsys)
    assert "unknown key 'visibilityServer' (known: admissionFairSharing, clientConnection, " in err
    assert (
        "; visibilityServer is a key of config.kueue.x-k8s.io/v1beta2, not of "
        "config.kueue.x-k8s.io/v1beta1" in err
    )


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (("stepSize: 1", "stepSize: 0"),
         "multiKueue.incrementalDispatcherConfig.stepSize: 0 is less than 1"),
        (("stepSize: 1", "stepSize: three"),
         "multiKueue.incrementalDispatcherConfig.stepSize: expected a whole number, got 'three'"),
        (("quotaCheckStrategy: BlockUndeclared", "quotaCheckStrategy: Block"),
         "resources.quotaCheckStrategy: 'Block' is not one of BlockUndeclared, IgnoreUndeclared"),
        (("minVersion: VersionTLS12", "minVersion: VersionTLS11"),
         "tls.minVersion: 'VersionTLS11' is not one of VersionTLS12, VersionTLS13"),
        (("bindPort: 8082", "bindPort: 80820"),
         "visibilityServer.bindPort: 80820 is more than 65535"),
        (("usageHalfLifeTime: 168h", "usageHalfLifeTime: 7 days"),
         "admissionFairSharing.usageHalfLifeTime: expected a duration such as 30s, 5m or 1h30m, "
         "got '7 days'"),
        (("timestamp: Eviction", "timestamp: Now"),
         "waitForPodsReady.requeuingStrategy.timestamp: 'Now' is not one of Eviction, Creation"),
        (("port: 9443", "port: '9443'"), "webhook.port: expected a whole number, got '9443'"),
        (('  - "pod"\n', '  - "kubeflow.org/mxjob"\n'),
         "integrations.frameworks[8]: 'kubeflow.org/mxjob' is not one of batch/job, "),
        (("operator: NotIn", "operator: Outside"),
         "managedJobsNamespaceSelector.matchExpressions[0].operator: 'Outside' is not one of In, "),
        (("resourceWeights: {cpu: 2.0", "resourceWeights: {cpu: lots"),
         "admissionFairSharing.resourceWeights[cpu]: expected a number, got 'lots'"),
        (("dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-incremental",
          "dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-all-at-once"),
         "multiKueue.incrementalDispatcherConfig: only valid when multiKueue.dispatcherName is "
         "kueue.x-k8s.io/multikueue-dispatcher-incremental, got "
         "'kueue.x-k8s.io/multikueue-dispatcher-all-at-once'"),
    ],
    ids=[
        "stepSize below 1", "stepSize not a number", "quotaCheckStrategy not a strategy",
        "TLS 1.1", "port out of range", "not a Go duration", "not a timestamp",
        "port as text", "not an integration", "not a selector operator",
        "weight not a number", "step without the incremental dispatcher",
    ],
)  # fmt: skip
def test_a_value_kueue_would_refuse_stops_the_manager_naming_its_key(
    tmp_path: Path,
    change: tuple[str, str],
    says: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = changed(tmp_path, *change)
    err = refused(config, capsys)
    assert f"--config {config}: {says}" in err


def test_the_unadmitted_workloads_observability_gate_turns_kfeds_switch_on(
    tmp_path: Path,
) -> None:
    """Upstream v0.19's ``UnadmittedWorkloadsObservability`` gate is kfed's
    ``--unadmitted-workloads-observability`` (finer pending reasons, the unadmitted gauges);
    every other gate is named, each on a line of its own."""
    text = (
        "apiVersion: config.kueue.x-k8s.io/v1beta2\n"
        "kind: Configuration\n"
        "featureGates: {UnadmittedWorkloadsObservability: GATE, TopologyAwareScheduling: true}\n"
    )
    for value in (True, False):
        config = tmp_path / f"gates-{value}.yaml"
        config.write_text(text.replace("GATE", str(value).lower()))
        args = start(config)
        controllers = args.controller_settings  # type: ignore[attr-defined]
        assert controllers.unadmitted_workloads_observability is value
        assert warned(args, config) == ["featureGates.TopologyAwareScheduling"]


def test_the_manager_quota_automation_gate_is_kfeds_switch(tmp_path: Path) -> None:
    """Upstream's alpha ``MultiKueueManagerQuotaAutomation`` gate is kfed's
    ``--manager-quota-automation``: on unless the file (or the flag) turns it off, since
    ``quotaManagement: Automated`` on a MultiKueueConfig already asks for it."""
    text = (
        "apiVersion: config.kueue.x-k8s.io/v1beta2\n"
        "kind: Configuration\n"
        "featureGates: {MultiKueueManagerQuotaAutomation: GATE}\n"
    )
    for value in (True, False):
        config = tmp_path / f"quota-gate-{value}.yaml"
        config.write_text(text.replace("GATE", str(value).lower()))
        args = start(config)
        assert args.manager_quota_automation is value  # type: ignore[attr-defined]
        assert warned(args, config) == []
    config = tmp_path / "no-gates.yaml"
    config.write_text("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n")
    assert start(config).manager_quota_automation is True  # type: ignore[attr-defined]
