"""The admission controllers' flags, the same on the manager and the worker shim: fair
sharing is off unless asked for, and reachable from the command line of both."""

from __future__ import annotations

import pytest

from manager import core
from manager.controllers.state import ClusterState
from manager.main import parse_args as manager_args
from worker_shim.main import parse_args as shim_args

KUBECONFIG = ["--kubeconfig", "/dev/null"]


@pytest.mark.parametrize(("parse", "role"), [(manager_args, "manager"), (shim_args, "worker")])
def test_fair_sharing_is_off_by_default_and_on_when_asked(parse: object, role: str) -> None:
    assert callable(parse)
    settings = parse(KUBECONFIG).controller_settings
    assert settings.fair_sharing is None and settings.role == role and settings.workers == 16

    settings = parse([*KUBECONFIG, "--fair-sharing", "--workers", "8"]).controller_settings
    assert settings.fair_sharing == core.FairSharingConfig()
    assert settings.workers == 8

    only = "LessThanInitialShare"
    settings = parse(
        [*KUBECONFIG, "--fair-sharing", "--fair-sharing-preemption-strategies", only]
    ).controller_settings
    assert settings.fair_sharing.preemption_strategies == (core.FairSharingStrategy(only),)


@pytest.mark.parametrize("parse", [manager_args, shim_args])
def test_an_unknown_strategy_is_a_usage_error_naming_the_flag(
    parse: object, capsys: pytest.CaptureFixture[str]
) -> None:
    assert callable(parse)
    with pytest.raises(SystemExit) as exit_:
        parse([*KUBECONFIG, "--fair-sharing", "--fair-sharing-preemption-strategies", "Nicest"])
    assert exit_.value.code == 2
    assert "--fair-sharing-preemption-strategies: Nicest is not one of" in capsys.readouterr().err


def test_the_cluster_state_builds_its_core_with_fair_sharing() -> None:
    """What the flag reaches: the admission core's scheduler and preemptor."""
    config = core.FairSharingConfig()
    state = ClusterState(object(), fair_sharing=config)  # type: ignore[arg-type]
    assert state.core.fair_sharing is config
    assert ClusterState(object()).core.fair_sharing is None  # type: ignore[arg-type]


@pytest.mark.parametrize("parse", [manager_args, shim_args])
def test_topology_aware_scheduling_is_off_by_default_and_on_when_asked(parse: object) -> None:
    """On, the cluster's Topologies, Nodes and Pods are watched (docs/tas.md)."""
    assert callable(parse)
    assert parse(KUBECONFIG).controller_settings.topology_aware is False
    settings = parse([*KUBECONFIG, "--topology-aware-scheduling"]).controller_settings
    assert settings.topology_aware is True


@pytest.mark.parametrize("parse", [manager_args, shim_args])
def test_finer_pending_reasons_are_off_by_default_as_upstreams_gate(parse: object) -> None:
    """--unadmitted-workloads-observability is upstream's UnadmittedWorkloadsObservability
    (beta in v0.19, off by default); it reaches the cluster's state, where the pending-reason
    writer, the eviction release and the unadmitted-workload gauges read it."""
    assert callable(parse)
    assert parse(KUBECONFIG).controller_settings.unadmitted_workloads_observability is False
    settings = parse([*KUBECONFIG, "--unadmitted-workloads-observability"]).controller_settings
    assert settings.unadmitted_workloads_observability is True
    assert ClusterState(object()).unadmitted_workloads_observability is False  # type: ignore[arg-type]
    state = ClusterState(object(), unadmitted_workloads_observability=True)  # type: ignore[arg-type]
    assert state.unadmitted_workloads_observability is True
