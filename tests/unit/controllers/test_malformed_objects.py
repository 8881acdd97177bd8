"""A malformed object never stops a controller: its reconcile fails with the view's clear
error, the worker loop logs it, backs that key off and goes on with the others."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from e2e.waiting import wait_for
from manager.api.view import MalformedObject
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.runtime import run_workers
from manager.kube.workqueue import WorkQueue

JOBS: dict[str, dict[str, Any]] = {
    "team/bad": {"kind": "Job", "metadata": {"name": "bad", "namespace": "team"}, "spec": 7},
    "team/good": {"kind": "Job", "metadata": {"name": "good", "namespace": "team"}, "spec": {}},
}


async def test_a_malformed_job_is_logged_and_retried_while_others_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue = WorkQueue(name="jobs", backoff_initial=0.01, backoff_cap=0.02)
    seen: list[str] = []

    async def reconcile(key: str) -> float | None:
        seen.append(key)
        BATCH_JOB.pod_sets(JOBS[key])
        return None

    queue.add("team/bad")
    queue.add("team/good")
    with caplog.at_level(logging.ERROR):
        workers = asyncio.create_task(run_workers(queue, reconcile, 1))
        await wait_for(
            lambda: seen.count("team/bad") >= 2 and "team/good" in seen,
            timeout=10,
            what="the bad job retried and the good one done",
        )
        queue.close()
        await asyncio.wait_for(workers, timeout=10)
    assert queue.failures("team/bad") >= 1 and queue.failures("team/good") == 0
    failed = [r for r in caplog.records if "team/bad failed" in r.getMessage()]
    assert failed and isinstance(failed[0].exc_info[1], MalformedObject)  # type: ignore[index]
    assert "Job team/bad: spec is not an object (got int)" in str(failed[0].exc_info[1])  # type: ignore[index]
