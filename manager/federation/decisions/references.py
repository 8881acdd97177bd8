"""Which objects of the worker a job's pods would use, and whether that worker allows them:
pure (no I/O), read by the dispatcher (``placing.py``) and ``kfed whatif`` alike.

A job of manager namespace ``team-a`` runs in namespace ``team-a`` on its worker, and its pods
use that namespace's objects there: their ServiceAccount (``default`` when none is named),
the Secrets and ConfigMaps they mount or read into their environment, their image pull
Secrets, the PersistentVolumeClaims they mount. A worker's MultiKueueCluster may list which
of those its manager's tenants may use, in the annotation ``kfed.io/allowed-references``:

    kfed.io/allowed-references: |
      serviceaccount:*/default, configmap:*/shared-*
      secret:team-a/*, persistentvolumeclaim:team-a/datasets

Rules are ``KIND:NAMESPACE/NAME`` separated by commas or whitespace; NAMESPACE and NAME are
globs (``*``, ``?``, ``[...]``) matched against the job's namespace and the object's name;
KIND is ``secret``, ``configmap``, ``serviceaccount``, ``persistentvolumeclaim`` (or their
plural or kubectl short names) or ``*``. With the annotation, a job goes there only if every
object it references matches some rule; an empty value allows nothing. Without it every
reference is allowed, as upstream MultiKueue. A malformed annotation allows nothing (a typo
must not open the worker): the reason names the rule and what is wrong with it.

The references are those Kubernetes itself counts for a pod (the node authorizer's and the
ServiceAccount admission plugin's ``VisitPodSecretNames`` / ``VisitPodConfigmapNames``), in
every container list, found in every pod spec anywhere in the objects given (a Workload's pod
sets, a Job's template, a JobSet's or RayCluster's nested templates), so no job kind needs
code of its own.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from manager.api.view import annotations_of

Obj = dict[str, Any]

ANNOTATION = "kfed.io/allowed-references"
"""On a MultiKueueCluster: the objects of a job's namespace its pods may use on that worker."""

EVENT_REASON = "ReferencesNotAllowed"
"""The Warning Event on a Workload a worker refused for the objects its pods use."""
MALFORMED_REASON = "AllowedReferencesMalformed"
"""The Warning Event on a MultiKueueCluster whose annotation cannot be read."""
SHOWN = 3
"""References named in a refusal before "and N more"."""


class Kind(StrEnum):
    SECRET = "Secret"
    CONFIG_MAP = "ConfigMap"
    SERVICE_ACCOUNT = "ServiceAccount"
    PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"


KIND_NAMES: Mapping[str, Kind] = {
    "secret": Kind.SECRET,
    "secrets": Kind.SECRET,
    "configmap": Kind.CONFIG_MAP,
    "configmaps": Kind.CONFIG_MAP,
    "cm": Kind.CONFIG_MAP,
    "serviceaccount": Kind.SERVICE_ACCOUNT,
    "serviceaccounts": Kind.SERVICE_ACCOUNT,
    "sa": Kind.SERVICE_ACCOUNT,
    "persistentvolumeclaim": Kind.PERSISTENT_VOLUME_CLAIM,
    "persistentvolumeclaims": Kind.PERSISTENT_VOLUME_CLAIM,
    "pvc": Kind.PERSISTENT_VOLUME_CLAIM,
}
"""The words a rule may use for a kind (case-insensitive): kubectl's names for it."""

ANY_KIND = "*"

# A Kubernetes name (lowercase DNS subdomain characters) with glob characters: anything
# else could never match a name, and is more likely a typo than an intent.
_PATTERN = re.compile(r"[a-z0-9.\-*?\[\]!]+")
_SEPARATORS = re.compile(r"[,\s]+")


@dataclass(frozen=True, order=True, slots=True)
class Reference:
    """An object of the worker a pod would use (always in the pod's own namespace)."""

    kind: Kind
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Rule:
    kind: Kind | None
    """None: any kind (``*``)."""
    namespace: str
    name: str

    def matches(self, ref: Reference) -> bool:
        return (
            (self.kind is None or self.kind is ref.kind)
            and fnmatch.fnmatchcase(ref.namespace, self.namespace)
            and fnmatch.fnmatchcase(ref.name, self.name)
        )

    def __str__(self) -> str:
        kind = ANY_KIND if self.kind is None else self.kind.lower()
        return f"{kind}:{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Rules:
    """A worker's valid ``kfed.io/allowed-references``."""

    rules: tuple[Rule, ...]

    def allows(self, ref: Reference) -> bool:
        return any(rule.matches(ref) for rule in self.rules)


@dataclass(frozen=True, slots=True)
class Malformed:
    """A worker's ``kfed.io/allowed-references`` that cannot be read: it allows nothing."""

    problem: str


Policy = Rules | Malformed | None
"""What a worker allows: rules, nothing (malformed), or everything (no annotation)."""


class MalformedRule(ValueError):
    pass


def parse_rule(text: str) -> Rule:
    kind_text, colon, target = text.partition(":")
    if not colon:
        raise MalformedRule(f"rule {text!r}: expected KIND:NAMESPACE/NAME")
    kind: Kind | None
    if kind_text == ANY_KIND:
        kind = None
    elif (found := KIND_NAMES.get(kind_text.lower())) is not None:
        kind = found
    else:
        raise MalformedRule(
            f"rule {text!r}: unknown kind {kind_text!r} (secret, configmap, serviceaccount, "
            "persistentvolumeclaim or *)"
        )
    namespace, slash, name = target.partition("/")
    if not slash:
        raise MalformedRule(f"rule {text!r}: expected KIND:NAMESPACE/NAME")
    for part, what in ((namespace, "namespace"), (name, "name")):
        if not _PATTERN.fullmatch(part):
            raise MalformedRule(
                f"rule {text!r}: the {what} pattern {part!r} is not a lowercase name with "
                "globs (*, ?, [...])"
            )
    return Rule(kind, namespace, name)


@functools.lru_cache(maxsize=256)
def parse(value: str) -> Rules | Malformed:
    """The rules of an annotation value (cached: every worker's value is read on every
    placement). Malformed when any rule is, naming the first one that is."""
    try:
        return Rules(tuple(parse_rule(t) for t in _SEPARATORS.split(value.strip()) if t))
    except MalformedRule as err:
        return Malformed(str(err))


def policy_of(multikueue_cluster: Obj | None) -> Policy:
    """What the worker's MultiKueueCluster allows its manager's jobs to use there."""
    annotations = annotations_of(multikueue_cluster)
    value = annotations.get(ANNOTATION)
    return None if value is None else parse(str(value))


# -- what a pod uses ---------------------------------------------------------------------------

_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
_POD_SPEC_KEYS = frozenset(
    {*_CONTAINER_LISTS, "volumes", "imagePullSecrets", "serviceAccountName", "serviceAccount"}
)
_VOLUME_SECRETS: tuple[tuple[str, str], ...] = (
    # (volume source, the field naming the Secret): VisitPodSecretNames' list; the
    # deprecated in-tree plugins count while the API still accepts them.
    ("azureFile", "secretName"),
    ("cephfs", "secretRef"),
    ("cinder", "secretRef"),
    ("flexVolume", "secretRef"),
    ("iscsi", "secretRef"),
    ("rbd", "secretRef"),
    ("scaleIO", "secretRef"),
    ("storageos", "secretRef"),
    ("csi", "nodePublishSecretRef"),
)


def _dicts(value: Any) -> list[Obj]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _named(value: Any) -> str:
    """A reference's name (``{"name": ...}``), or a bare string name."""
    name = _dict(value).get("name") if isinstance(value, dict) else value
    return name if isinstance(name, str) else ""


def _in_containers(spec: Obj) -> Iterator[tuple[Kind, str]]:
    for key in _CONTAINER_LISTS:
        for container in _dicts(spec.get(key)):
            for env in _dicts(container.get("env")):
                source = _dict(env.get("valueFrom"))
                yield Kind.SECRET, _named(source.get("secretKeyRef"))
                yield Kind.CONFIG_MAP, _named(source.get("configMapKeyRef"))
            for env_from in _dicts(container.get("envFrom")):
                yield Kind.SECRET, _named(env_from.get("secretRef"))
                yield Kind.CONFIG_MAP, _named(env_from.get("configMapRef"))


def _in_volumes(spec: Obj) -> Iterator[tuple[Kind, str]]:
    for volume in _dicts(spec.get("volumes")):
        yield Kind.SECRET, _named(_dict(volume.get("secret")).get("secretName"))
        yield Kind.CONFIG_MAP, _named(_dict(volume.get("configMap")).get("name"))
        claim = _dict(volume.get("persistentVolumeClaim")).get("claimName")
        yield Kind.PERSISTENT_VOLUME_CLAIM, _named(claim)
        for source, field in _VOLUME_SECRETS:
            yield Kind.SECRET, _named(_dict(volume.get(source)).get(field))
        for projected in _dicts(_dict(volume.get("projected")).get("sources")):
            yield Kind.SECRET, _named(projected.get("secret"))
            yield Kind.CONFIG_MAP, _named(projected.get("configMap"))


def of_pod_spec(spec: Obj, namespace: str) -> set[Reference]:
    """Every object of ``namespace`` a pod with this spec would use. A pod spec with
    containers and no ServiceAccount runs as ``default``."""
    found = [*_in_containers(spec), *_in_volumes(spec)]
    found += [(Kind.SECRET, _named(s)) for s in _dicts(spec.get("imagePullSecrets"))]
    account = _named(spec.get("serviceAccountName")) or _named(spec.get("serviceAccount"))
    if not account and "containers" in spec:
        account = "default"
    found.append((Kind.SERVICE_ACCOUNT, account))
    return {Reference(kind, namespace, name) for kind, name in found if name}


def pod_specs(value: Any) -> Iterator[Obj]:
    """Every pod spec inside ``value``, wherever a job kind nests its templates: a dict with
    any of a pod spec's fields is one (a kind's pod overrides count too); its other fields
    are searched as well, in case a kind puts a pod field beside a nested template."""
    if isinstance(value, dict):
        is_pod_spec = not _POD_SPEC_KEYS.isdisjoint(value)
        if is_pod_spec:
            yield value
        for key, item in value.items():
            if not (is_pod_spec and key in _POD_SPEC_KEYS):
                yield from pod_specs(item)
    elif isinstance(value, list):
        for item in value:
            yield from pod_specs(item)


def of_objects(namespace: str, objects: Iterable[Obj | None]) -> frozenset[Reference]:
    """The references of every pod spec in the ``spec`` of each object (a Workload, its Job):
    all of them, since the Workload's pod sets and the job the worker runs could differ."""
    found: set[Reference] = set()
    for obj in objects:
        for spec in pod_specs((obj or {}).get("spec")):
            found |= of_pod_spec(spec, namespace)
    return frozenset(found)


# -- the verdict -------------------------------------------------------------------------------


def refused(policy: Policy, references: Iterable[Reference]) -> list[Reference]:
    """The references the worker does not allow, in order (all of them when its annotation is
    malformed, none without one)."""
    if policy is None:
        return []
    if isinstance(policy, Malformed):
        return sorted(references)
    return sorted(r for r in references if not policy.allows(r))


def refusal(
    policy: Policy, references: Iterable[Reference], *, namespace: str, worker: str
) -> str | None:
    """Why a job of ``namespace`` using ``references`` may not go to ``worker`` (None: it
    may), in the words of the check message, ``kfed whatif`` and the Event."""
    if isinstance(policy, Malformed):
        return f"its {ANNOTATION} cannot be read ({policy.problem}): it allows nothing until fixed"
    denied = refused(policy, references)
    if not denied:
        return None
    named = ", ".join(str(r) for r in denied[:SHOWN])
    more = f" and {len(denied) - SHOWN} more" if len(denied) > SHOWN else ""
    verb = "is" if len(denied) == 1 else "are"
    return f"{named}{more} {verb} not allowed for namespace {namespace} on {worker} ({ANNOTATION})"
