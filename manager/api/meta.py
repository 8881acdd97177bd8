"""The shared base of every kfed API model, and the apimachinery (``metav1``) types.

Every model speaks camelCase on the wire and accepts snake_case in Python. Unknown fields
are kept (``extra="allow"``) rather than dropped or rejected: a kfed manager reads objects
written by upstream Kueue (which may carry fields kfed does not model) and must be able to
write them back without losing anything. The generated CRDs, in contrast, prune unknown
fields; see ``crdgen``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from functools import partial
from typing import Annotated, Any, ClassVar, Literal, Self, cast

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, PlainSerializer
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo

from manager.api.schema import K8s


def _format_time(value: datetime) -> str:
    # metav1.Time is RFC 3339 in UTC with whole seconds.
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


Time = Annotated[
    AwareDatetime,
    PlainSerializer(_format_time, return_type=str, when_used="json"),
    K8s(format="date-time"),
]
"""A ``metav1.Time``: timezone-aware in Python, ``2006-01-02T15:04:05Z`` on the wire."""


class KubeModel(BaseModel):
    """Base of all API models: camelCase aliases, snake_case names, unknown fields kept."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        use_attribute_docstrings=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON body to send: camelCase, only the fields that were set, read or changed.

        Leaving untouched fields out lets the apiserver apply its own defaults and keeps
        server-side apply from claiming fields this process never meant to own. A field
        changed in place (``meta.labels["x"] = "y"`` on a defaulted, empty dict) counts as
        set, so such edits are never lost.
        """
        _mark_changed_fields(self)
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


def _mark_changed_fields(model: BaseModel) -> None:
    """Count unset fields whose value no longer equals the default as set, recursively.

    Pydantic only notices assignments (``obj.field = x``); mutating a defaulted list,
    dict or sub-model in place would otherwise be dropped by ``exclude_unset``.
    """
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        for child in _models_in(value):
            _mark_changed_fields(child)
        unset = name not in model.model_fields_set and not info.is_required()
        if unset and value != _default_of(info):
            model.model_fields_set.add(name)


_DEFAULT_MAKERS: dict[int, tuple[FieldInfo, Callable[[], Any]]] = {}


def _default_of(info: FieldInfo) -> Any:
    """The field's default, a factory's called afresh. pydantic's ``get_default`` inspects
    the factory's signature on every call (whether it takes the validated data), which made
    this walk a tenth of a busy controller's CPU; kfed's factories take nothing, so each
    field's maker is found once."""
    cached = _DEFAULT_MAKERS.get(id(info))
    if cached is None or cached[0] is not info:
        factory = info.default_factory
        if factory is not None and not info.default_factory_takes_validated_data:
            maker = cast(Callable[[], Any], factory)
        else:
            maker = partial(info.get_default, call_default_factory=True)
        cached = _DEFAULT_MAKERS[id(info)] = (info, maker)
    return cached[1]()


def _models_in(value: object) -> list[BaseModel]:
    if isinstance(value, BaseModel):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, BaseModel)]
    if isinstance(value, dict):
        return [v for v in value.values() if isinstance(v, BaseModel)]
    return []


class OwnerReference(KubeModel):
    """Identifies the object that owns this one, so deleting the owner collects it."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(KubeModel):
    """The ``metadata`` of a stored object: the parts kfed reads and writes."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: Time | None = None
    deletion_timestamp: Time | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner_references: list[OwnerReference] = Field(default_factory=list)
    finalizers: list[str] = Field(default_factory=list)


class EmbeddedObjectMeta(KubeModel):
    """The ``metadata`` of an embedded pod template: what a CRD may declare there."""

    name: str | None = None
    """Usually unset: pods get their names from their owner."""
    namespace: str | None = None
    """Usually unset: pods are created in their owner's namespace."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Labels of the pods."""
    annotations: dict[str, str] = Field(default_factory=dict)
    """Annotations of the pods."""
    finalizers: list[str] = Field(default_factory=list)
    """Finalizers of the pods."""


class ConditionStatus(StrEnum):
    """The status of a condition, as metav1 defines it."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


_CONDITION_TYPE = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
_CONDITION_REASON = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


class Condition(KubeModel):
    """A ``metav1.Condition``: one aspect of an object's state and when it last changed."""

    type: Annotated[str, Field(max_length=316, pattern=_CONDITION_TYPE)]
    """Type of condition in CamelCase or in foo.example.com/CamelCase."""
    status: ConditionStatus
    """Status of the condition: True, False or Unknown."""
    observed_generation: Annotated[int, Field(ge=0), K8s(format="int64")] | None = None
    """The ``.metadata.generation`` the condition was set from."""
    last_transition_time: Time
    """When the condition last changed from one status to another."""
    reason: Annotated[str, Field(min_length=1, max_length=1024, pattern=_CONDITION_REASON)]
    """A CamelCase identifier of why the condition last changed."""
    message: Annotated[str, Field(max_length=32768)]
    """A human-readable message about the last change; may be empty."""


Conditions = Annotated[
    list[Condition], Field(max_length=16), K8s(list_type="map", list_map_keys=("type",))
]
"""Conditions keyed by type, as every Kueue status holds them (at most 16)."""


def find_condition(conditions: list[Condition], condition_type: str) -> Condition | None:
    """The condition of the given type, if present."""
    return next((c for c in conditions if c.type == condition_type), None)


def is_condition_true(conditions: list[Condition], condition_type: str) -> bool:
    """Whether the condition of the given type is present with status True."""
    found = find_condition(conditions, condition_type)
    return found is not None and found.status == ConditionStatus.TRUE


class LabelSelectorOperator(StrEnum):
    """How a label selector requirement matches values."""

    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


class LabelSelectorRequirement(KubeModel):
    """One ``key operator values`` term of a label selector."""

    key: str
    """The label key."""
    operator: str
    """In, NotIn, Exists or DoesNotExist."""
    values: Annotated[list[str], K8s(list_type="atomic")] = Field(default_factory=list)
    """The values, for In and NotIn."""


class LabelSelector(KubeModel):
    """A ``metav1.LabelSelector``: all of matchLabels and matchExpressions must match."""

    model_config = ConfigDict(json_schema_extra=K8s(map_type="atomic").keywords())

    match_labels: dict[str, str] = Field(default_factory=dict)
    """Labels that must all be present with these values."""
    match_expressions: Annotated[list[LabelSelectorRequirement], K8s(list_type="atomic")] = Field(
        default_factory=list
    )


Scope = Literal["Cluster", "Namespaced"]


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    """One ``kubectl get`` column (``additionalPrinterColumns``)."""

    name: str
    json_path: str
    type: str
    description: str
    priority: int = 0


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    """How a kind is served: names, scope and ``kubectl get`` columns."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    scope: Scope
    short_names: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    status_subresource: bool = True
    selectable_fields: tuple[str, ...] = ()
    """JSON paths of fields a list or watch may select on (``fieldSelector``), the CRD's
    ``selectableFields``: scalar fields only, at most 8 (the apiserver's limits)."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def namespaced(self) -> bool:
        return self.scope == "Namespaced"


class KubeObject(KubeModel):
    """A top-level API object: ``apiVersion``, ``kind`` and ``metadata``.

    Each kind narrows ``api_version`` and ``kind`` to literals with defaults, so parsing a
    dict of another kind or version fails. They count as set even when defaulted, so
    ``to_wire()`` and ``model_dump(exclude_unset=True)`` always include them.
    """

    resource: ClassVar[ResourceInfo]

    api_version: str
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    def model_post_init(self, context: Any, /) -> None:
        self.__pydantic_fields_set__.update(("api_version", "kind"))

    @classmethod
    def new(cls, name: str, namespace: str | None = None, **fields: Any) -> Self:
        """A new object with the given name (and namespace), e.g. ``LocalQueue.new(...)``."""
        metadata = ObjectMeta(name=name)
        if namespace is not None:
            metadata.namespace = namespace
        return cls(metadata=metadata, **fields)
