"""One workload as the dispatcher reconciles it, read once (upstream MultiKueue's
``readGroup``): the manager's Workload and its federation, its copies on the workers, the
run that ended on one of them, and the facts about the worker it is placed on.

``grouping.GroupReader.read`` is the one place a reconcile reads (the placement facts in
``placing.PlacingReader``, the facts of its runs in ``runreading.RunReader``, which it
calls, each fresh read there named with its reason); ``decide.py`` turns the group into
actions without reading anything, and ``applier.py`` carries them out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from manager.federation.decisions import following, jobsync, placement, routing, winning

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class WorkloadGroup:
    key: str
    workload: Obj | None = None
    """The manager's Workload (None: it is gone)."""
    check: str = ""
    """Its MultiKueue check ("" when its ClusterQueue is not federated)."""
    workers: tuple[str, ...] = ()
    """The workers of the check's MultiKueueConfig, in order."""
    copies: Mapping[str, Obj] = field(default_factory=dict)
    """Its copies, by connected worker."""
    finished_copy: tuple[str, Obj] | None = None
    """A copy whose run ended on its own (the job's result), with its worker."""
    facts: routing.WorkloadFacts = field(
        default_factory=lambda: routing.WorkloadFacts(exists=False)
    )
    """What ``routing.route`` needs."""
    placed_on: following.WorkerFacts | None = None
    """The worker its check is Ready on, and how it stands (None: not placed)."""
    ran_on: str = ""
    """Finished: the worker its run ended on (``retaining.ran_on``)."""
    placing: placement.PlacingFacts | None = None
    """To be placed (its check Pending): what placing it needs (``placement.place``)."""
    wins: Mapping[str, winning.WinFacts] = field(default_factory=dict)
    """By worker whose copy could win now (admitted, ran, or the winner chosen earlier):
    what making it the one run needs (``winning.win``)."""
    holders: tuple[str, ...] = ()
    """Connected workers that hold a copy of it or one of our jobs made for it."""
    ended_unseen: frozenset[str] = frozenset()
    """Of ``holders``, those where its run ended, read afresh (only for a workload that
    lives on unfinished and whose copies are to go): those copies are kept."""
    sync: jobsync.SyncFacts | None = None
    """Following it, or recording its run's end: its job there and the manager's."""
    run_end: jobsync.RunEnd | None = None
    """Recording its run's end: how the run ended, from its copy or its job there."""

    @property
    def federated(self) -> bool:
        return bool(self.check)

    @property
    def placed_copy(self) -> Obj | None:
        return self.copies.get(self.placed_on.name) if self.placed_on is not None else None
