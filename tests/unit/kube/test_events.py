"""The event recorder's correlation, as client-go's: spam filter, aggregation, deduplication
(tools/record/events_cache.go), with a clock the test moves."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from manager.kube.events import (
    AGGREGATED_PREFIX,
    EventRecorder,
    EventSettings,
    TokenBucket,
    reference,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def recorder(clock: Clock, **settings: float) -> EventRecorder:
    return EventRecorder(
        None,
        component="kfed-manager",
        instance="host-a",
        settings=EventSettings(**settings),  # type: ignore[arg-type]
        clock=clock,
        wall=lambda: datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC),
    )


def job(name: str = "train", uid: str = "u-1") -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a", "uid": uid, "resourceVersion": "7"},
    }


JOB = job()


def test_the_first_event_about_an_object_is_a_new_core_v1_event_naming_it() -> None:
    write = recorder(Clock()).correlate(reference(JOB), "Normal", "CreatedWorkload", "Created")
    assert write is not None and not write.repeat
    body = write.body
    assert body["involvedObject"] == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "train",
        "namespace": "team-a",
        "uid": "u-1",
        "resourceVersion": "7",
    }
    assert write.namespace == "team-a" and write.name.startswith("train.")
    assert body["count"] == 1
    assert body["firstTimestamp"] == body["lastTimestamp"] == "2026-12-01T12:00:00Z"
    assert body["source"] == {"component": "kfed-manager", "host": "host-a"}
    assert (body["reportingComponent"], body["reportingInstance"]) == ("kfed-manager", "host-a")


def test_an_event_about_a_cluster_scoped_object_lives_in_default() -> None:
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"}}
    write = recorder(Clock()).correlate(reference(cq), "Warning", "BadConfig", "no flavor")
    assert write is not None and write.namespace == "default"


def test_the_same_event_again_raises_the_count_of_the_one_written() -> None:
    rec = recorder(Clock())
    first = rec.correlate(reference(JOB), "Normal", "Started", "Started")
    again = rec.correlate(reference(JOB), "Normal", "Started", "Started")
    third = rec.correlate(reference(JOB), "Normal", "Started", "Started")
    assert first is not None and again is not None and third is not None
    assert again.repeat and again.name == first.name and again.body["count"] == 2
    assert third.body["count"] == 3


def test_the_tenth_different_message_in_ten_minutes_starts_one_combined_event() -> None:
    rec = recorder(Clock())
    names = set()
    for i in range(9):
        write = rec.correlate(reference(JOB), "Normal", "Pending", f"waiting {i}")
        assert write is not None and not write.repeat
        names.add(write.name)
    assert len(names) == 9
    tenth = rec.correlate(reference(JOB), "Normal", "Pending", "waiting 9")
    eleventh = rec.correlate(reference(JOB), "Normal", "Pending", "waiting 10")
    assert tenth is not None and eleventh is not None
    assert tenth.body["message"] == AGGREGATED_PREFIX + "waiting 9" and not tenth.repeat
    assert eleventh.repeat and eleventh.name == tenth.name
    assert eleventh.body["message"] == AGGREGATED_PREFIX + "waiting 10"
    assert eleventh.body["count"] == 2


def test_aggregation_starts_over_after_its_window() -> None:
    clock = Clock()
    rec = recorder(clock)
    for i in range(9):
        rec.correlate(reference(JOB), "Normal", "Pending", f"waiting {i}")
    clock.now += 601
    write = rec.correlate(reference(JOB), "Normal", "Pending", "waiting 10")
    assert write is not None and not write.body["message"].startswith(AGGREGATED_PREFIX)


def test_the_spam_filter_caps_one_object_at_its_burst_then_one_per_refill() -> None:
    clock = Clock()
    rec = recorder(clock)
    kept = [rec.correlate(reference(JOB), "Normal", f"R{i}", "m") for i in range(30)]
    assert sum(w is not None for w in kept) == 25
    assert rec.dropped["spam"] == 5
    assert rec.correlate(reference(job("other", "u-2")), "Normal", "R", "m") is not None
    clock.now += 300
    assert rec.correlate(reference(JOB), "Normal", "R", "late") is not None
    assert rec.correlate(reference(JOB), "Normal", "R", "later") is None


def test_a_repeat_the_spam_filter_dropped_still_counts_in_the_next_one_written() -> None:
    clock = Clock()
    rec = recorder(clock, spam_burst=1, spam_refill_seconds=10)
    first = rec.correlate(reference(JOB), "Normal", "Started", "Started")
    assert rec.correlate(reference(JOB), "Normal", "Started", "Started") is None
    clock.now += 10
    third = rec.correlate(reference(JOB), "Normal", "Started", "Started")
    assert first is not None and third is not None
    assert third.repeat and third.name == first.name and third.body["count"] == 3
    assert third.body["firstTimestamp"] == first.body["firstTimestamp"]


def test_warnings_and_normal_events_have_separate_spam_budgets() -> None:
    rec = recorder(Clock())
    for i in range(25):
        rec.correlate(reference(JOB), "Normal", "R", f"m{i}")
    assert rec.correlate(reference(JOB), "Warning", "W", "still told") is not None


def test_the_caches_forget_the_least_recently_used_objects() -> None:
    rec = recorder(Clock(), cache_size=2)
    jobs = [job(f"j{i}", f"u{i}") for i in range(3)]
    first = rec.correlate(reference(jobs[0]), "Normal", "R", "m")
    for later in jobs[1:]:
        rec.correlate(reference(later), "Normal", "R", "m")
    again = rec.correlate(reference(jobs[0]), "Normal", "R", "m")
    assert first is not None and again is not None
    assert not again.repeat  # forgotten: written anew rather than growing without bound


def test_a_token_bucket_grants_its_burst_then_its_rate() -> None:
    bucket = TokenBucket(rate=2.0, burst=3, now=0.0)
    assert [bucket.take(0.0) for _ in range(4)] == [True, True, True, False]
    assert bucket.take(0.5) and not bucket.take(0.5)
    assert bucket.take(10.0) and bucket.take(10.0) and bucket.take(10.0)
    assert not bucket.take(10.0)  # never more than the burst saved up


def test_a_recorder_without_an_api_records_nothing() -> None:
    rec = recorder(Clock())
    rec.record(JOB, "Normal", "Started", "Started")
    assert rec.backlog == 0 and not rec.dropped
