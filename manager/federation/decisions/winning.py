"""A copy won (admitted on its worker, or ran there unrecorded): what makes it the one run
(pure). Every other copy goes first, so at most one worker can ever run the job; then the
pods' ResourceClaimTemplates and the Job are created on the winner, unless a same-named
object stands in the way; then the check is set Ready there.

The never-twice guards on names (``samename.judge``): an object kfed did not create is never
touched, and the worker is refused (blocked for ``foreign_object_recheck``, the copy taken
back, the workload placed elsewhere); ours, left by an earlier workload of the same name, is
waited for (its copy's removal deletes it); ours for this very workload is used as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from manager.federation.decisions import actions as do
from manager.federation.decisions.samename import SameName

EARLIER_RECHECK = 1.0
"""Seconds between looks at an earlier workload's object that must go before ours is made."""
SOURCE_GONE_RECHECK = 5.0
"""Seconds between looks at a ResourceClaimTemplate gone from the manager."""
REFUSED_RECHECK = 0.1
"""Seconds before placing again once a worker was refused for a foreign object."""


@dataclass(frozen=True, slots=True)
class NameThere:
    """What holds the name kfed is to create on the winner, and whose it is."""

    kind: str
    """Job (or the job's kind), ResourceClaimTemplate."""
    name: str
    """namespace/name."""
    whose: SameName = SameName.NONE
    deleting: bool = False
    foreign_reason: str = ""
    """FOREIGN: who made it, as the check and the block say it."""
    source: object = None
    """A ResourceClaimTemplate: the manager's, to copy (None: gone from the manager)."""


@dataclass(frozen=True, slots=True)
class WinFacts:
    cluster: str
    now: float
    others: tuple[str, ...] = ()
    """Workers that hold a copy too (deleted first)."""
    has_job: bool = True
    """The manager's job exists (its Job is created on the winner)."""
    job: NameThere | None = None
    """What holds the job's name on the winner: the informer's (ours only), or read afresh
    after a create met AlreadyExists (``job_read_afresh``)."""
    job_read_afresh: bool = False
    templates: tuple[NameThere, ...] = ()
    """Each ResourceClaimTemplate its pods claim devices from, as on the winner (read
    afresh: no informer watches them there)."""
    foreign_object_recheck: float = 60.0


def win(facts: WinFacts) -> list[do.Action]:
    """The actions that make the copy on ``facts.cluster`` the workload's one run."""
    cluster = facts.cluster
    result: list[do.Action] = [do.NoteWinner(cluster)]
    if facts.others:
        result.append(do.DeleteOtherCopies(facts.others))
    job = facts.job or NameThere("Job", "")
    if facts.job_read_afresh and job.whose is not SameName.EARLIER:
        result.append(do.ForgetNameTaken(cluster))
    blocked = _in_the_way(facts, job)
    if blocked is not None:
        return result + blocked
    if facts.has_job and job.whose is SameName.NONE:
        # Its pods' ResourceClaimTemplates first: the pods name them when they are made.
        for template in facts.templates:
            in_the_way = _in_the_way(facts, template)
            if in_the_way is not None:
                return result + in_the_way
        missing = [t for t in facts.templates if t.whose is SameName.NONE]
        result += [do.CreateClaimTemplate(cluster, t.source) for t in missing]
        result.append(do.CreateJob(cluster))
    return [*result, do.SetReady(cluster)]


def _in_the_way(facts: WinFacts, there: NameThere) -> list[do.Action] | None:
    """What to do about an object that keeps ours from being created (None: nothing)."""
    cluster = facts.cluster
    if there.source is None and there.kind == "ResourceClaimTemplate":
        return [
            do.Wait(
                f"admitted on {cluster}; its {there.kind} {there.name} is gone from the "
                "manager: its pods could not claim their devices there (create it again)"
            ),
            do.LookAgain(SOURCE_GONE_RECHECK),
        ]
    match there.whose:
        case SameName.EARLIER:
            how = "being deleted" if there.deleting else "not yet collected"
            return [
                do.Wait(
                    f"admitted on {cluster}; waiting for the {there.kind} {there.name} of an "
                    f"earlier workload to be removed there ({how})"
                ),
                do.LookAgain(EARLIER_RECHECK),
            ]
        case SameName.FOREIGN:
            # Leave it alone, take our copy back (it holds the worker's quota for nothing)
            # and place the workload elsewhere.
            until = facts.now + facts.foreign_object_recheck
            return [
                do.Block(cluster, there.foreign_reason, until),
                do.Refuse(cluster),
                do.Wait(f"not placed on {cluster}: {there.foreign_reason}"),
                do.LookAgain(REFUSED_RECHECK),
            ]
    return None
