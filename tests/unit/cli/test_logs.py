"""`kfed logs`' pure parts: which worker a workload runs or ran on (or why it has none), which
pods and containers are read and how their lines are prefixed, and log bytes cut into lines."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from manager.api import constants as C
from manager.cli.common import EXIT_FAILED, EXIT_UNREACHABLE, EXIT_USAGE, CliError
from manager.cli.logsources import (
    LineSplitter,
    container_state,
    job_ended,
    log_sources,
    pod_selector,
    whereabouts,
)
from manager.cli.logworker import RemoteJob
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.jobkinds.jobset import JOBSET
from manager.federation.settings import RAN_ON_ANNOTATION
from manager.kube import errors
from manager.kube.api import KubeApi
from tests.unit.cli.builders import admission, condition, reserved_conditions, workload

Obj = dict[str, Any]
JOB = "Job ml-jobs/light-job"


def pod(
    name: str,
    containers: tuple[str, ...] = ("main",),
    *,
    phase: str = "Running",
    states: dict[str, Obj] | None = None,
    init: tuple[str, ...] = (),
    created: str = "2026-01-01T00:00:00Z",
) -> Obj:
    states = states if states is not None else {c: {"running": {}} for c in containers}
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": created},
        "spec": {
            "containers": [{"name": c} for c in containers],
            "initContainers": [{"name": c} for c in init],
        },
        "status": {
            "phase": phase,
            "containerStatuses": [{"name": c, "state": s} for c, s in states.items()],
        },
    }


# -- where ------------------------------------------------------------------------------------


def test_a_placed_workload_runs_on_its_cluster_name() -> None:
    wl = workload(
        "w",
        conditions=reserved_conditions(admitted=True),
        admission=admission("cq", "h100"),
        cluster="worker-2",
    )
    where = whereabouts(wl, JOB)
    assert (where.cluster, where.finished) == ("worker-2", "")


def test_without_a_cluster_name_the_ready_check_says_where() -> None:
    wl = workload(
        "w",
        conditions=reserved_conditions(admitted=True),
        admission=admission("cq", "h100"),
        checks=[
            {"name": "mk", "state": "Ready", "message": 'The workload was admitted on "worker-3"'}
        ],
    )
    assert whereabouts(wl, JOB).cluster == "worker-3"


def test_a_check_still_pending_names_no_worker_yet() -> None:
    wl = workload(
        "w",
        conditions=reserved_conditions(admitted=False),
        admission=admission("cq", "h100"),
        checks=[{"name": "mk", "state": "Pending", "message": 'dispatched on "worker-3": fits'}],
        nominated=["worker-3"],
    )
    with pytest.raises(CliError) as raised:
        whereabouts(wl, JOB)
    assert raised.value.code == EXIT_FAILED
    assert raised.value.message.startswith(
        f"{JOB} has not been placed on a worker yet, so it has no logs: quota reserved; "
        "admission check mk is Pending"
    )
    assert raised.value.message.endswith("see `kfed explain ml-jobs/w`")


def test_a_pending_workload_says_why_it_waits() -> None:
    wl = workload(
        "w",
        conditions=[condition(C.QUOTA_RESERVED, False, "Pending", "insufficient quota for gpu")],
    )
    with pytest.raises(CliError, match="so it has no logs: pending in its queue: insufficient"):
        whereabouts(wl, JOB)


def test_a_finished_workload_ran_where_its_run_ended() -> None:
    finished = [
        *reserved_conditions(admitted=True),
        condition(C.FINISHED, True, "Succeeded", "Reached expected number of succeeded pods"),
    ]
    wl = workload("w", conditions=finished, admission=admission("cq", "h100"), cluster="worker-1")
    where = whereabouts(wl, JOB)
    assert where.cluster == "worker-1"
    assert where.finished == "Succeeded: Reached expected number of succeeded pods"
    # It ended on worker-2 unseen after it was requeued: the dispatcher recorded that.
    moved = workload(
        "w",
        conditions=finished,
        admission=admission("cq", "h100"),
        annotations={RAN_ON_ANNOTATION: "worker-2"},
    )
    assert whereabouts(moved, JOB).cluster == "worker-2"
    never_ran = workload("w", conditions=[condition(C.FINISHED, True, "Deactivated", "stopped")])
    with pytest.raises(CliError, match=r"^Job ml-jobs/light-job never ran on a worker, so it has"):
        whereabouts(never_ran, JOB)


# -- which pods, which containers ---------------------------------------------------------------


def test_a_batch_jobs_pods_are_found_by_its_uid_while_it_exists() -> None:
    job = {"metadata": {"name": "light-job", "uid": "1234"}}
    assert pod_selector(BATCH_JOB, "light-job", job) == "batch.kubernetes.io/controller-uid=1234"
    assert pod_selector(BATCH_JOB, "light-job", None) == "batch.kubernetes.io/job-name=light-job"
    assert pod_selector(JOBSET, "js", {"metadata": {"uid": "9"}}) == (
        "jobset.sigs.k8s.io/jobset-name=js"
    )


def test_container_states() -> None:
    assert container_state(pod("p"), "main") == ("running", "")
    waiting = pod("p", phase="Pending", states={"main": {"waiting": {"reason": "ImagePull"}}})
    assert container_state(waiting, "main") == ("waiting", "ImagePull")
    assert container_state(pod("p", phase="Pending", states={}), "main") == ("waiting", "Pending")
    done = pod("p", phase="Succeeded", states={"main": {"terminated": {"exitCode": 0}}})
    assert container_state(done, "main") == ("terminated", "")
    assert container_state(pod("p", phase="Failed", states={}), "main") == ("terminated", "")


def test_one_container_per_pod_is_prefixed_by_the_pod_oldest_pod_first() -> None:
    pods = [
        pod("light-job-b", created="2026-01-01T00:00:05Z"),
        pod("light-job-a", created="2026-01-01T00:00:09Z"),
    ]
    sources = log_sources(pods, None)
    assert [(s.pod, s.container, s.prefix) for s in sources] == [
        ("light-job-b", "main", "light-job-b"),
        ("light-job-a", "main", "light-job-a"),
    ]


def test_several_containers_are_prefixed_pod_slash_container() -> None:
    pods = [pod("p", ("trainer", "sidecar"), init=("setup",))]
    assert [s.prefix for s in log_sources(pods, None)] == ["p/trainer", "p/sidecar"]
    only = log_sources(pods, "sidecar")
    assert [(s.container, s.prefix) for s in only] == [("sidecar", "p")]
    init = log_sources(pods, "setup")
    assert [(s.container, s.state, s.waiting_reason) for s in init] == [
        ("setup", "waiting", "Running")
    ]


def test_a_container_no_pod_has_is_a_usage_error_naming_theirs() -> None:
    with pytest.raises(CliError) as raised:
        log_sources([pod("p", ("trainer",), init=("setup",))], "cuda")
    assert raised.value.code == EXIT_USAGE
    assert raised.value.message == (
        "no container 'cuda' in the job's pods; they have: setup, trainer"
    )
    assert log_sources([], "cuda") == [], "no pods yet: nothing to check it against"


def test_a_job_ended_when_its_outcome_is_known_or_it_is_gone() -> None:
    running = {"metadata": {"name": "j"}, "spec": {}, "status": {}}
    complete = {
        "metadata": {"name": "j"},
        "spec": {},
        "status": {"conditions": [{"type": "Complete", "status": "True"}]},
    }
    assert not job_ended(BATCH_JOB, running)
    assert job_ended(BATCH_JOB, complete)
    assert job_ended(BATCH_JOB, None)


# -- lines ------------------------------------------------------------------------------------


def test_lines_are_cut_where_they_end_not_where_chunks_do() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"first li") == []
    assert splitter.feed(b"ne\r\nsecond\nthi") == ["first line", "second"]
    assert splitter.feed("rd \u00e9\n".encode()[:-2]) == []
    assert splitter.feed("rd \u00e9\n".encode()[-2:] + b"last") == ["third \u00e9"]
    assert splitter.flush() == ["last"]
    assert splitter.flush() == []


def test_bytes_that_are_not_utf8_do_not_break_the_stream() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"bad \xff byte\n") == ["bad \ufffd byte"]


# -- the worker's answers -----------------------------------------------------------------------


def remote_job() -> RemoteJob:
    api = cast(KubeApi, SimpleNamespace(name="worker-1 https://10.0.0.7:6443"))
    return RemoteJob(BATCH_JOB, "ml-jobs", "light-job", "worker-1", "https://10.0.0.7:6443", api)


def test_an_unreachable_worker_is_exit_3_saying_where() -> None:
    err = errors.Unreachable("worker-1 https://10.0.0.7:6443: ClientConnectorError: refused")
    failure = remote_job().error(err)
    assert failure.code == EXIT_UNREACHABLE
    assert failure.message.startswith(
        "cannot reach worker worker-1 at https://10.0.0.7:6443 (ClientConnectorError: refused): "
        "kfed reads the logs from the worker itself"
    )


def test_a_worker_that_forbids_it_names_the_permissions_missing() -> None:
    err = errors.Forbidden(403, "Forbidden", 'pods "light-job-x" is forbidden')
    failure = remote_job().error(err)
    assert failure.code == EXIT_FAILED
    assert "get jobs, list pods and get pods/log in ml-jobs" in failure.message
    assert "kfed-manager-remote" in failure.message
