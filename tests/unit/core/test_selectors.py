"""Label selectors, node selection against flavor labels, taints and tolerations."""

from __future__ import annotations

import pytest

from manager.core.selectors import (
    LabelSelector,
    NodeSelectorTerm,
    Operator,
    Requirement,
    Taint,
    TaintEffect,
    Toleration,
    TolerationOperator,
    first_untolerated_taint,
    node_selection_mismatch,
)

LABELS = {"team": "ml", "tier": "3"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        (LabelSelector(), True),
        (LabelSelector({"team": "ml"}), True),
        (LabelSelector({"team": "web"}), False),
        (LabelSelector({"missing": "x"}), False),
        (LabelSelector(match_expressions=(Requirement("team", Operator.IN, ("ml", "web")),)), True),
        (LabelSelector(match_expressions=(Requirement("team", Operator.NOT_IN, ("ml",)),)), False),
        (LabelSelector(match_expressions=(Requirement("nope", Operator.NOT_IN, ("ml",)),)), True),
        (LabelSelector(match_expressions=(Requirement("team", Operator.EXISTS),)), True),
        (LabelSelector(match_expressions=(Requirement("team", Operator.DOES_NOT_EXIST),)), False),
        (LabelSelector(match_expressions=(Requirement("tier", Operator.GT, ("2",)),)), True),
        (LabelSelector(match_expressions=(Requirement("tier", Operator.LT, ("2",)),)), False),
        (LabelSelector(match_expressions=(Requirement("team", Operator.GT, ("2",)),)), False),
        (
            LabelSelector({"team": "ml"}, (Requirement("tier", Operator.IN, ("1",)),)),
            False,
        ),
    ],
)
def test_label_selector(selector: LabelSelector, matches: bool) -> None:
    assert selector.matches(LABELS) is matches


FLAVOR_LABELS = {"gpu.model": "h100", "zone": "a"}


@pytest.mark.parametrize(
    ("node_selector", "terms", "mismatch"),
    [
        ({}, (), None),
        ({"gpu.model": "h100"}, (), None),
        ({"gpu.model": "rtx-a1000"}, (), "doesn't match node selector gpu.model=rtx-a1000"),
        # Keys the flavor doesn't define can't rule it out.
        ({"disktype": "ssd"}, (), None),
        (
            {},
            (NodeSelectorTerm((Requirement("gpu.model", Operator.IN, ("h100", "a100")),)),),
            None,
        ),
        (
            {},
            (NodeSelectorTerm((Requirement("gpu.model", Operator.NOT_IN, ("h100",)),)),),
            "doesn't match required node affinity gpu.model NotIn (h100)",
        ),
        (
            {},
            (
                NodeSelectorTerm((Requirement("gpu.model", Operator.IN, ("a100",)),)),
                NodeSelectorTerm((Requirement("zone", Operator.IN, ("a",)),)),
            ),
            None,  # terms are ORed
        ),
        (
            {},
            (
                NodeSelectorTerm((Requirement("gpu.model", Operator.IN, ("a100",)),)),
                NodeSelectorTerm((Requirement("disktype", Operator.EXISTS),)),
            ),
            None,  # the second term has no key the flavor defines: it matches anything
        ),
        (
            {},
            (NodeSelectorTerm((Requirement("gpu.model", Operator.DOES_NOT_EXIST),)),),
            "doesn't match required node affinity gpu.model DoesNotExist",
        ),
    ],
)
def test_node_selection_against_flavor_labels(
    node_selector: dict[str, str], terms: tuple[NodeSelectorTerm, ...], mismatch: str | None
) -> None:
    assert node_selection_mismatch(node_selector, terms, FLAVOR_LABELS) == mismatch


GPU_TAINT = Taint("nvidia.com/gpu", TaintEffect.NO_SCHEDULE, "present")


@pytest.mark.parametrize(
    ("taints", "tolerations", "untolerated"),
    [
        ((), (), None),
        ((GPU_TAINT,), (), GPU_TAINT),
        ((GPU_TAINT,), (Toleration("nvidia.com/gpu", TolerationOperator.EXISTS),), None),
        ((GPU_TAINT,), (Toleration("nvidia.com/gpu", value="present"),), None),
        ((GPU_TAINT,), (Toleration("nvidia.com/gpu", value="absent"),), GPU_TAINT),
        ((GPU_TAINT,), (Toleration(operator=TolerationOperator.EXISTS),), None),
        (
            (GPU_TAINT,),
            (
                Toleration(
                    "nvidia.com/gpu", TolerationOperator.EXISTS, effect=TaintEffect.NO_EXECUTE
                ),
            ),
            GPU_TAINT,
        ),
        ((Taint("soft", TaintEffect.PREFER_NO_SCHEDULE),), (), None),
    ],
)
def test_taints_and_tolerations(
    taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...], untolerated: Taint | None
) -> None:
    assert first_untolerated_taint(taints, tolerations) == untolerated


def test_taint_renders_like_kubectl() -> None:
    assert str(GPU_TAINT) == "nvidia.com/gpu=present:NoSchedule"
