"""May a copy go to this worker at all: the one rule of the dispatcher and ``kfed whatif``
(``eligibility.refusal``), one row per reason, in the order the rule checks them."""

from __future__ import annotations

import dataclasses

import pytest

from manager.federation.decisions.eligibility import WorkerEligibility, refusal

OK = WorkerEligibility(
    name="worker-1", namespace="team-a", kind="JobSet (jobset.x-k8s.io/v1alpha2)"
)


@pytest.mark.parametrize(
    ("changes", "reason", "never"),
    [
        ({"allowed": False}, "not in the job's kfed.io/allowed-clusters", True),
        ({"registered": False}, "no MultiKueueCluster of that name", False),
        (
            {"namespace_bound": False},
            "namespace team-a is not bound to it (kfed.io/namespaces)",
            True,
        ),
        (
            {"references_refusal": "Secret team-a/reg is not allowed"},
            "Secret team-a/reg is not allowed",
            True,
        ),
        ({"connected": False}, "not connected", False),
        (
            {"connected": False, "not_connected_detail": "ClientConnectionFailed: refused"},
            "not connected (ClientConnectionFailed: refused)",
            False,
        ),
        (
            {"serves_kind": False},
            "does not serve JobSet (jobset.x-k8s.io/v1alpha2): no CRD there",
            False,
        ),
        (
            {"blocked": "a Job team-a/x that kfed did not create"},
            "a Job team-a/x that kfed did not create",
            False,
        ),
        ({"maintenance": "cordon"}, "in maintenance (cordon)", False),
        # The first reason in the rule's order wins.
        (
            {"allowed": False, "maintenance": "drain"},
            "not in the job's kfed.io/allowed-clusters",
            True,
        ),
        (
            {"serves_kind": False, "blocked": "x"},
            "does not serve JobSet (jobset.x-k8s.io/v1alpha2): no CRD there",
            False,
        ),
    ],
)
def test_why_no_copy_may_go_there(changes: dict[str, object], reason: str, never: bool) -> None:
    refused = refusal(dataclasses.replace(OK, **changes))  # type: ignore[arg-type]
    assert refused is not None
    assert (refused.cluster, refused.fits, refused.reason, refused.never) == (
        "worker-1",
        False,
        reason,
        never,
    )


def test_an_eligible_worker_is_left_to_capacity() -> None:
    assert refusal(OK) is None
