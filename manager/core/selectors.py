"""Label selectors, node affinity and taints: the pure matching rules the core needs.

Kubernetes evaluates these on Nodes; the admission core evaluates them against a
ResourceFlavor's ``nodeLabels`` and ``nodeTaints`` instead, to decide whether a pod set
could ever land on the nodes a flavor stands for. The types mirror the Kubernetes API
shapes (matchLabels/matchExpressions, nodeSelectorTerms, tolerations) with plain values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class Operator(StrEnum):
    """Operators of label-selector and node-selector requirements."""

    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"  # node selectors only
    LT = "Lt"  # node selectors only


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``{key, operator, values}`` expression, shared by label and node selectors."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        match self.operator:
            case Operator.IN:
                return value is not None and value in self.values
            case Operator.NOT_IN:
                return value is None or value not in self.values
            case Operator.EXISTS:
                return value is not None
            case Operator.DOES_NOT_EXIST:
                return value is None
            case Operator.GT | Operator.LT:
                return _compare_int(value, self.values, greater=self.operator is Operator.GT)

    def describe(self) -> str:
        if self.operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
            return f"{self.key} {self.operator}"
        return f"{self.key} {self.operator} ({','.join(self.values)})"


def _compare_int(value: str | None, values: tuple[str, ...], *, greater: bool) -> bool:
    # Kubernetes requires exactly one integer value for Gt/Lt; anything else never matches.
    if value is None or len(values) != 1:
        return False
    try:
        have, want = int(value), int(values[0])
    except ValueError:
        return False
    return have > want if greater else have < want


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A ``metav1.LabelSelector``. An empty selector matches everything.

    Where the API allows a null selector (ClusterQueue.namespaceSelector), the core models
    it as ``None`` and treats it as matching nothing, as Kueue does.
    """

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        return all(req.matches(labels) for req in self.match_expressions)


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One term of ``requiredDuringSchedulingIgnoredDuringExecution``; terms are ORed."""

    match_expressions: tuple[Requirement, ...] = ()


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: TaintEffect
    value: str = ""

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"


class TolerationOperator(StrEnum):
    EQUAL = "Equal"
    EXISTS = "Exists"


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration. An empty key with operator Exists tolerates every taint."""

    key: str = ""
    operator: TolerationOperator = TolerationOperator.EQUAL
    value: str = ""
    effect: TaintEffect | None = None  # None tolerates every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator is TolerationOperator.EXISTS:
            return True
        # Equal with an empty key is invalid in Kubernetes; treat it as not tolerating.
        return bool(self.key) and self.value == taint.value


def first_untolerated_taint(
    taints: Iterable[Taint], tolerations: Iterable[Toleration]
) -> Taint | None:
    """The first NoSchedule/NoExecute taint no toleration covers, as the kube-scheduler sees it."""
    tolerations = tuple(tolerations)
    for taint in taints:
        if taint.effect is TaintEffect.PREFER_NO_SCHEDULE:
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def node_selection_mismatch(
    node_selector: Mapping[str, str],
    affinity_terms: tuple[NodeSelectorTerm, ...],
    node_labels: Mapping[str, str],
) -> str | None:
    """Why a pod's nodeSelector / required node affinity can't match ``node_labels``.

    Only label keys the flavor defines are checked (Kueue's rule): a key the flavor says
    nothing about may be satisfied by the nodes behind it, so it can't rule the flavor
    out. Returns None when compatible, else a short human-readable explanation.
    """
    for key in sorted(node_selector):
        if key in node_labels and node_labels[key] != node_selector[key]:
            return f"doesn't match node selector {key}={node_selector[key]}"
    if not affinity_terms:
        return None
    filtered: list[tuple[Requirement, ...]] = []
    for term in affinity_terms:
        kept = tuple(req for req in term.match_expressions if req.key in node_labels)
        if not kept:
            # A term with no relevant expression matches any flavor; terms are ORed.
            return None
        filtered.append(kept)
    if any(all(req.matches(node_labels) for req in term) for term in filtered):
        return None
    described = " or ".join(", ".join(req.describe() for req in term) for term in filtered)
    return f"doesn't match required node affinity {described}"
