"""Quota and usage shapes shared by ClusterQueue, Cohort and LocalQueue.

A quota is declared per resource group: the group covers some resources (cpu, memory,
nvidia.com/gpu) and lists flavors in order of preference; each flavor gives a quota for
every covered resource, in the same order. Admission tries the flavors in that order.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field

from manager.api.meta import KubeModel
from manager.api.quantity import Quantity
from manager.api.schema import (
    DNSSubdomain,
    Int64,
    K8s,
    ResourceName,
    Rule,
    model_extra,
)


class ResourceQuota(KubeModel):
    """The quota of one resource in one flavor."""

    name: ResourceName
    """The resource, e.g. ``cpu``, ``memory`` or ``nvidia.com/gpu``."""
    nominal_quota: Quantity
    """What this queue (or cohort) owns of the resource in this flavor.

    In a cohort, unused nominal quota can be borrowed by the other members.
    """
    borrowing_limit: Quantity | None = None
    """The most that may be borrowed from the cohort on top of the nominal quota.

    Unset means no limit. Only allowed when the queue is in a cohort.
    """
    lending_limit: Quantity | None = None
    """The most of the nominal quota that the cohort may borrow. Unset means all of it."""


class FlavorQuotas(KubeModel):
    """The quotas of one flavor, for each resource its group covers."""

    name: DNSSubdomain
    """The ResourceFlavor."""
    resources: Annotated[
        list[ResourceQuota],
        Field(min_length=1, max_length=64),
        K8s(list_type="map", list_map_keys=("name",)),
    ]
    """One quota per covered resource, in the order of ``coveredResources``."""


class ResourceGroup(KubeModel):
    """Resources that are assigned flavors together, with the flavors to try in order."""

    model_config = ConfigDict(
        json_schema_extra=model_extra(
            Rule(
                rule="self.flavors.all(f, f.resources.map(r, r.name) == self.coveredResources)",
                message="each flavor must list exactly the coveredResources, in the same order",
                field_path=".flavors",
            ),
            Rule(
                rule="self.coveredResources.all(r, self.coveredResources.exists_one(x, x == r))",
                message="coveredResources must not repeat a resource",
                field_path=".coveredResources",
            ),
        )
    )

    covered_resources: Annotated[
        list[ResourceName], Field(min_length=1, max_length=64), K8s(list_type="atomic")
    ]
    """The resources this group covers, e.g. ``[cpu, memory, nvidia.com/gpu]``."""
    flavors: Annotated[
        list[FlavorQuotas],
        Field(min_length=1, max_length=64),
        K8s(list_type="map", list_map_keys=("name",)),
    ]
    """The flavors to try, most preferred first."""


def resource_groups_rules(parent_field: str) -> tuple[Rule, ...]:
    """CEL rules over all the resource groups of a ClusterQueue or Cohort spec.

    ``parent_field`` names what a borrowing limit needs (``cohortName`` for a
    ClusterQueue, ``parentName`` for a Cohort): without it there is nothing to borrow from.
    """
    return (
        Rule(
            rule=(
                f"(has(self.{parent_field}) && self.{parent_field} != '')"
                " || !has(self.resourceGroups)"
                " || self.resourceGroups.all(rg, rg.flavors.all(f,"
                " f.resources.all(r, !has(r.borrowingLimit))))"
            ),
            message=f"borrowingLimit must not be set when {parent_field} is empty",
            field_path=".resourceGroups",
        ),
        # A group always shares its own names with itself, so "exactly one group shares a
        # name with this group" means no other group repeats one (an exact duplicate of a
        # group is caught too). sets.intersects keeps the estimated CEL cost in budget.
        Rule(
            rule=(
                "!has(self.resourceGroups) || self.resourceGroups.all(a,"
                " self.resourceGroups.exists_one(b,"
                " sets.intersects(a.flavors.map(f, f.name), b.flavors.map(f, f.name))))"
            ),
            message="a flavor must not appear in more than one resource group",
            field_path=".resourceGroups",
        ),
        Rule(
            rule=(
                "!has(self.resourceGroups) || self.resourceGroups.all(a,"
                " self.resourceGroups.exists_one(b,"
                " sets.intersects(a.coveredResources, b.coveredResources)))"
            ),
            message="a resource must not be covered by more than one resource group",
            field_path=".resourceGroups",
        ),
    )


ResourceGroups = Annotated[list[ResourceGroup], Field(max_length=16), K8s(list_type="atomic")]
"""At most 16 resource groups."""


class FairSharing(KubeModel):
    """How a queue or cohort competes for unused quota when fair sharing is enabled."""

    weight: Quantity = Quantity.parse(1)
    """A larger weight gives a larger share of what the cohort has to lend; 0 gives none."""


class FairSharingStatus(KubeModel):
    """The fair-sharing state of a queue or cohort."""

    weighted_share: Int64
    """The share of borrowed resources divided by the weight, as an integer."""


class ResourceUsage(KubeModel):
    """How much of one resource is reserved or used, and how much of that is borrowed."""

    name: ResourceName
    """The resource."""
    total: Quantity | None = None
    """The amount reserved or used."""
    borrowed: Quantity | None = None
    """The part of ``total`` above the nominal quota, i.e. taken from the cohort."""


class FlavorUsage(KubeModel):
    """Usage of one flavor, per resource."""

    name: DNSSubdomain
    """The ResourceFlavor."""
    resources: Annotated[
        list[ResourceUsage], Field(max_length=64), K8s(list_type="map", list_map_keys=("name",))
    ]
    """Usage per resource."""


class LocalQueueResourceUsage(KubeModel):
    """How much of one resource a LocalQueue's workloads reserve or use."""

    name: ResourceName
    """The resource."""
    total: Quantity | None = None
    """The amount reserved or used."""


class LocalQueueFlavorUsage(KubeModel):
    """A LocalQueue's usage of one flavor, per resource."""

    name: DNSSubdomain
    """The ResourceFlavor."""
    resources: Annotated[
        list[LocalQueueResourceUsage],
        Field(max_length=64),
        K8s(list_type="map", list_map_keys=("name",)),
    ]
    """Usage per resource."""


FlavorUsages = Annotated[
    list[FlavorUsage], Field(max_length=64), K8s(list_type="map", list_map_keys=("name",))
]
LocalQueueFlavorUsages = Annotated[
    list[LocalQueueFlavorUsage],
    Field(max_length=64),
    K8s(list_type="map", list_map_keys=("name",)),
]
