"""The worker shim's modes and its leader election, as flags and as /readyz says them: by
default it admits, elects a leader (only the leader admits) and fences in every replica;
``--mode fence-only`` admits nothing (upstream Kueue does) and is ready at once; a standby is
ready once it knows who leads, since it fences too. Flags that contradict each other are a
usage error, never a silent default."""

from __future__ import annotations

from typing import cast

import pytest

from manager.controllers.runtime import ClusterController
from manager.kube import lease
from manager.kube.api import KubeApi
from manager.kube.leader import LeaderElector
from manager.observability.sources import ShimSource
from manager.telemetry.metrics import Metrics
from worker_shim import main as shim
from worker_shim.fencing import ShimMode

KUBECONFIG = ["--kubeconfig", "/dev/null"]


def test_by_default_it_admits_under_leader_election_on_a_lease_in_its_namespace() -> None:
    args = shim.parse_args([*KUBECONFIG, "--namespace", "kfed", "--identity", "shim-0"])
    assert args.mode is ShimMode.ADMIT and args.leader_elect
    election = args.leader_election
    assert (election.namespace, election.name, election.identity) == (
        "kfed",
        shim.LEADER_LEASE,
        "shim-0",
    )
    assert election.lease_duration > election.renew_deadline > 1.2 * election.retry_period


def test_leader_durations_take_go_durations() -> None:
    args = shim.parse_args(
        [*KUBECONFIG, "--leader-lease-duration", "15s", "--leader-renew-deadline", "10s"]
    )
    assert (args.leader_election.lease_duration, args.leader_election.renew_deadline) == (
        15.0,
        10.0,
    )


def test_fence_only_is_a_mode() -> None:
    assert shim.parse_args([*KUBECONFIG, "--mode", "fence-only"]).mode is ShimMode.FENCE_ONLY
    assert not shim.parse_args([*KUBECONFIG, "--no-leader-elect"]).leader_elect


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--mode", "fence-only", "--no-fencing"], "would do nothing"),
        (["--mode", "kueue"], "invalid ShimMode value"),
        (["--leader-lease-duration", "2s", "--leader-renew-deadline", "3s"], "lease_duration"),
    ],
)
def test_contradictions_are_usage_errors(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        shim.parse_args([*KUBECONFIG, *argv])
    assert exit_.value.code == 2
    assert says in capsys.readouterr().err


def elector_seeing(holder: str | None, me: str = "shim-b") -> LeaderElector:
    """An elector that has read the Lease held by ``holder`` (None: not read yet)."""
    args = shim.parse_args([*KUBECONFIG, "--identity", me])
    elector = LeaderElector(cast(KubeApi, None), args.leader_election)  # never calls the API
    if holder is not None:
        elector.observer.observe(lease.LeaseRecord(holder, 8, "t", "t", 0))
        elector.known.set()
    return elector


def test_a_fence_only_shim_is_ready_at_once_and_shows_no_queues() -> None:
    source = ShimSource(None, metrics=Metrics(), fence_only=True)
    assert source.readiness() == (True, "fence-only: upstream Kueue admits here")
    assert source.cluster_state()[0] is None
    assert source.snapshot().queues == []


def test_a_standby_is_ready_once_it_knows_who_leads() -> None:
    assert ShimSource(None, metrics=Metrics(), elector=elector_seeing(None)).readiness() == (
        False,
        "leader election has not read its Lease yet",
    )
    source = ShimSource(
        None, identity="shim-b", metrics=Metrics(), elector=elector_seeing("shim-a")
    )
    assert source.readiness() == (True, "standby: fencing; shim-a admits")
    snapshot = source.snapshot()
    assert not snapshot.is_leader and snapshot.leader == "shim-a"


async def test_the_leader_is_ready_once_its_controller_synced() -> None:
    elector = elector_seeing("shim-b")
    elector.is_leader = True
    controller = ClusterController(cast(KubeApi, None))
    source = ShimSource(controller, identity="shim-b", elector=elector)
    assert source.readiness() == (False, "informers are syncing")
    controller.synced.set()
    assert source.readiness() == (True, "informers synced")


def test_a_source_without_a_controller_needs_its_metrics() -> None:
    with pytest.raises(ValueError, match="needs its metrics"):
        ShimSource(None)
