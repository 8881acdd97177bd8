"""The dispatcher's reconcile has one shape: read the workload's group, decide, apply.
Traced on a live manager while the article's light job goes from submission to Admitted:
every call into the writers (``writes.py``, ``statuswrites.py``, ``jobstatus.py``) made by a
reconcile is made under ``Applier.apply``, and no decision module is entered under it but
``checkstatus``: its pure transforms are what a status write applies to the object it writes
(again to the freshest one after a conflict), so they run inside the write by design. Before
the engine's finish (issue #31), the writer was entered before the decision and read for it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from e2e.waiting import wait_for
from manager.controllers import workloadstatus as ws
from manager.federation.engine import applier, dispatch, jobstatus, statuswrites, writes
from manager.kube import resources as R
from tests.integration.federation import article
from tests.integration.federation.bed import Bed

RECONCILE: CodeType = dispatch.Dispatcher.reconcile.__code__
APPLY: CodeType = applier.Applier.apply.__code__
# Plain strings, compared with each code object's file name as imported: the hook runs on
# every call the process makes while it is set, so it must cost next to nothing.
WRITERS = {m.__file__ for m in (writes, statuswrites, jobstatus)}
DECISIONS = str(Path(dispatch.__file__ or "").parent.parent / "decisions") + "/"
STATUS_TRANSFORMS = DECISIONS + "checkstatus.py"


def stack(frame: FrameType | None) -> Iterator[CodeType]:
    while frame is not None:
        yield frame.f_code
        frame = frame.f_back


async def test_a_reconcile_writes_only_through_its_applier_and_decides_nothing_there(
    article_bed: Bed,
) -> None:
    bed = article_bed
    await bed.start_federation()
    writes_seen: list[str] = []
    stray_writes: list[str] = []
    decided_while_applying: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        # Fresh calls only: a coroutine resuming after an await is not a new entry.
        if event != "call" or frame.f_lasti > 4:
            return
        where = frame.f_code.co_filename
        is_writer = where in WRITERS
        is_decision = where.startswith(DECISIONS) and where != STATUS_TRANSFORMS
        if not (is_writer or is_decision):
            return
        codes = list(stack(frame.f_back))
        if RECONCILE not in codes:
            return  # the garbage collection, a worker's callbacks: not a reconcile
        name = f"{Path(where).name}:{frame.f_code.co_name}"
        if is_writer:
            writes_seen.append(name)
            if APPLY not in codes:
                stray_writes.append(name)
        elif APPLY in codes:
            decided_while_applying.append(name)

    sys.setprofile(profile)
    try:
        await bed.manager_api.create(R.JOBS, article.seed_job("02-light-job.yaml"), article.NS)

        async def admitted() -> bool:
            items = (await bed.manager_api.list(R.WORKLOADS, article.NS))["items"]
            return any(ws.is_admitted(w) for w in items)

        await wait_for(admitted, timeout=60, what="the light job's workload Admitted")
    finally:
        sys.setprofile(None)
    assert writes_seen, "no reconcile wrote anything: the trace saw nothing"
    assert not stray_writes, f"writes outside the applier: {stray_writes}"
    assert not decided_while_applying, f"decisions under the applier: {decided_while_applying}"
