"""Retention of a finished workload's objects on the worker it ran on: the durations people
write, when the objects are due, the dispatcher's step and the sweep's verdict (tables, and
properties: nothing is collected before its time, everything after), and the ClusterQueue
annotation read with a readable reason for a value that is not a duration."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes_asyncio.client import ApiClient

from manager import main as manager_main
from manager.api import constants as C
from manager.controllers.state import ClusterState
from manager.federation.decisions import leftovers, retention, routing
from manager.federation.decisions.leftovers import CopyFacts, Moment, Verdict, judge_copy
from manager.federation.engine.applier import Applier
from manager.federation.engine.collecting import Collector
from manager.federation.engine.lookups import Lookups
from manager.federation.engine.records import Records, Stats, ToldRefusals
from manager.federation.engine.retaining import INVALID_REASON, Retaining, ran_on
from manager.federation.settings import (
    RAN_ON_ANNOTATION,
    RETENTION_ANNOTATION,
    FederationSettings,
)
from manager.federation.workers.registry import ClusterRegistry
from manager.federation.workers.remote import RemoteCluster
from manager.kube.api import KubeApi, Obj
from manager.kube.informer import Event, EventType

W1, W2 = "worker-1", "worker-2"
FINISHED_AT = 1_800_000_000.0  # 2027-01-15T08:00:00Z
FINISHED_AT_TEXT = "2027-01-15T08:00:00Z"

# -- durations -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("0s", 0.0),
        ("90", 90.0),
        ("2.5", 2.5),
        ("3s", 3.0),
        ("500ms", 0.5),
        ("10m", 600.0),
        ("1h", 3600.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("2h0m10s", 7210.0),
        (" 1h ", 3600.0),
    ],
)
def test_durations_as_kubernetes_and_kfed_flags_write_them(text: str, seconds: float) -> None:
    assert retention.parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "empty"),
        ("-5m", "negative"),
        ("1d", "not a duration"),
        ("1h30", "not a duration"),
        ("soon", "not a duration"),
        ("h", "not a duration"),
        ("1 h", "not a duration"),
    ],
)
def test_a_value_that_is_not_a_duration_says_why_and_how_to_write_one(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as raised:
        retention.parse_duration(text)
    assert "e.g. 90s, 10m, 1h30m" in str(raised.value)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (3, "3s"), (0.5, "0.5s"), (90, "1m30s"), (3600, "1h"), (5400, "1h30m")],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert retention.format_duration(seconds) == text
    assert retention.parse_duration(text) == seconds


def test_the_annotation_overrides_the_setting_and_a_bad_one_falls_back_with_a_reason() -> None:
    assert retention.retention_for(None, 60.0) == (60.0, None)
    assert retention.retention_for("1h", 60.0) == (3600.0, None)
    assert retention.retention_for("0", 60.0) == (0.0, None)
    seconds, problem = retention.retention_for("forever", 60.0)
    assert seconds == 60.0
    assert problem is not None and "'forever' is not a duration" in problem


def finished(at: str | None = FINISHED_AT_TEXT, *, status: str = "True") -> Obj:
    condition: dict[str, Any] = {"type": C.FINISHED, "status": status, "reason": "Succeeded"}
    if at is not None:
        condition["lastTransitionTime"] = at
    return {"status": {"conditions": [condition]}}


def test_the_finish_time_is_the_finished_conditions_transition() -> None:
    assert retention.finished_at(finished()) == FINISHED_AT
    assert retention.finished_at(finished(status="False")) is None
    assert retention.finished_at(finished(at=None)) is None
    assert retention.finished_at(finished(at="yesterday")) is None
    assert retention.finished_at({}) is None


def test_time_left() -> None:
    assert retention.time_left(FINISHED_AT, 60, FINISHED_AT + 20) == 40
    assert retention.time_left(FINISHED_AT, 60, FINISHED_AT + 60) == 0
    assert retention.time_left(FINISHED_AT, 60, FINISHED_AT + 600) == 0
    assert retention.time_left(FINISHED_AT, 0, FINISHED_AT) == 0
    assert retention.time_left(None, 60, FINISHED_AT) == 0, "no finish time: nothing is kept"


# -- the dispatcher's step -----------------------------------------------------------------

F = routing.WorkloadFacts
ROUTES: list[tuple[str, routing.WorkloadFacts, routing.Route]] = [
    (
        "finished, kept 30 s more",
        F(finished=True, holds_quota=False, retention_left=30.0),
        routing.Route(routing.Step.RETAIN, after=30.0),
    ),
    (
        "finished, retention over",
        F(finished=True, holds_quota=False, retention_left=0.0),
        routing.Route(routing.Step.CLEAN_UP),
    ),
    (
        "finished and being deleted: at once, whatever the retention",
        F(finished=True, holds_quota=False, deleting=True, retention_left=30.0),
        routing.Route(routing.Step.CLEAN_UP),
    ),
    ("deleted: at once", F(exists=False), routing.Route(routing.Step.CLEAN_UP)),
    (
        "requeued (not finished): at once",
        F(holds_quota=False, retention_left=30.0),
        routing.Route(routing.Step.CLEAN_UP),
    ),
]


@pytest.mark.parametrize(("situation", "facts", "expected"), ROUTES, ids=[r[0] for r in ROUTES])
def test_route(situation: str, facts: routing.WorkloadFacts, expected: routing.Route) -> None:
    assert routing.route(facts) == expected


# -- the sweep's verdict -------------------------------------------------------------------

KEPT = leftovers.WorkloadFacts(finished=True, holds_quota=False, ran_on=W1, retention_left=30.0)
DUE = leftovers.WorkloadFacts(finished=True, holds_quota=False, ran_on=W1, retention_left=0.0)
RAN_HERE = CopyFacts(W1, finished=True)
NEVER_RAN_HERE = CopyFacts(W2)
FINISHED_THERE_TOO = CopyFacts(W2, finished=True)
UNFINISHED_HERE = CopyFacts(W1)
VERDICTS: list[tuple[str, CopyFacts, leftovers.WorkloadFacts, Verdict]] = [
    ("the run's copy, within its retention", RAN_HERE, KEPT, Verdict.KEEP),
    ("the run's copy, retention over", RAN_HERE, DUE, Verdict.DELETE),
    ("a copy that never ran (another worker)", NEVER_RAN_HERE, KEPT, Verdict.DELETE),
    ("a finished copy on a worker it did not end on", FINISHED_THERE_TOO, KEPT, Verdict.DELETE),
    ("an unfinished copy on the worker it ran on", UNFINISHED_HERE, KEPT, Verdict.DELETE),
    (
        "the workload is gone: at once",
        RAN_HERE,
        leftovers.WorkloadFacts(exists=False, ran_on=W1, retention_left=30.0),
        Verdict.DELETE,
    ),
]


@pytest.mark.parametrize("moment", list(Moment))
@pytest.mark.parametrize(
    ("situation", "copy", "workload", "expected"), VERDICTS, ids=[r[0] for r in VERDICTS]
)
def test_judge_copy(
    moment: Moment,
    situation: str,
    copy: CopyFacts,
    workload: leftovers.WorkloadFacts,
    expected: Verdict,
) -> None:
    assert judge_copy(moment, copy, workload) is expected


def test_a_job_whose_kept_copy_was_deleted_goes_at_once() -> None:
    """As upstream's proposal: a kept copy confirmed missing takes our Job with it."""
    assert leftovers.job_is_orphan(deleting=False, copy_exists=False, workload=KEPT)
    assert not leftovers.job_is_orphan(deleting=False, copy_exists=True, workload=KEPT)


# -- properties: never before its time, always after ---------------------------------------

times = st.floats(min_value=0, max_value=10 * 86400, allow_nan=False)


@given(
    finished_after=times,
    retention_s=times,
    now_after=times,
    moment=st.sampled_from(list(Moment)),
    worker=st.sampled_from([W1, W2]),
    copy_finished=st.booleans(),
    deleting=st.booleans(),
)
def test_nothing_is_collected_before_its_time_and_everything_after(
    finished_after: float,
    retention_s: float,
    now_after: float,
    moment: Moment,
    worker: str,
    copy_finished: bool,
    deleting: bool,
) -> None:
    finish = FINISHED_AT + finished_after
    now = finish + now_after
    left = retention.time_left(finish, retention_s, now)
    due = now >= finish + retention_s
    assert (left == 0) is due

    facts = leftovers.WorkloadFacts(
        finished=True, holds_quota=False, ran_on=W1, retention_left=left
    )
    verdict = judge_copy(moment, CopyFacts(worker, finished=copy_finished), facts)
    the_run = worker == W1 and copy_finished
    assert verdict is (Verdict.KEEP if the_run and not due else Verdict.DELETE)

    step = routing.route(
        routing.WorkloadFacts(
            finished=True, holds_quota=False, deleting=deleting, retention_left=left
        )
    )
    if due or deleting:
        assert step == routing.Route(routing.Step.CLEAN_UP)
    else:
        assert step == routing.Route(routing.Step.RETAIN, after=left)
        assert now + left == pytest.approx(finish + retention_s), "looked at again when due"


# -- the annotation, read from the ClusterQueue --------------------------------------------


@dataclass
class Told:
    warnings: list[tuple[str, str, str]] = field(default_factory=list)

    def warning(self, obj: Obj, reason: str, message: str) -> None:
        self.warnings.append((obj["metadata"]["name"], reason, message))


def cluster_queue(name: str, value: str | None) -> Obj:
    annotations = {RETENTION_ANNOTATION: value} if value is not None else {}
    return {"metadata": {"name": name, "annotations": annotations}, "spec": {}}


def manager_workload(*, cq: str = "gpu-cq", cluster: str = W1, at: str = FINISHED_AT_TEXT) -> Obj:
    return {
        "metadata": {"name": "job-a-1", "namespace": "team-a"},
        "spec": {"queueName": "gpu"},
        "status": {
            "admission": {"clusterQueue": cq},
            "clusterName": cluster,
            "conditions": [
                {"type": C.QUOTA_RESERVED, "status": "True"},
                {"type": C.FINISHED, "status": "True", "lastTransitionTime": at},
            ],
        },
    }


class Manager:
    """A manager's caches filled by hand, a clock the test moves, Events caught."""

    def __init__(self, setting: float = 0.0) -> None:
        self.settings = FederationSettings(finished_retention=setting)
        self.state = ClusterState(KubeApi(cast(ApiClient, object()), name="unit"))
        self.told = Told()
        self.now = FINISHED_AT
        self.changed: list[str] = []
        self.retaining = Retaining(
            self.state,
            self.settings,
            tell=cast(Any, self.told),
            clock=lambda: self.now,
            on_change=self.changed.append,
        )

    def set_queue(self, name: str, value: str | None, type_: EventType = "MODIFIED") -> None:
        obj = cluster_queue(name, value)
        self.state.cluster_queues.cache[name] = obj
        for handler in self.state.cluster_queues._handlers:
            handler(Event(type_, name, obj))


def test_the_queues_annotation_wins_over_the_setting() -> None:
    m = Manager(setting=60.0)
    m.set_queue("gpu-cq", "1h", "ADDED")
    m.set_queue("cpu-cq", None, "ADDED")
    assert m.retaining.retention_of(manager_workload()) == 3600.0
    assert m.retaining.retention_of(manager_workload(cq="cpu-cq")) == 60.0
    m.now = FINISHED_AT + 600
    assert m.retaining.left(manager_workload()) == 3000.0
    assert m.retaining.left(manager_workload(cq="cpu-cq")) == 0.0
    assert m.told.warnings == []


def test_a_queue_is_found_through_its_local_queue_before_admission() -> None:
    m = Manager()
    m.set_queue("gpu-cq", "5m", "ADDED")
    m.state.local_queues.cache["team-a/gpu"] = {"spec": {"clusterQueue": "gpu-cq"}}
    wl = manager_workload()
    del wl["status"]["admission"]
    assert m.retaining.retention_of(wl) == 300.0


def test_a_bad_value_is_told_once_on_the_queue_and_the_setting_applies() -> None:
    m = Manager(setting=120.0)
    m.set_queue("gpu-cq", "a day", "ADDED")
    m.set_queue("gpu-cq", "a day")  # resynced, unchanged: not told again
    assert len(m.told.warnings) == 1
    name, reason, message = m.told.warnings[0]
    assert (name, reason) == ("gpu-cq", INVALID_REASON)
    assert message == (
        f"ClusterQueue gpu-cq: annotation {RETENTION_ANNOTATION} 'a day' is not a duration "
        "(e.g. 90s, 10m, 1h30m, or a number of seconds); finished workloads use the "
        "manager's --finished-retention (2m) instead"
    )
    assert m.retaining.retention_of(manager_workload()) == 120.0
    m.set_queue("gpu-cq", "-1h")
    assert len(m.told.warnings) == 2 and "negative" in m.told.warnings[1][2]
    m.set_queue("gpu-cq", "10m")
    assert len(m.told.warnings) == 2
    assert m.changed == ["gpu-cq", "gpu-cq"], "at each change its workloads are looked at again"


def test_nothing_is_kept_of_an_unfinished_or_deleted_workload() -> None:
    m = Manager(setting=3600.0)
    running = manager_workload()
    running["status"]["conditions"] = running["status"]["conditions"][:1]
    assert m.retaining.left(running) == 0.0
    deleting = manager_workload()
    deleting["metadata"]["deletionTimestamp"] = FINISHED_AT_TEXT
    assert m.retaining.left(deleting) == 0.0
    assert m.retaining.left(manager_workload()) == 3600.0


def test_where_it_ran_is_the_recorded_worker_else_the_cluster_name() -> None:
    wl = manager_workload(cluster=W2)
    assert ran_on(wl) == W2
    wl["metadata"]["annotations"] = {RAN_ON_ANNOTATION: W1}
    assert ran_on(wl) == W1
    wl["status"]["clusterName"] = None
    assert ran_on(wl) == W1


# -- the sweep, carried out ----------------------------------------------------------------


class Deletions:
    def __init__(self) -> None:
        self.deleted: list[tuple[str, str]] = []

    async def delete_copy(self, remote: RemoteCluster, key: str, obj: Obj | None) -> None:
        self.deleted.append((remote.name, key))


def remote_copy(*, finished_there: bool) -> Obj:
    conditions = [{"type": C.FINISHED, "status": "True"}] if finished_there else []
    return {
        "metadata": {"name": "job-a-1", "namespace": "team-a"},
        "status": {"conditions": conditions},
    }


async def test_the_sweep_keeps_the_run_until_its_time_and_the_other_copy_never() -> None:
    m = Manager(setting=60.0)
    m.set_queue("gpu-cq", None, "ADDED")
    m.state.workloads.cache["team-a/job-a-1"] = manager_workload()
    registry = ClusterRegistry(KubeApi(cast(ApiClient, object()), name="unit"), m.settings)
    look = Lookups(m.state, registry, m.settings, Records())
    writes = Deletions()
    applier = Applier(
        m.state,
        registry,
        look.records,
        cast(Any, writes),
        cast(Any, None),
        settings=m.settings,
        stats=Stats(),
        told_refusals=ToldRefusals(),
    )
    collector = Collector(look, applier, lambda key: None, m.retaining)
    here, there = (
        RemoteCluster(name, KubeApi(cast(ApiClient, None), name=name), m.settings)
        for name in (W1, W2)
    )

    async def sweep() -> None:
        await collector._judge(Moment.SWEEP, here, remote_copy(finished_there=True))
        await collector._judge(Moment.SWEEP, there, remote_copy(finished_there=False))

    m.now = FINISHED_AT + 59.5
    await sweep()
    assert writes.deleted == [(W2, "team-a/job-a-1")], "the copy that never ran goes at once"
    m.now = FINISHED_AT + 60
    writes.deleted.clear()
    await sweep()
    assert writes.deleted == [(W1, "team-a/job-a-1"), (W2, "team-a/job-a-1")]


# -- the manager's flag --------------------------------------------------------------------


@pytest.mark.parametrize(("flag", "seconds"), [([], 0.0), (["90"], 90.0), (["1h30m"], 5400.0)])
def test_the_flag_takes_seconds_or_a_duration_and_defaults_to_at_once(
    flag: list[str], seconds: float
) -> None:
    argv = ["--kubeconfig", "k", *(["--finished-retention", *flag] if flag else [])]
    assert manager_main.settings_from(manager_main.parse_args(argv)).finished_retention == seconds


def test_a_flag_that_is_not_a_duration_is_a_usage_error_saying_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        manager_main.parse_args(["--kubeconfig", "k", "--finished-retention", "1d"])
    err = capsys.readouterr().err
    assert "argument --finished-retention: '1d' is not a duration (e.g. 90s" in err
