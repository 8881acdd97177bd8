"""What the worker registry tells about the workers: a typed subscription
(``ClusterRegistry.listen``), so that grep and a call trace follow every call."""

from __future__ import annotations

from typing import Protocol

from manager.federation.workers.remote import RemoteCluster


class WorkerListener(Protocol):
    """What the registry tells about the workers, to whoever ``listen``s (the dispatcher)."""

    def attach(self, remote: RemoteCluster) -> None:
        """A new connection to a worker: follow what happens there."""

    async def recover(self, remote: RemoteCluster) -> None:
        """A lost worker is reachable again: clean it up before anything else happens."""

    def capacity_changed(self) -> None:
        """A worker's queues, our copies there, or the set of workers changed."""

    def connectivity_changed(self, remote: RemoteCluster) -> None:
        """A worker was lost or came back."""

    def maintenance_changed(self, cluster: str) -> None:
        """A worker's maintenance, namespace binding or allowed references changed."""
