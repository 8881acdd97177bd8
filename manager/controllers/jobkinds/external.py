"""Kinds of job kfed does not know, federated by configuration: upstream Kueue's external
frameworks (``multiKueue.externalFrameworks``, named and checked in
``api/externalframeworks.py``). Its own
controller makes each job's Workload (kfed never does: it cannot know the kind's pod sets)
and runs the job once that Workload is admitted, as for any kind managed by an external
controller upstream. What MultiKueue's generic adapter does for such a kind, kfed's
``ExternalKind`` does:

- a job is federated only with ``spec.managedBy: kueue.x-k8s.io/multikueue`` (set by whoever
  creates it: no webhook of kfed's knows the kind);
- the worker's copy has the manager object's name, namespace, labels, annotations and spec,
  less ``spec.managedBy`` (nothing else of it: no status, owners, uid or finalizers), and the
  origin and prebuilt-workload labels: the worker's controller of the kind runs it under the
  Workload the manager copied there;
- the worker's status comes back whole to the manager's object (its status subresource);
- the run ends when the worker's Workload says Finished (its controller writes that): kfed
  cannot read how a kind it does not know ended, so the manager's Workload is finished from
  its copy's condition, as upstream's MultiKueue finishes it.

kfed cannot suspend such a kind nor find its pods: a fenced worker's shim deactivates the
copy of the Workload (the kind's controller must stop the job, as it does for any Workload
deactivated or evicted), and the manager removes the worker's object with its Workload when
it moves or ends the job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from manager.api.externalframeworks import BuiltIn, GroupVersionKind, check
from manager.api.view import at
from manager.controllers.jobkinds.base import JobKind, Obj, Outcome, PodSet
from manager.controllers.jobkinds.registry import KINDS
from manager.kube.jsoncopy import copy_json
from manager.kube.resources import Resource


class ExternalKind(JobKind):
    """MultiKueue's generic adapter for one kind (the module's docstring says what it does)."""

    default_managed_by = ""
    pod_label = ""
    upstream_managed_by_field = ".spec.managedBy"  # the generic adapter's words
    suspendable = False
    workload_finished_by_job = False

    def __init__(
        self, resource: Resource, workload_of: Callable[[Obj], str | None] | None = None
    ) -> None:
        self.resource = resource
        self.workload_prefix = resource.kind.lower()
        self._workload_of = workload_of
        """The manager's Workload a job owns, by its owner reference: the kind's controller
        names its Workloads as it likes."""

    def workload_key(self, job: Obj) -> str:
        found = self._workload_of(job) if self._workload_of is not None else None
        return found or super().workload_key(job)

    def __repr__(self) -> str:
        return f"ExternalKind({self.resource.kind}.{self.resource.version}.{self.resource.group})"

    def pod_sets(self, job: Obj) -> list[PodSet]:
        return []  # its Workload is its own controller's, pod sets and all

    def outcome(self, job: Obj) -> Outcome | None:
        return None  # its end is its Workload's Finished condition

    def spec_for_worker(self, job: Obj) -> Obj:
        """Upstream's generic adapter's copy: the spec less ``spec.managedBy``, nothing added
        (kfed creates it once the worker admitted its Workload)."""
        spec = copy_json(dict(at(job, "spec")))
        spec.pop("managedBy", None)
        return spec


def resource_from(gvk: GroupVersionKind, discovered: Iterable[Obj]) -> Resource | None:
    """The resource of ``gvk`` among a group version's discovery ``resources`` (None: not
    served there); a subresource (``widgets/status``) is never it."""
    for entry in discovered:
        name = str(entry.get("name") or "")
        if entry.get("kind") == gvk.kind and name and "/" not in name:
            return Resource(gvk.group, gvk.version, name, gvk.kind, bool(entry.get("namespaced")))
    return None


def built_in() -> BuiltIn:
    """The kinds kfed has an adapter of its own for, each with its integration name: none
    of them may be an external framework (as upstream refuses its built-in ones)."""
    return {
        GroupVersionKind(k.resource.group, k.resource.version, k.resource.kind): name
        for name, k in KINDS.items()
    }


def check_federated(names: tuple[str, ...]) -> tuple[str, ...]:
    """``multiKueue.externalFrameworks`` as the manager starts with it: no kind of its own
    among them (a ValueError naming it)."""
    listed = [{"name": n} for n in names]
    return check(multikueue=listed, built_in=built_in()).federated
