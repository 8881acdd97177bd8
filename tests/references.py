"""The one place in kfed that names anything outside the checkout: the reference material a
developer's workspace may keep beside it (``../shared``): upstream Kueue's generated CRDs and
the article kfed grew from.

A user's clone has neither. Tests that use them compare kfed's own files with them when they
are there and skip that comparison, saying why, when they are not; everything else (the
product, the demo, the Makefile, every other test) reads only the checkout.
``tests/unit/test_checkout_only.py`` enforces that no other file looks outside it.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BESIDE = REPO.parent / "shared"
UPSTREAM_CRDS = BESIDE / "reference" / "upstream-crds-v0.19.2"
"""Upstream Kueue v0.19.2's generated CRDs, the yardstick of the conformance test."""
UPSTREAM_MODULE_CRDS = (
    Path(os.environ.get("GOMODCACHE") or Path.home() / "go" / "pkg" / "mod")
    / "sigs.k8s.io"
    / "kueue@v0.17.0"
    / "config"
    / "components"
    / "crd"
    / "bases"
)
"""Upstream Kueue v0.17.0's CRDs in the Go module cache, there once `make
bench-scheduler-upstream` (or an interop build) downloaded the module: the yardstick for
the kinds the v0.19.2 copy lacks (Topology, ProvisioningRequestConfig)."""
ARTICLE_SEED = BESIDE / "seed" / "examples"
"""The article's manifests as published, which ``examples/article/`` must mean exactly."""


def missing(path: Path, what: str) -> str | None:
    """None when ``path`` exists; else the reason to skip a comparison with it."""
    if path.exists():
        return None
    return (
        f"{what} not found at {path}: this checkout has no reference folder beside it (a "
        "user's clone never does), so only the comparison with it is skipped"
    )
