"""Cohort: a group of ClusterQueues (and cohorts) that lend each other unused quota.

A ClusterQueue joins a cohort by naming it in ``cohortName``; the Cohort object is
optional and only needed to give the cohort quota of its own, a parent, or a weight.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import ConfigDict, Field

from manager.api.constants import GROUP, VERSION
from manager.api.meta import KubeModel, KubeObject, ResourceInfo
from manager.api.quota import FairSharing, FairSharingStatus, ResourceGroups, resource_groups_rules
from manager.api.schema import DNSSubdomain, model_extra


class CohortSpec(KubeModel):
    """A cohort's parent (cohorts form a tree) and its own quota."""

    model_config = ConfigDict(json_schema_extra=model_extra(*resource_groups_rules("parentName")))

    parent_name: DNSSubdomain | None = None
    """The parent cohort; quota not used in this subtree can be lent up the tree."""
    resource_groups: ResourceGroups = Field(default_factory=list)
    """Quota owned by the cohort itself, shared by its members."""
    fair_sharing: FairSharing | None = None
    """The cohort's weight within its parent when fair sharing is enabled."""


class CohortStatus(KubeModel):
    """The fair-sharing state of a cohort."""

    fair_sharing: FairSharingStatus | None = None
    """The cohort's current share when fair sharing is enabled."""


class Cohort(KubeObject):
    """A cohort of ClusterQueues."""

    resource: ClassVar[ResourceInfo] = ResourceInfo(
        group=GROUP,
        version=VERSION,
        kind="Cohort",
        plural="cohorts",
        singular="cohort",
        scope="Cluster",
        short_names=("co",),
    )

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["Cohort"] = "Cohort"
    spec: CohortSpec = Field(default_factory=CohortSpec)
    status: CohortStatus | None = None
