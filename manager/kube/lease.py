"""coordination.k8s.io/v1 Lease records: reading, writing, and judging them by local time.

Both leader election and worker fencing use Leases. Neither trusts the other side's clock:
like client-go, a holder is considered alive while its record keeps *changing* as seen by our
own monotonic clock, not by comparing its renewTime with our wall clock.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from manager.api.view import at
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi, Obj


def micro_time(when: dt.datetime | None = None) -> str:
    when = when or dt.datetime.now(dt.UTC)
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    holder: str
    duration_seconds: int
    renew_time: str
    acquire_time: str
    transitions: int

    @classmethod
    def from_lease(cls, lease: Obj) -> LeaseRecord:
        spec = at(lease, "spec")
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            renew_time=str(spec.get("renewTime") or ""),
            acquire_time=str(spec.get("acquireTime") or ""),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.duration_seconds,
            "renewTime": self.renew_time,
            "acquireTime": self.acquire_time,
            "leaseTransitions": self.transitions,
        }


class LeaseObserver:
    """Tracks when a Lease's record last changed, by our monotonic clock."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.record: LeaseRecord | None = None
        self.observed_at: float = 0.0

    def observe(self, record: LeaseRecord | None) -> None:
        if record != self.record:
            self.record = record
            self.observed_at = self._clock()

    def held_by_other(self, me: str) -> bool:
        """True while someone else holds the lease and has renewed within its duration."""
        r = self.record
        if r is None or not r.holder or r.holder == me:
            return False
        return self.observed_at + r.duration_seconds > self._clock()

    def expired(self) -> bool:
        """True when the lease's holder has not renewed within its duration (or released it)."""
        r = self.record
        if r is None or not r.holder:
            return True
        return self.observed_at + r.duration_seconds <= self._clock()


async def read(api: KubeApi, namespace: str, name: str) -> tuple[LeaseRecord | None, Obj | None]:
    try:
        lease = await api.get(R.LEASES, name, namespace)
    except errors.NotFound:
        return None, None
    return LeaseRecord.from_lease(lease), lease


async def write(
    api: KubeApi,
    namespace: str,
    name: str,
    record: LeaseRecord,
    current: Obj | None,
    *,
    annotations: dict[str, str] | None = None,
) -> Obj:
    """Create the Lease, or replace it guarded by the resourceVersion we read (so two writers
    cannot both win: the loser gets errors.Conflict). ``annotations`` are set on it too (the
    worker shim's heartbeat says its mode so)."""
    if current is None:
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if annotations:
            metadata["annotations"] = annotations
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": record.spec(),
        }
        return await api.create(R.LEASES, body, namespace)
    body = {**current, "spec": record.spec()}
    if annotations:
        meta = at(current, "metadata")
        body["metadata"] = {**meta, "annotations": {**at(meta, "annotations"), **annotations}}
    return await api.replace(R.LEASES, body)
