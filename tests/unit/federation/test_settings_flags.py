"""Each federation setting is declared once (``FederationSettings`` with ``knobs.knob``): its
flag, default, help and Kueue Configuration key come from that declaration."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from manager import configfile
from manager import main as manager_main
from manager.api import knobs
from manager.federation.settings import DispatchMode, FailoverPolicy, FederationSettings

SET_BY_CODE = {"manager_identity"}  # --identity: the host and pid by default
KUBECONFIG = ["--kubeconfig", "/dev/null"]


def test_every_setting_has_a_flag_but_the_ones_the_code_sets() -> None:
    declared = {f.name for f, _, _ in knobs.knobs(FederationSettings)}
    every = {f.name for f in dataclasses.fields(FederationSettings)}
    assert every - declared == SET_BY_CODE


def test_the_defaults_of_the_flags_are_the_settings_defaults() -> None:
    parsed = manager_main.settings_from(manager_main.parse_args(KUBECONFIG))
    expected = dataclasses.replace(FederationSettings(), manager_identity=parsed.manager_identity)
    assert parsed == expected


def test_flags_reach_the_settings_durations_and_upstream_names_included() -> None:
    args = manager_main.parse_args(
        [
            *KUBECONFIG,
            "--dispatch-mode",
            "all-at-once",
            "--failover-policy",
            "fast",
            "--worker-lost-timeout",
            "2m",
            "--unfenced-worker-lost-timeout",  # kfed 0.1's name, still taken
            "3m",
            "--nominate-after",
            "0.5",
            "--incremental-step",
            "5",
            "--foreign-object-recheck",
            "1m",
        ]
    )
    settings = manager_main.settings_from(args)
    assert settings.dispatch_mode is DispatchMode.ALL_AT_ONCE
    assert settings.failover_policy is FailoverPolicy.FAST
    assert settings.worker_lost_timeout == 180.0
    assert settings.nominate_after == 0.5
    assert settings.incremental_step == 5
    assert settings.foreign_object_recheck == 60.0


@pytest.mark.parametrize(
    "argv",
    [["--dispatch-mode", "round-robin"], ["--failover-policy", "never"], ["--gc-interval", "soon"]],
)
def test_a_wrong_value_is_a_usage_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        manager_main.parse_args([*KUBECONFIG, *argv])
    assert ended.value.code == 2
    assert argv[0] in capsys.readouterr().err


def test_upstreams_dispatcher_names_are_taken_too() -> None:
    for mode in DispatchMode:
        args = manager_main.parse_args([*KUBECONFIG, "--dispatch-mode", mode.value])
        assert manager_main.settings_from(args).dispatch_mode is mode


def test_kueues_configuration_keys_are_named_in_the_help() -> None:
    keys = {k.config for _, k, _ in knobs.knobs(FederationSettings) if k.config}
    assert keys == {
        "multiKueue.origin",
        "multiKueue.dispatcherName",
        "multiKueue.gcInterval",
        "multiKueue.workerLostTimeout",
        "multiKueue.externalFrameworks",
        "multiKueue.clusterProfile.accessProviders",
    }


@dataclasses.dataclass(frozen=True)
class _WithSwitches:
    on_by_default: bool = knobs.knob(True, "--on-by-default", "a switch that starts on")
    off_by_default: bool = knobs.knob(False, "--off-by-default", "a switch that starts off")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], _WithSwitches()),
        (["--no-on-by-default", "--off-by-default"], _WithSwitches(False, True)),
        (["--on-by-default", "--no-off-by-default"], _WithSwitches(True, False)),
    ],
)
def test_a_bool_setting_is_a_switch_both_ways(argv: list[str], expected: _WithSwitches) -> None:
    parser = argparse.ArgumentParser()
    knobs.add_flags(parser, _WithSwitches)
    assert knobs.from_flags(_WithSwitches, parser.parse_args(argv)) == expected


def test_a_bool_setting_is_read_from_the_config_file_as_true_or_false() -> None:
    parser = argparse.ArgumentParser()
    knobs.add_flags(parser, _WithSwitches)
    text = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
    loaded = configfile.defaults_from(text + "kfed: {onByDefault: false}\n", parser)
    assert loaded.defaults == {"on_by_default": False}
    with pytest.raises(configfile.ConfigError, match=r"kfed\.offByDefault: expected true or false"):
        configfile.defaults_from(text + "kfed: {offByDefault: 'on'}\n", parser)
