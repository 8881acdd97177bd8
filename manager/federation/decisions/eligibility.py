"""May a copy of a workload go to this worker at all, whatever its capacity? (pure)

The one answer of the dispatcher (``placing.PlacingReader``, from its live view) and of ``kfed
whatif`` (``cli/workerlook.py``, from one read of the manager and the worker): both gather
the same ``WorkerEligibility`` facts and ask ``refusal``, so they never disagree on a worker
for a reason of their own. The checks, in order, the first that applies wins:

1. not named by the job's ``kfed.io/allowed-clusters`` (never, for this job);
2. no MultiKueueCluster of that name (not registered);
3. the workload's namespace not bound to it (``kfed.io/namespaces``; never);
4. objects its pods use not allowed there (``kfed.io/allowed-references``; never);
5. not connected (with the reason, when known);
6. it does not serve the job's kind (no CRD there);
7. blocked: an object of the same name that kfed did not create is there;
8. in maintenance (any value of the annotation: a mistyped one errs on the side of sending
   nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

from manager.api import constants as C
from manager.federation.decisions.capacity import Candidate
from manager.federation.settings import ALLOWED_CLUSTERS_ANNOTATION


@dataclass(frozen=True, slots=True)
class WorkerEligibility:
    """What the eligibility of one worker for one workload depends on."""

    name: str
    allowed: bool = True
    """The job's allow-list names it (or there is none)."""
    registered: bool = True
    namespace: str = ""
    namespace_bound: bool = True
    references_refusal: str | None = None
    connected: bool = True
    not_connected_detail: str = ""
    kind: str = "Job (batch/v1)"
    """The job's kind, as told: ``JobSet (jobset.x-k8s.io/v1alpha2)``."""
    serves_kind: bool = True
    blocked: str | None = None
    maintenance: str = ""


def refusal(facts: WorkerEligibility) -> Candidate | None:
    """Why no copy may go there (a non-fitting candidate), or None when one may."""
    name = facts.name
    if not facts.allowed:
        return Candidate(name, False, f"not in the job's {ALLOWED_CLUSTERS_ANNOTATION}", never=True)
    if not facts.registered:
        return Candidate(name, False, "no MultiKueueCluster of that name")
    if not facts.namespace_bound:
        return Candidate(
            name,
            False,
            f"namespace {facts.namespace} is not bound to it ({C.NAMESPACES_ANNOTATION})",
            never=True,
        )
    if facts.references_refusal is not None:
        return Candidate(name, False, facts.references_refusal, never=True)
    if not facts.connected:
        detail = f" ({facts.not_connected_detail})" if facts.not_connected_detail else ""
        return Candidate(name, False, f"not connected{detail}")
    if not facts.serves_kind:
        return Candidate(name, False, f"does not serve {facts.kind}: no CRD there")
    if facts.blocked is not None:
        return Candidate(name, False, facts.blocked)
    if facts.maintenance:
        return Candidate(name, False, f"in maintenance ({facts.maintenance})")
    return None
