"""`kfed drill` without clusters: the report's maths (intervals, double runs, unobserved
gaps, phases, p50/max, the verdict), rewriting a kubeconfig's server, the blackhole, the
probe Jobs, and reading the manager's view (cluster lost, placement)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Iterable
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from e2e.waiting import wait_for
from manager.api import constants as C
from manager.cli.common import EXIT_USAGE, CliError
from manager.cli.drills import breaking, probes
from manager.cli.drills import servers as drillservers
from manager.cli.drills.intervals import (
    Interval,
    ManagerSample,
    WorkerSample,
    double_runs,
    overlaps,
    running_intervals,
    unobserved,
    unverified_runs,
)
from manager.cli.drills.options import report_path
from manager.cli.drills.output import as_json, render
from manager.cli.drills.report import (
    EXIT_DOUBLE_RUN,
    EXIT_FAILED,
    EXIT_OK,
    DrillReport,
    Restoration,
    build,
    fmt,
    probe_result,
    summarize,
)
from manager.cli.drills.watch import cluster_lost, placed_on, running_by_probe
from manager.cli.main import main
from manager.cli.tables import render_text
from manager.federation.settings import ALLOWED_CLUSTERS_ANNOTATION

P = "probe-1"
T = "worker-1"
O = "worker-2"  # noqa: E741


def ws(
    at: float, cluster: str, running: Iterable[str] = (), copies: Iterable[str] = ()
) -> WorkerSample:
    return WorkerSample(at, cluster, frozenset(running), frozenset(copies))


def failover(*, overlap: bool = False) -> list[WorkerSample]:
    """P runs on T until 3.0 (4.5 with ``overlap``); copied to O at 5.0, runs there from 6.0."""
    samples = []
    for i in range(-4, 40):
        at = i * 0.25
        on_target = at < (4.5 if overlap else 3.0)
        samples.append(ws(at, T, {P} if on_target else set(), {P} if at < 7 else set()))
        samples.append(
            ws(
                at + 0.01,
                O,
                {P} if at >= (4.0 if overlap else 6.0) else set(),
                {P} if at >= 5 else set(),
            )
        )
    return samples


def lost_manager(lost_at: float = 2.0, evicted_at: float = 5.5) -> list[ManagerSample]:
    return [
        ManagerSample(
            i * 0.5,
            i * 0.5 >= lost_at,
            {P: T if i * 0.5 < evicted_at else (O if i * 0.5 >= 6.5 else "")},
        )
        for i in range(-2, 20)
    ]


# -- intervals and double runs ----------------------------------------------------------------


def test_running_intervals_are_runs_of_consecutive_samples() -> None:
    samples = [ws(0, T, {P}), ws(1, T, {P}), ws(2, T), ws(3, T, {P}), ws(4, T, {P}), ws(0.5, O)]
    assert running_intervals(samples, T, P) == [Interval(0, 1, (T,)), Interval(3, 4, (T,))]
    assert running_intervals(samples, O, P) == []


def test_overlaps_include_touching_intervals() -> None:
    a = [Interval(0, 2, (T,))]
    assert overlaps(a, [Interval(2, 3, (O,))]) == [Interval(2, 2, (T, O))]
    assert overlaps(a, [Interval(1, 5, (O,))]) == [Interval(1, 2, (T, O))]
    assert overlaps(a, [Interval(2.1, 3, (O,))]) == []


def test_a_clean_failover_has_no_double_run_and_a_positive_gap() -> None:
    samples = failover()
    assert double_runs(samples, P) == []
    result = probe_result(P, T, samples, lost_manager(), {})
    assert result.moved_to == O
    assert result.detection == 2.0
    assert result.stopped == 3.0
    assert result.eviction == 5.5
    assert result.redispatch == pytest.approx(5.01)
    assert result.running_elsewhere == pytest.approx(6.01)
    assert result.margin == pytest.approx(3.01)


def test_running_on_two_clusters_at_once_is_a_double_run() -> None:
    samples = failover(overlap=True)
    found = double_runs(samples, P)
    assert len(found) == 1
    assert found[0].clusters == (T, O)
    assert found[0].start == pytest.approx(4.01) and found[0].end == pytest.approx(4.25)
    result = probe_result(P, T, samples, lost_manager(), {})
    assert result.double_runs == found
    assert result.margin is not None and result.margin < 0


def test_detection_is_the_eviction_when_the_cluster_is_never_lost() -> None:
    manager = [ManagerSample(t, False, {P: T if t < 1.0 else ""}) for t in (0.0, 0.5, 1.0, 1.5)]
    result = probe_result(P, T, failover(), manager, {})
    assert result.detection == result.eviction == 1.0


def test_a_probe_that_never_moved_has_no_times_after_its_stop() -> None:
    samples = [ws(t * 0.5, T, {P} if t < 4 else set()) for t in range(20)] + [
        ws(t * 0.5, O) for t in range(20)
    ]
    result = probe_result(P, T, samples, [], {})
    assert result.moved_to == ""
    assert result.running_elsewhere is None and result.margin is None
    assert result.stopped == 2.0 and result.detection is None


def test_gaps_in_a_clusters_samples_are_unobserved_and_may_hide_a_double_run() -> None:
    # T runs P, goes dark from 1.0 to 6.0 (paused), while P starts on O at 3.0.
    samples = [ws(t, T, {P}) for t in (0.0, 0.5, 1.0)] + [ws(6.0, T)]
    samples += [ws(t / 2, O, {P} if t / 2 >= 3 else set()) for t in range(0, 14)]
    holes = unobserved(samples, [T, O], start=0.0, end=6.5, gap=1.0)
    assert holes == {T: [Interval(1.0, 6.0, (T,))], O: []}
    assert double_runs(samples, P) == []  # nothing proven ...
    assert unverified_runs(samples, P, holes) == [Interval(3.0, 6.0, (T, O))]  # ... or ruled out
    # a cluster that was not running P when it went dark hides nothing
    quiet = [ws(0.0, T), ws(6.0, T), *(s for s in samples if s.cluster == O)]
    assert unverified_runs(quiet, P, unobserved(quiet, [T, O], start=0, end=6.5, gap=1)) == []


def test_phases_give_p50_and_max_over_the_probes_that_reached_them() -> None:
    fast = probe_result(P, T, failover(), lost_manager(), {})
    stuck = probe_result("b", T, [ws(0, T, {"b"}), ws(1, T)], [], {})
    phases = {p.phase: p for p in summarize([fast, stuck])}
    assert phases["running elsewhere"].reached == 1
    assert phases["running elsewhere"].p50 == phases["running elsewhere"].max
    assert phases["stopped"].reached == 2
    assert phases["stopped"].p50 == pytest.approx((1.0 + 3.0) / 2)
    assert phases["stopped"].max == 3.0


# -- the verdict and the output ------------------------------------------------------------


RESTORED = Restoration(
    ["Secret kueue-system/worker-1 holds its original kubeconfig again"], 7.0, 0.5, 0.6
)


def report(samples: list[WorkerSample], restoration: Restoration = RESTORED) -> DrillReport:
    return build(
        kind="partition",
        cluster=T,
        run_id="abc123",
        started_at="2025-01-01T10:00:00.000000Z",
        queue="ml-jobs/gpu-lq",
        flavor="h100",
        breaking="Secret kueue-system/worker-1 pointed at https://127.0.0.1:4000",
        timeout=60,
        interval=0.25,
        probes=[P],
        samples=samples,
        manager=lost_manager(),
        clusters=[T, O],
        end=9.0,
        restoration=restoration,
    )


def test_the_verdict_passes_a_clean_failover() -> None:
    r = report(failover())
    assert r.exit_code == EXIT_OK and not r.problems
    text = render_text(render(r, output_path="drill.json"))
    assert "double runs: 0" in text
    assert "running elsewhere" in text and "6.0s" in text
    assert "result: PASS; report written to drill.json" in text
    data = json.loads(as_json(r))
    assert data["double_runs"] == 0 and data["moved"] == 1 and data["passed"] is True
    assert data["probes"][0]["moved_to"] == O
    assert data["running"][P][T][0]["end"] == 2.75
    assert {p["phase"] for p in data["phases"]} == {
        "detection",
        "stopped",
        "eviction",
        "re-dispatch",
        "running elsewhere",
    }


def test_a_double_run_fails_with_its_own_exit_code() -> None:
    r = report(failover(overlap=True))
    assert r.exit_code == EXIT_DOUBLE_RUN
    assert "ran on two clusters at once" in r.problems[0]
    assert "double runs: 1" in render_text(render(r))


def test_a_probe_that_did_not_move_or_a_cluster_that_did_not_come_back_fails() -> None:
    stuck = [s for s in failover() if s.cluster == T]
    r = report(stuck)
    assert r.exit_code == EXIT_FAILED
    assert "ran neither elsewhere nor on worker-1 after it was restored" in r.problems[0]
    assert r.probes[0].resumed is None and not r.probes[0].settled
    r = report(failover(), Restoration(["restored"], 7.0, None, None))
    assert r.exit_code == EXIT_FAILED
    assert "did not become Active again" in r.problems[0]
    r = report(failover(), Restoration(["restoring failed: 403"], None, None, None))
    assert "was not restored: restoring failed: 403" in r.problems[0]


def test_a_probe_that_runs_on_once_its_cluster_is_restored_passes_as_resumed() -> None:
    """At-most-once under a real outage: the broken cluster cannot be read from the break
    until its restore (at 7.0); nothing moved; the probe runs there again after it."""
    samples = [ws(i * 0.25, T, {P}, {P}) for i in range(-4, 0)]
    samples += [ws(i * 0.25 + 0.01, O, set(), set()) for i in range(-4, 40)]
    samples += [ws(i * 0.25, T, {P}, {P}) for i in range(30, 40)]
    r = report(samples)
    assert r.exit_code == EXIT_OK, r.problems
    assert r.probes[0].resumed == 7.5 and r.probes[0].moved_to == ""
    assert r.double_run_count == 0 and r.resumed_count == 1 and r.moved_count == 0
    text = render_text(render(r))
    assert "resumed there" in text and "resumed: 1 ran on worker-1 once it was restored" in text
    assert json.loads(as_json(r))["resumed"] == 1


def test_a_probe_that_ran_before_the_restore_only_is_not_resumed() -> None:
    """Running on the broken cluster before the restore proves nothing: it must run there
    after it."""
    samples = [ws(i * 0.25, T, {P} if i < 20 else set(), {P}) for i in range(-4, 40)]
    samples += [ws(i * 0.25 + 0.01, O, set(), set()) for i in range(-4, 40)]
    r = report(samples)
    assert r.exit_code == EXIT_FAILED and r.probes[0].resumed is None


def test_fmt() -> None:
    assert fmt(None) == "-"
    assert fmt(0.256) == "0.26s"
    assert fmt(6.31) == "6.3s"
    assert fmt(125) == "2m05s"


# -- rewriting the Secret ------------------------------------------------------------------------


KUBECONFIG = """
apiVersion: v1
kind: Config
clusters:
- name: w1
  cluster: {server: "https://10.0.0.5:6443", certificate-authority-data: Q0E=}
- name: other
  cluster: {server: "https://10.0.0.9:6443"}
users:
- name: admin
  user: {token: secret-token}
contexts:
- name: w1
  context: {cluster: w1, user: admin}
- name: other
  context: {cluster: other, user: admin}
current-context: w1
"""


def test_with_server_replaces_only_the_current_contexts_server() -> None:
    rewritten = drillservers.with_server(KUBECONFIG, "https://127.0.0.1:1")
    config = yaml.safe_load(rewritten)
    clusters = {c["name"]: c["cluster"] for c in config["clusters"]}
    assert clusters["w1"] == {"server": "https://127.0.0.1:1", "certificate-authority-data": "Q0E="}
    assert clusters["other"]["server"] == "https://10.0.0.9:6443"
    assert config["users"] == yaml.safe_load(KUBECONFIG)["users"]
    assert drillservers.server_of(rewritten) == "https://127.0.0.1:1"
    assert drillservers.server_of(drillservers.with_server(rewritten, "https://10.0.0.5:6443")) == (
        "https://10.0.0.5:6443"
    )


@pytest.mark.parametrize(
    "text",
    [
        "- a list",
        "current-context: nope\ncontexts: []\nclusters: []",
        "contexts: [{name: x, context: {cluster: y}}]\ncurrent-context: x",
    ],
)
def test_with_server_refuses_malformed_kubeconfigs(text: str) -> None:
    with pytest.raises(ValueError):
        drillservers.with_server(text, "https://127.0.0.1:1")


def test_secret_kubeconfig_and_markers() -> None:
    secret = {
        "metadata": {"name": T, "namespace": "kueue-system"},
        "data": {"kubeconfig": drillservers.encode(KUBECONFIG)},
    }
    assert drillservers.secret_kubeconfig(secret) == KUBECONFIG
    with pytest.raises(CliError, match="has no key 'kubeconfig'"):
        drillservers.secret_kubeconfig({"metadata": {}, "data": {}})
    marker = drillservers.drill_marker(
        "abc123", "partition", original_server="https://10.0.0.5:6443"
    )
    obj = {"metadata": {"annotations": {drillservers.DRILL_ANNOTATION: marker}}}
    read = drillservers.read_marker(obj)
    assert read is not None and read["originalServer"] == "https://10.0.0.5:6443"
    assert read["run"] == "abc123" and read["kind"] == "partition"
    assert drillservers.read_marker({"metadata": {}}) is None


@pytest.mark.parametrize(
    ("address", "url"),
    [
        ("10.255.255.1:6443", "https://10.255.255.1:6443"),
        ("https://h.example:443", "https://h.example:443"),
    ],
)
def test_blackhole_addresses(address: str, url: str) -> None:
    assert drillservers.server_url(address) == url


@pytest.mark.parametrize("address", ["10.255.255.1", "http://h:80", "", ":80"])
def test_bad_blackhole_addresses_are_usage_errors(address: str) -> None:
    with pytest.raises(CliError) as caught:
        drillservers.server_url(address)
    assert caught.value.code == EXIT_USAGE


async def test_the_blackhole_accepts_and_never_answers() -> None:
    hole = await breaking.Blackhole().start()
    reader, writer = await asyncio.open_connection(hole.host, hole.port)
    writer.write(b"\x16\x03\x01 a TLS ClientHello, say")
    await writer.drain()
    await wait_for(lambda: hole.connections == 1, timeout=10, what="the connection accepted")
    await hole.close()
    try:
        answer = await reader.read()
    except ConnectionResetError:  # closed with our bytes unread: a reset, still no answer
        answer = b""
    assert answer == b"", "closed without a single byte sent back"
    writer.close()


# -- probes, the manager's view, paths -----------------------------------------------------------


PLAN = probes.ProbePlan(
    run_id="abc123",
    kind="partition",
    target=T,
    namespace="ml-jobs",
    queue="gpu-lq",
    count=2,
    image="busybox:1.36",
    seconds=780,
    flavor="h100",
    node_selector={"gpu.model": "h100"},
    requests={"cpu": "100m", "memory": "64Mi"},
)


def test_probe_jobs() -> None:
    assert PLAN.names == ["drill-partition-abc123-1", "drill-partition-abc123-2"]
    job = probes.probe_job(PLAN, PLAN.names[0], only_on=T)
    meta, spec = job["metadata"], job["spec"]
    assert meta["labels"] == {
        probes.RUN_LABEL: "abc123",
        probes.PROBE_LABEL: PLAN.names[0],
        C.QUEUE_NAME_LABEL: "gpu-lq",
    }
    assert meta["annotations"] == {ALLOWED_CLUSTERS_ANNOTATION: T}
    assert spec["suspend"] is True and spec["parallelism"] == 1
    template = spec["template"]
    assert template["metadata"]["labels"][probes.PROBE_LABEL] == PLAN.names[0]
    assert template["metadata"]["annotations"][probes.KWOK_DELAY_ANNOTATION] == "780000"
    assert template["spec"]["nodeSelector"] == {"gpu.model": "h100"}
    container = template["spec"]["containers"][0]
    assert "sleep 780" in container["command"][-1] and "trap" in container["command"][-1]
    assert container["resources"] == {"requests": {"cpu": "100m", "memory": "64Mi"}}
    check = probes.probe_job(PLAN, "check", pods=2)
    assert check["spec"]["parallelism"] == check["spec"]["completions"] == 2
    assert check["metadata"]["annotations"] == {}


def test_flavor_candidates_follow_the_queue_order_and_its_covered_resources() -> None:
    cq = {
        "spec": {
            "resourceGroups": [
                {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "gpu-only"}]},
                {"coveredResources": ["cpu"], "flavors": [{"name": "rtx-a1000"}, {"name": "h100"}]},
            ]
        }
    }
    assert probes.flavor_candidates(cq) == (["rtx-a1000", "h100"], {"cpu": "100m"})


def _mk_cluster(status: str, message: str) -> dict[str, object]:
    return {
        "metadata": {"name": T},
        "status": {
            "conditions": [{"type": C.ACTIVE, "status": status, "reason": "R", "message": message}]
        },
    }


def test_the_cluster_is_lost_only_after_a_failed_connection() -> None:
    assert not cluster_lost(None)
    assert not cluster_lost(_mk_cluster("True", "Connected"))
    assert not cluster_lost(_mk_cluster("False", "Connecting"))  # a Secret change, not a loss
    assert cluster_lost(_mk_cluster("False", "Connection to worker lost: request timed out"))


def test_placed_on_and_running_pods() -> None:
    admitted = {
        "status": {
            "clusterName": O,
            "conditions": [
                {"type": C.QUOTA_RESERVED, "status": "True"},
                {"type": C.ADMITTED, "status": "True"},
            ],
        }
    }
    assert placed_on(admitted) == O
    assert placed_on(None) == ""
    evicted = {
        "status": {
            **admitted["status"],
            "conditions": [
                *admitted["status"]["conditions"],
                {"type": C.EVICTED, "status": "True"},
            ],
        }
    }
    assert placed_on(evicted) == ""
    pods = [
        {"metadata": {"labels": {probes.PROBE_LABEL: "a"}}, "status": {"phase": "Running"}},
        {"metadata": {"labels": {probes.PROBE_LABEL: "b"}}, "status": {"phase": "Pending"}},
        {"metadata": {"labels": {probes.PROBE_LABEL: "c"}}, "status": {"phase": "Succeeded"}},
    ]
    assert running_by_probe(pods) == frozenset({"a"})


def test_report_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    when = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    monkeypatch.chdir(tmp_path)
    name = "drill-partition-worker-1-20250102T030405Z.json"
    assert report_path(None, "partition", T, when) == tmp_path / name
    assert report_path(str(tmp_path), "partition", T, when) == tmp_path / name
    assert report_path(str(tmp_path / "r.json"), "partition", T, when) == tmp_path / "r.json"
    with pytest.raises(CliError) as caught:
        report_path(str(tmp_path / "missing" / "r.json"), "partition", T, when)
    assert caught.value.code == EXIT_USAGE


# -- the command line --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["partition", "--cluster", T, "--queue", "gpu-lq"], "is not NAMESPACE/LOCALQUEUE"),
        (["partition", "--cluster", T, "--probes", "0"], "--probes"),
        (["outage", "--cluster", T, "--restore-command", "true"], "--restore-command needs"),
        (["partition"], "Missing option '--cluster'"),
    ],
)
def test_bad_usage_is_exit_2_before_anything_is_contacted(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["drill", *args, "--kubeconfig", "/nonexistent"])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_a_bad_blackhole_is_one_line_and_exit_2() -> None:
    result = CliRunner().invoke(
        main, ["drill", "partition", "--cluster", T, "--blackhole", "nowhere", "--kubeconfig", "/x"]
    )
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: --blackhole 'nowhere' is not HOST:PORT (for example 10.255.255.1:6443)"
    ]
