"""Read-only status views, shaped like ClusterQueue and LocalQueue ``.status``."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from manager.core.model import ClusterQueueName, FlavorName, LocalQueueKey, ResourceName


class WorkloadState(StrEnum):
    PENDING = "Pending"
    QUOTA_RESERVED = "QuotaReserved"  # reserving: waiting for admission checks
    ADMITTED = "Admitted"  # quota reserved and every admission check Ready


@dataclass(frozen=True, slots=True)
class ResourceUsage:
    name: ResourceName
    total: int
    borrowed: int = 0


@dataclass(frozen=True, slots=True)
class FlavorUsage:
    name: FlavorName
    resources: tuple[ResourceUsage, ...]


@dataclass(frozen=True, slots=True)
class ClusterQueueStatus:
    name: ClusterQueueName
    active: bool
    reason: str
    """Active condition reason: "Ready", or why not (e.g. "FlavorNotFound", "Stopped")."""
    message: str
    pending: int
    reserving: int
    admitted: int
    flavors_reservation: tuple[FlavorUsage, ...]
    """Quota held by every reserving workload (status.flavorsReservation)."""
    flavors_usage: tuple[FlavorUsage, ...]
    """Quota held by admitted workloads only (status.flavorsUsage)."""
    weighted_share: float = 0.0


@dataclass(frozen=True, slots=True)
class LocalQueueStatus:
    key: LocalQueueKey
    active: bool
    reason: str
    message: str
    pending: int
    reserving: int
    admitted: int
    flavors_reservation: tuple[FlavorUsage, ...]
    flavors_usage: tuple[FlavorUsage, ...]
