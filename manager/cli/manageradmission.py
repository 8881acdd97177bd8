"""What the manager's admission core would decide for a Job now, asked of the real core
(``manager.core``) on a snapshot of the manager (``snapshot.py``), changing nothing.

The Job becomes the Workload the manager's Job integration would create, and the core runs
one scheduling cycle with it as the only pending workload: it is admitted (within its
ClusterQueue's quota, or borrowing from the cohort), or preempts workloads, or stays pending
with the core's reason. More cycles on changed snapshots answer the rest, in the core's own
terms again:

- the flavors it gets after preempting: the cycle once its victims are gone;
- whether a pending Job can ever be admitted, and with which flavors: the cycle with no
  workload holding quota (what Kueue calls "even when its cohort is idle");
- why the core passed over a flavor listed before the one it chose: the cycle with that
  flavor alone in its resource group.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from manager import core
from manager.api import dra
from manager.api.workload import Workload
from manager.cli.common import usage_error
from manager.cli.jobfiles import display_name
from manager.cli.snapshot import UNUSABLE, Snapshot, unusable_reason
from manager.controllers import convert, jobworkload
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.workloads import priority_of

Obj = dict[str, Any]


class Outcome(StrEnum):
    FITS = "fits"
    """Quota reserved at once, within the ClusterQueue's own quota."""
    BORROWS = "borrows"
    """Quota reserved at once, borrowing unused quota of its cohort."""
    PREEMPTS = "preempts"
    """Quota reserved once the workloads it preempts have given theirs back."""
    WAITS = "waits"
    """Pending until quota is released; nothing can be preempted for it now."""
    NEVER = "never"
    """Pending even with no other workload holding quota: never, as configured."""


@dataclass(frozen=True, slots=True)
class Decision:
    outcome: Outcome
    flavors: dict[str, str]
    """Resource -> flavor; for WAITS, those it would get once quota is free (none: NEVER)."""
    usage: dict[tuple[str, str], int]
    """(flavor, resource) -> total quota the Job would hold, in core units."""
    reason: str = ""
    """The core's words: the cohort it borrows from, why it waits, why never."""
    victims: tuple[str, ...] = ()
    """Workloads it preempts, with the core's reason for each."""
    passed_over: tuple[str, ...] = ()
    """Flavors listed before the chosen one, and why the core passed them over."""

    @property
    def fits_now(self) -> bool:
        return self.outcome in (Outcome.FITS, Outcome.BORROWS)


def workload_of(
    job: Obj,
    snapshot: Snapshot,
    *,
    now: float,
    kind: JobKind = BATCH_JOB,
    device_charge: dra.Charge | dra.Refused | None = None,
) -> core.Workload:
    """The job as the manager's core would see it once created now: the Workload its kind's
    integration creates (with what its devices are charged, ``jobworkload.device_charge``),
    converted as its Workload controller converts it (``job`` as the kind's
    ``with_references`` returned it)."""
    body = jobworkload.workload_for_job(job, snapshot.priority_class_value, kind, device_charge)
    try:
        model = Workload.model_validate(body)
        return convert.workload(
            model, priority=priority_of(model, snapshot.priority_class_value), creation_time=now
        )
    except UNUSABLE as err:
        raise usage_error(
            f"{display_name(job)} does not make a valid Workload: {unusable_reason(err)}"
        ) from None


@dataclass(frozen=True, slots=True)
class _Cycle:
    admit: core.Admit | None = None
    preempt: core.Preempt | None = None
    pending: core.PendingReason | None = None


def _cycle(
    snapshot: Snapshot,
    workload: core.Workload,
    now: float,
    *,
    idle: bool = False,
    without: Collection[str] = (),
    cluster_queue: core.ClusterQueue | None = None,
) -> _Cycle:
    """One scheduling cycle of a fresh core with ``workload`` its only pending workload (see
    ``Snapshot.admission_core`` for the options)."""
    admission_core = snapshot.admission_core(
        idle=idle,
        # A workload of the same key holding quota would be the Job itself: leave it out.
        without={*without, workload.key},
        cluster_queue=cluster_queue,
    )
    admission_core.add_workload(workload)
    result = admission_core.schedule(now)
    admit = next((a for a in result.admitted if a.workload == workload.key), None)
    if admit is not None:
        return _Cycle(admit=admit)
    preempt = next((p for p in result.preempted if p.preemptor == workload.key), None)
    return _Cycle(preempt=preempt, pending=admission_core.pending_reason(workload.key))


def _flavors(admit: core.Admit | None) -> dict[str, str]:
    if admit is None:
        return {}
    return {
        str(r): str(f)
        for psa in admit.admission.pod_set_assignments
        for r, f in psa.flavors.items()
    }


def _usage(admit: core.Admit | None) -> dict[tuple[str, str], int]:
    if admit is None:
        return {}
    return {(str(f), str(r)): v for (f, r), v in admit.admission.usage().items()}


def _why_not(flavor: str, cycle: _Cycle, cohort: str | None) -> str:
    """Why the core went past ``flavor``: its verdict with that flavor alone (the core's own
    reason names the flavor)."""
    if cycle.admit is not None and cycle.admit.borrowing:
        return f"flavor {flavor} fits only by borrowing from cohort {cohort}"
    if cycle.preempt is not None:
        return f"flavor {flavor} fits only by preempting {len(cycle.preempt.victims)} workload(s)"
    if cycle.pending is not None:
        return cycle.pending.message
    return f"flavor {flavor} fits"


def _passed_over(
    snapshot: Snapshot,
    workload: core.Workload,
    now: float,
    cq: core.ClusterQueue | None,
    flavors: dict[str, str],
) -> tuple[str, ...]:
    if cq is None:
        return ()
    notes = []
    for index, rg in enumerate(cq.resource_groups):
        chosen = {flavors[r] for r in rg.covered_resources if r in flavors}
        if len(chosen) != 1:
            continue
        for fq in rg.flavors:
            if fq.name in chosen:
                break
            groups = list(cq.resource_groups)
            groups[index] = dataclasses.replace(rg, flavors=(fq,))
            alone = dataclasses.replace(cq, resource_groups=tuple(groups))
            cycle = _cycle(snapshot, workload, now, cluster_queue=alone)
            notes.append(_why_not(fq.name, cycle, cq.cohort))
    return tuple(notes)


def _cluster_queue(snapshot: Snapshot, workload: core.Workload) -> core.ClusterQueue | None:
    lq = snapshot.local_queues.get(workload.local_queue)
    return snapshot.cluster_queues.get(lq.cluster_queue) if lq is not None else None


def _never(snapshot: Snapshot, workload: core.Workload, pending: core.PendingReason | None) -> str:
    """The core's reason, and why a queue it calls missing is unusable, when it exists."""
    why = pending.message if pending is not None else "not admitted"
    lq = snapshot.local_queues.get(workload.local_queue)
    queues = [("LocalQueue", str(workload.local_queue))]
    if lq is not None:
        queues.append(("ClusterQueue", str(lq.cluster_queue)))
    for kind, key in queues:
        problem = snapshot.invalid.get(f"{kind}/{key}")
        if problem is not None:
            why += f" ({kind} {key} is not valid: {problem})"
    return why


def decide(snapshot: Snapshot, workload: core.Workload, *, now: float) -> Decision:
    """What the manager's core decides for ``workload`` now (see the module docstring)."""
    cq = _cluster_queue(snapshot, workload)
    current = _cycle(snapshot, workload, now)
    admit = current.admit
    victims: tuple[core.Victim, ...] = ()
    reason = ""
    if admit is not None:
        outcome = Outcome.BORROWS if admit.borrowing else Outcome.FITS
        if admit.borrowing and cq is not None:
            reason = f"borrowing from cohort {cq.cohort}"
    elif current.preempt is not None:
        outcome, victims = Outcome.PREEMPTS, current.preempt.victims
        # Its flavors: those it is admitted with once the victims have released their quota.
        admit = _cycle(snapshot, workload, now, without={v.workload for v in victims}).admit
    else:
        idle = _cycle(snapshot, workload, now, idle=True)
        if idle.admit is None:
            return Decision(Outcome.NEVER, {}, {}, _never(snapshot, workload, idle.pending))
        outcome, admit = Outcome.WAITS, idle.admit
        reason = current.pending.message if current.pending is not None else ""
    flavors = _flavors(admit)
    return Decision(
        outcome,
        flavors,
        _usage(admit),
        reason,
        victims=tuple(f"{v.workload} ({v.reason.human})" for v in victims),
        passed_over=_passed_over(snapshot, workload, now, cq, flavors),
    )
