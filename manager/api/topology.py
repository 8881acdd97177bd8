"""Topology-aware scheduling's fields on a Workload, with upstream Kueue v1beta2's schemas.

kfed places pods by topology as upstream's TAS does (docs/tas.md). Every field is kept as
written, bookkeeping ones too (upstream's MultiKueue manager puts a ``topologyRequest`` with
only a pod index label on every pod set): a pruned field makes upstream see its remote copy
differ from its own and recreate it forever.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import ConfigDict, Field

from manager.api.meta import KubeModel
from manager.api.schema import Int32, K8s, Rule, model_extra

LevelName = Annotated[str, Field(max_length=63)]
"""A topology level: a node label key's short form (``cloud.provider.com/rack``)."""
LabelKey = Annotated[str, Field(max_length=317)]


class SliceTopologyConstraint(KubeModel):
    """A slice of the pod set that must fit in one domain of a level."""

    topology: Annotated[str, Field(min_length=1, max_length=63)]
    """The level."""
    size: Annotated[Int32, Field(ge=1)]
    """Pods per slice."""


class TopologyRequest(KubeModel):
    """How a pod set's pods should be placed across a topology."""

    required: LevelName | None = None
    """The level all pods must fit in."""
    preferred: LevelName | None = None
    """The level the pods should fit in, if they can."""
    unconstrained: bool | None = None
    """Any placement in the topology will do."""
    pod_index_label: LabelKey | None = None
    """The pod label with the pod's index."""
    sub_group_index_label: LabelKey | None = None
    """The pod label with its sub-group's index."""
    sub_group_count: Int32 | None = None
    """How many sub-groups the pod set has."""
    pod_set_group_name: Annotated[str, Field(max_length=256)] | None = None
    """Pod sets of the same group are placed together."""
    pod_set_slice_required_topology: LevelName | None = None
    """The level each slice must fit in."""
    pod_set_slice_size: Int32 | None = None
    """Pods per slice."""
    podset_slice_required_topology_constraints: Annotated[
        list[SliceTopologyConstraint], Field(max_length=3), K8s(list_type="atomic")
    ] = Field(default_factory=list)
    """Slices at several levels (upstream's spelling: ``podset``)."""


class DelayedTopologyRequest(StrEnum):
    PENDING = "Pending"
    READY = "Ready"


_EXACTLY_ONE = "exactly one of the fields in [universal individual] must be set"


class PodCounts(KubeModel):
    """Pods per domain: the same for all, or one count each."""

    model_config = ConfigDict(
        json_schema_extra=model_extra(
            Rule(
                rule="[has(self.universal),has(self.individual)].filter(x,x==true).size() == 1",
                message=_EXACTLY_ONE,
            )
        )
    )

    universal: Annotated[Int32, Field(ge=1)] | None = None
    individual: Annotated[
        list[Annotated[Int32, Field(ge=1)]],
        Field(min_length=1, max_length=100000),
        K8s(list_type="atomic"),
    ] = Field(default_factory=list)


class IndividualValues(KubeModel):
    """Per-domain values of a level: a prefix, one root each, a suffix."""

    prefix: Annotated[str, Field(max_length=63)] | None = None
    roots: Annotated[
        list[Annotated[str, Field(max_length=63)]],
        Field(min_length=1, max_length=100000),
        K8s(list_type="atomic"),
    ]
    suffix: Annotated[str, Field(max_length=63)] | None = None


class LevelValues(KubeModel):
    """The values of one level across the slice's domains."""

    model_config = ConfigDict(
        json_schema_extra=model_extra(
            Rule(rule="has(self.universal) != has(self.individual)", message=_EXACTLY_ONE)
        )
    )

    universal: Annotated[str, Field(max_length=63)] | None = None
    individual: IndividualValues | None = None


class TopologyAssignmentSlice(KubeModel):
    """Domains with their pod counts."""

    model_config = ConfigDict(
        json_schema_extra=model_extra(
            Rule(
                rule=(
                    "!has(self.podCounts.individual)"
                    " || size(self.podCounts.individual) == self.domainCount"
                ),
                message="podCounts.individual must have length equal to domainCount",
            ),
            Rule(
                rule=(
                    "self.valuesPerLevel.all(x, !has(x.individual)"
                    " || size(x.individual.roots) == self.domainCount)"
                ),
                message=(
                    "valuesPerLevel.individual, if set, must have roots of length equal to "
                    "domainCount of this TopologyAssignmentSlice"
                ),
            ),
        )
    )

    domain_count: Annotated[Int32, Field(ge=1)]
    pod_counts: PodCounts
    values_per_level: Annotated[
        list[LevelValues], Field(min_length=1, max_length=16), K8s(list_type="atomic")
    ]


class TopologyAssignment(KubeModel):
    """Where a pod set's pods were placed in the topology."""

    model_config = ConfigDict(
        json_schema_extra=model_extra(
            Rule(
                rule="self.slices.all(x, size(x.valuesPerLevel) == size(self.levels))",
                message=(
                    "valuesPerLevel must have the same length as the number of levels in "
                    "this TopologyAssignment"
                ),
            )
        )
    )

    levels: Annotated[list[LabelKey], Field(min_length=1, max_length=16), K8s(list_type="atomic")]
    slices: Annotated[
        list[TopologyAssignmentSlice], Field(max_length=1000), K8s(list_type="atomic")
    ]
