"""Status back to the manager (pure): what of the remote job's status the manager's job
takes, and how a run that ended is recorded as the workload's result. The group read gives
the facts (``engine/runreading.py``); the applier writes the patch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from manager.federation.decisions import actions as do


@dataclass(frozen=True, slots=True)
class SyncFacts:
    """The manager's job and the remote job on the worker it runs on."""

    cluster: str
    current: Mapping[str, Any]
    """The manager's job's status."""
    remote: Mapping[str, Any] | None
    """The status the manager's job takes from the remote job (its kind's
    ``status_for_manager``); None: no remote job that counts (or no manager job)."""
    suspended: bool = False
    """The manager's job is suspended (requeued)."""
    remote_ended: bool = False
    counters: tuple[str, ...] = ()
    """Status fields that count running pods, omitted by the worker once they drop to 0."""
    finished_by_job: bool = True
    """The manager's job controller finishes the Workload from the job's status; False (a
    kind kfed does not know): the Workload is finished from the run's end, as upstream."""
    topology: Mapping[str, Any] | None = None
    """TAS: the worker copy's topology assignments (pod set -> ``topologyAssignment``) the
    manager's Workload does not show yet (None: nothing to bring back)."""
    topology_text: str = ""
    """Those assignments with every level named: the annotation ``kfed.io/topology``."""


@dataclass(frozen=True, slots=True)
class RunEnd:
    """How a run that is the job's result ended, where its job's status does not say it."""

    succeeded: bool
    message: str


def status_patch(facts: SyncFacts) -> dict[str, Any] | None:
    """The patch that makes the manager's job's status the remote job's (None: nothing to
    write)."""
    status = facts.remote
    if status is None:
        return None
    if facts.suspended and not facts.remote_ended:
        return None  # requeued: only a final state (it finished there unseen) is copied
    current = facts.current
    if not status or status == current:
        return None
    # A merge patch only overwrites: fields the worker no longer reports (active: 0 is
    # omitted) must be removed explicitly, or a finished Job would keep active pods.
    dropped = [k for k in facts.counters if k in current and k not in status]
    patch = {**dict.fromkeys(dropped), **status}
    if current.get("startTime"):
        # The apiserver refuses to move startTime of a running Job: after a move to another
        # worker the manager's Job keeps the time it first started.
        patch.pop("startTime", None)
    if all(current.get(k) == v for k, v in patch.items()):
        return None
    return patch


def topology_back(facts: SyncFacts | None) -> list[do.Action]:
    """TAS: where the pods went, to write on the manager's Workload."""
    if facts is None or facts.topology is None:
        return []
    return [do.CopyTopologyBack(facts.cluster, facts.topology, facts.topology_text)]


def sync(facts: SyncFacts | None) -> list[do.Action]:
    if facts is None:
        return []
    # Where the pods went before the job's status (upstream's order: assigned, then running).
    result = topology_back(facts)
    patch = status_patch(facts)
    return [*result, do.PatchJobStatus(patch)] if patch is not None else result


def finish(facts: SyncFacts | None, end: RunEnd | None) -> list[do.Action]:
    """The run on ``facts.cluster`` is the job's result: its job's final status, which the
    manager's Job controller finishes the Workload from (for a kind kfed does not know,
    the Workload is also finished from the run's end); without one (no manager job, or
    none there that counts), the Workload finished from the copy's or its job's end."""
    if facts is not None and facts.remote is not None:
        if facts.finished_by_job or end is None:
            return sync(facts)
        return [*sync(facts), do.FinishWorkload(end.succeeded, end.message)]
    told = topology_back(facts)
    if end is None:
        return told
    return [*told, do.FinishWorkload(end.succeeded, end.message)]
