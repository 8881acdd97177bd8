"""The applier carries actions out in order and decides nothing: each action becomes the
write it names or a change of the record. A write that could not be made ends the list (the
next read judges what it met). The writer here is a recording stand-in for ``Writes``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from manager.federation.decisions import actions as do
from manager.federation.decisions.group import WorkloadGroup
from manager.federation.engine.applier import RACE_RECHECK, Applier
from manager.federation.engine.records import Records, Stats, ToldRefusals
from manager.federation.engine.writes import Created
from manager.federation.settings import FederationSettings

KEY, W1, W2 = "ml/job-a", "worker-1", "worker-2"
WL: dict[str, Any] = {"metadata": {"name": "job-a", "namespace": "ml", "uid": "u1"}}


class RecordingWriter:
    def __init__(self, job: Created = Created.CREATED, copy: Created = Created.CREATED) -> None:
        self.job, self.copy = job, copy
        self.done: list[tuple[str, ...]] = []

    async def create_copy(self, remote: Any, obj: Any) -> Created:
        self.done.append(("create_copy", remote.name))
        return self.copy

    async def create_job(self, remote: Any, obj: Any) -> Created:
        self.done.append(("create_job", remote.name))
        return self.job

    async def set_ready(self, obj: Any, check: str, cluster: str) -> None:
        self.done.append(("set_ready", cluster))

    async def delete_copy(self, remote: Any, key: str, obj: Any) -> bool:
        self.done.append(("delete_copy", remote.name))
        return True

    async def set_check(self, obj: Any, check: str, state: str, message: str, **kw: Any) -> None:
        self.done.append(("set_check", state, message))

    def wake_manager(self, key: str) -> None:
        self.done.append(("wake", key))


def applier(writer: RecordingWriter, records: Records, now: float = 100.0) -> Applier:
    remotes = {W1: SimpleNamespace(name=W1), W2: SimpleNamespace(name=W2)}
    return Applier(
        cast(Any, SimpleNamespace(events=None, metrics=None)),
        cast(Any, SimpleNamespace(remote=remotes.get)),
        records,
        cast(Any, writer),
        cast(Any, None),
        settings=FederationSettings(),
        stats=Stats(),
        told_refusals=ToldRefusals(),
        clock=lambda: now,
    )


GROUP = WorkloadGroup(KEY, WL, "multikueue", (W1, W2))


async def test_a_job_name_taken_on_create_is_noted_and_the_rest_waits() -> None:
    writer, records = RecordingWriter(job=Created.TAKEN), Records()
    after = await applier(writer, records).apply(
        GROUP, [do.NoteWinner(W1), do.CreateJob(W1), do.SetReady(W1)]
    )
    assert after == RACE_RECHECK
    assert writer.done == [("create_job", W1)], "never Ready on a worker whose Job is not ours"
    record = records.get(KEY)
    assert record is not None and record.winner == W1 and record.name_taken == {W1}


async def test_a_refused_worker_is_blocked_its_copy_taken_back_and_the_record_says_so() -> None:
    writer, records = RecordingWriter(), Records()
    records(KEY).winner = W1
    after = await applier(writer, records).apply(
        GROUP,
        [
            do.ForgetNameTaken(W1),
            do.Block(W1, "theirs", 160.0),
            do.Refuse(W1),
            do.Wait("not placed on worker-1: theirs"),
            do.LookAgain(0.1),
        ],
    )
    assert after == 0.1
    assert writer.done == [
        ("delete_copy", W1),
        ("set_check", "Pending", "not placed on worker-1: theirs"),
    ]
    record = records(KEY)
    assert record.blocked == {W1: ("theirs", 160.0)}
    assert record.winner is None and record.placement is None and record.tried == {W1}


async def test_copies_go_on_the_workers_named_and_the_manager_is_told() -> None:
    writer, records = RecordingWriter(), Records()
    await applier(writer, records).apply(
        WorkloadGroup(KEY), [do.DeleteCopies((W1, W2)), do.ForgetRecord()]
    )
    assert sorted(writer.done) == [("delete_copy", W1), ("delete_copy", W2), ("wake", KEY)]
    assert records.get(KEY) is None


async def test_a_copy_whose_name_is_taken_stays_sent_and_is_judged_on_the_next_read() -> None:
    writer, records = RecordingWriter(copy=Created.TAKEN), Records()
    send = do.Send(
        cluster=W1,
        worker_cluster_queue="gpu-cq",
        reason="fits",
        message="dispatched to worker-1: fits",
        usage={},
        deadline=130.0,
        nominate_at=101.0,
        candidates=("worker-1: fits",),
        tried_before=(),
        then_after=1.0,
        retry_after=1.0,
    )
    after = await applier(writer, records).apply(GROUP, [send])
    assert after == RACE_RECHECK
    assert writer.done == [("create_copy", W1)], "no dispatched Event, no annotation yet"
    record = records(KEY)
    assert record.copy_taken == {W1}
    assert record.placement is not None and record.placement.cluster == W1
