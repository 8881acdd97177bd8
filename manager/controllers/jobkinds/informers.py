"""One informer per kind of job, and handlers that every kind's informer gets, a kind added
later included (its CRD appeared after the start): the manager's own jobs (``ClusterState``)
and ours on a worker (``RemoteCluster``) are followed the same way whatever their kind."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial

from manager.controllers.jobkinds.base import JobKind
from manager.kube.api import Obj
from manager.kube.informer import Event, IndexFunc, Informer

KindHandler = Callable[[JobKind, Event], None]
IndexSpec = tuple[str, IndexFunc]


class JobInformers(Mapping[JobKind, Informer]):
    def __init__(self, *indices: IndexSpec) -> None:
        self._by_kind: dict[JobKind, Informer] = {}
        self._handlers: list[KindHandler] = []
        self._indices = indices
        """Indices every kind's informer keeps (``Informer.add_index``)."""

    def add(self, kind: JobKind, informer: Informer) -> Informer:
        """Follow ``kind`` with ``informer`` (the caller runs it); the informer already
        following it when there is one."""
        if kind in self._by_kind:
            return self._by_kind[kind]
        for name, func in self._indices:
            informer.add_index(name, func)
        for handler in self._handlers:
            informer.subscribe(partial(handler, kind))
        self._by_kind[kind] = informer
        return informer

    def subscribe(self, handler: KindHandler) -> None:
        """``handler(kind, event)`` for every event of every kind, now and added later."""
        self._handlers.append(handler)
        for kind, informer in self._by_kind.items():
            informer.subscribe(partial(handler, kind))

    def by_index(self, name: str, value: str) -> list[tuple[JobKind, Obj]]:
        """Every kind's objects filed under ``value`` in index ``name``."""
        return [
            (kind, obj)
            for kind, informer in self._by_kind.items()
            for obj in informer.by_index(name, value)
        ]

    def __getitem__(self, kind: JobKind) -> Informer:
        return self._by_kind[kind]

    def __iter__(self) -> Iterator[JobKind]:
        return iter(self._by_kind)

    def __len__(self) -> int:
        return len(self._by_kind)
