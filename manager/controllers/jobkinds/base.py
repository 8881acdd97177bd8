"""What kfed needs to know about one kind of job, and what follows from it for every kind.

An adapter (``JobKind``) says, for its kind only:

- which API resource it is and how upstream names its Workloads (``workload_prefix``);
- where its pod sets are: each with a name, a pod count and the pod template inside the
  object (``pod_sets``), so that admission can read requests and the flavors' nodeSelector and
  tolerations can be written into each template in place;
- whether it is suspended, and the patch fields that suspend or resume it;
- whether it finished, and how (``outcome``), and whether pods may still run (``is_active``);
- which part of a worker's object the manager's copy takes as its own status.

Everything else is written once here, for every kind: the merge patch that runs a job with
its assignment and the one that restores its templates, ``managedBy``, the Workload's pod sets.
Adding a kind is one adapter module (and its tests) registered in ``registry.py``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from manager.api.view import at, items
from manager.controllers import taspods
from manager.controllers import workloadstatus as ws
from manager.kube.api import KubeApi
from manager.kube.jsoncopy import copy_json
from manager.kube.resources import Resource

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class PodSet:
    name: str
    count: int
    template: Obj
    """The pod template inside the job object itself (callers that change it work on a copy
    of the job, see ``with_templates``)."""


class MissingReference(ValueError):
    """An object the job's pod sets depend on does not exist (yet), e.g. a TrainJob's
    runtime: its Workload cannot be made until it does."""


@dataclass(frozen=True, slots=True)
class Outcome:
    succeeded: bool
    message: str


@dataclass(frozen=True, slots=True)
class PodSetPlacement:
    """What admission adds to one pod set's template: the flavors' node labels and
    tolerations (and admission checks' podSetUpdates)."""

    node_selector: Mapping[str, str]
    tolerations: list[Obj]
    labels: Mapping[str, str] | None = None
    annotations: Mapping[str, str] | None = None
    scheduling_gates: list[Obj] | None = None
    """The template's labels, annotations and scheduling gates, exactly; None leaves them
    as they are (only a pod set placed by topology changes them: taspods.py)."""


class JobKind(ABC):
    resource: Resource
    workload_prefix: str
    """The Workload of a job is ``<prefix>-<job name>-<uid[:5]>`` (upstream's lowercase kind)."""
    default_managed_by: str
    """The kind's own controller's name in ``spec.managedBy``: what an unset value means."""
    pod_label: str
    """The label its controller puts on each of its pods, valued with its name: how a
    worker finds the pods of a fenced job."""
    status_counters: tuple[str, ...] = ()
    """Status fields that count pods running now, which its controller omits once they drop
    to zero: the manager clears them itself (a merge patch keeps what it does not name)."""
    controller_labels: tuple[str, ...] = ()
    """Pod template labels the kind's own controller sets on each object (a Job's
    ``controller-uid``): a Workload's template carries the values of the object it was made
    from, so writing a template's labels exactly keeps the object's own values of these."""
    suspend_path: tuple[str, ...] = ("spec", "suspend")
    """Where its suspend flag is (a Kubeflow job's: ``spec.runPolicy.suspend``)."""
    managed_by_path: tuple[str, ...] = ("spec", "managedBy")
    """Where its ``managedBy`` is (a Kubeflow job's: ``spec.runPolicy.managedBy``)."""
    suspendable = True
    """kfed knows how to suspend it (its ``suspend_path``); False for a kind it does not know
    (``external.py``), whose own controller answers for stopping it."""
    workload_finished_by_job = True
    """Its Workload is finished from its status (kfed's job controller, or the worker's
    status copied back); False: from the worker's Workload, as upstream's MultiKueue does."""
    upstream_managed_by_field = "spec.managedBy"
    """How upstream MultiKueue's refusal of a job not managed by it names the field (the
    training-operator kinds' says ``spec.managedBy`` too, an MPIJob's its real path)."""
    informer_selector: str | None = None
    """The label selector of the objects of this kind a cluster's controllers follow (None:
    all of them; a Pod: those that name a queue)."""
    stopped_by_deletion = False
    """A running job of it cannot be suspended again, only deleted (a Pod: a gate cannot be
    added back)."""

    # -- what the adapter says --------------------------------------------------------------

    def manages(self, job: Obj) -> bool:
        """It is queued as a job of this kind (a Pod that a controller made is its owner's)."""
        return True

    def refusal(self, job: Obj) -> str | None:
        """Why upstream Kueue's webhook refuses this queued job (its field errors), or None
        (a RayJob without ``shutdownAfterJobFinishes``, ...)."""
        return None

    @abstractmethod
    def pod_sets(self, job: Obj) -> list[PodSet]:
        """Its pod sets in a stable order, each template a reference into ``job`` (as
        ``with_references`` returned it)."""

    async def with_references(self, job: Obj, api: KubeApi) -> Obj:
        """The job with whatever its pod sets depend on that lives in other objects (most
        kinds: none, the job itself); raises MissingReference when such an object is
        missing."""
        return job

    async def on_cluster(self, api: KubeApi) -> JobKind:
        """The adapter that writes this kind's objects on the cluster of ``api``: itself for
        most kinds; one whose API differs between its operator's versions (a TrainJob's
        placement, by Trainer version) answers with the adapter of the version served there."""
        return self

    @abstractmethod
    def outcome(self, job: Obj) -> Outcome | None:
        """How it ended, or None while it has not."""

    def is_suspended(self, job: Obj) -> bool:
        return bool(at(job, *self.suspend_path[:-1]).get(self.suspend_path[-1]))

    def suspend_fields(self, suspend: bool, job: Obj | None = None) -> Obj:
        """The merge-patch fields that suspend (or resume) ``job``: a kind without a suspend
        flag holds a job in a way that depends on it (a LeaderWorkerSet: its replicas)."""
        return nested(self.suspend_path, suspend)

    def pod_selector(self, name: str) -> str:
        """The label selector of the pods of its job ``name`` (in the job's namespace)."""
        return f"{self.pod_label}={name}"

    def is_active(self, job: Obj) -> bool:
        """Pods of it may still run (after a suspension, until its controller stops them)."""
        return not self.is_suspended(job)

    def templates_mutable(self, job: Obj) -> bool:
        """Its pod templates may be changed now (suspended, its pods gone)."""
        return self.is_suspended(job) and not self.is_active(job)

    def owner_of(self, workload: Obj) -> str | None:
        """``namespace/name`` of the job of this kind that owns the Workload, if one does."""
        meta = at(workload, "metadata")
        for ref in items(meta, "ownerReferences"):
            if (
                ref.get("controller")
                and ref.get("kind") == self.resource.kind
                and ref.get("apiVersion") == self.resource.api_version
            ):
                return f"{meta.get('namespace')}/{ref.get('name')}"
        return None

    def spec_for_worker(self, job: Obj) -> Obj:
        """The spec of a worker's copy of this job: the manager's, suspended (it runs once
        the worker admits its Workload), without ``managedBy`` (the worker's own controller
        of the kind runs it)."""
        return self._for_worker(job, "spec", copy_json(dict(at(job, "spec"))))

    def metadata_for_worker(self, job: Obj, meta: Obj) -> Obj:
        """The metadata of a worker's copy (``meta``: the manager's, as copied there), for a
        kind that keeps its suspension or ``managedBy`` in it (a LeaderWorkerSet's
        annotations): suspended, without ``managedBy``. Most kinds: ``meta`` as it is."""
        return self._for_worker(job, "metadata", meta)

    def _for_worker(self, job: Obj, part: str, content: Obj) -> Obj:
        body: Obj = {part: content}
        holder: Any = body
        for key in self.managed_by_path[:-1]:
            holder = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(holder, dict):
            holder.pop(self.managed_by_path[-1], None)
        suspended = at(self.suspend_fields(True, job), part)
        return merge_fields(content, dict(suspended)) if suspended else content

    def status_for_manager(self, remote: Obj) -> Obj:
        """The status the manager's object takes from the worker's copy (all of it, by
        default: the manager's object only mirrors the run)."""
        return copy_json(dict(at(remote, "status")))

    def held_for_worker(self, job: Obj) -> bool:
        """The manager keeps ``job`` held while a worker runs its copy: a kind without
        ``managedBy`` whose own controller runs on the manager too (kube-controller-manager's,
        for a StatefulSet) would start pods there once resumed. Most kinds: False."""
        return False

    def mirrored_status(self, job: Obj) -> Obj:
        """What the manager's object shows of its worker copy's status: its ``status``."""
        return dict(at(job, "status"))

    def status_write(self, job: Obj, patch: Obj) -> tuple[Obj, str | None]:
        """The merge patch and its subresource that write ``patch`` (status fields; None
        removes one) onto the manager's object (a kind whose ``status`` its own controller
        owns there keeps the worker's elsewhere)."""
        return {"status": patch}, "status"

    # -- the same for every kind -----------------------------------------------------------

    def managed_by(self, job: Obj) -> str:
        path = self.managed_by_path
        return str(at(job, *path[:-1]).get(path[-1]) or "")

    def managed_by_name(self) -> str:
        """Its ``managedBy`` field as a message names it (``spec.runPolicy.managedBy``)."""
        return ".".join(self.managed_by_path)

    def workload_name(self, job_name: str, job_uid: str) -> str:
        return ws.workload_name_for(self.workload_prefix, job_name, job_uid)

    def workload_key(self, job: Obj) -> str:
        """The Workload of a job: the prebuilt one a MultiKueue manager named, else its own."""
        return ws.workload_key_for(job, self.workload_prefix)

    def with_templates(self, job: Obj, placements: Mapping[str, PodSetPlacement]) -> Obj:
        """A copy of ``job`` whose pod set templates carry exactly these nodeSelectors and
        tolerations (pod sets not named keep theirs)."""
        changed = copy_json(job)
        for pod_set in self.pod_sets(changed):
            placement = placements.get(pod_set.name)
            if placement is None:
                continue
            spec = pod_set.template.setdefault("spec", {})
            _set_or_drop(spec, "nodeSelector", dict(placement.node_selector))
            _set_or_drop(spec, "tolerations", list(placement.tolerations))
            if placement.scheduling_gates is not None:
                _set_or_drop(spec, "schedulingGates", list(placement.scheduling_gates))
            if placement.labels is not None or placement.annotations is not None:
                meta = pod_set.template.setdefault("metadata", {})
                if placement.labels is not None:
                    _set_or_drop(meta, "labels", self._labels_kept(meta, placement.labels))
                if placement.annotations is not None:
                    _set_or_drop(meta, "annotations", dict(placement.annotations))
        return changed

    def _labels_kept(self, meta: Obj, labels: Mapping[str, str]) -> dict[str, str]:
        """``labels`` with the controller's own labels as this object has them: a worker's
        copy of a Job has the worker's ``controller-uid``, its Workload the manager's (the
        API server refuses a template whose uid labels are not the Job's own)."""
        own = at(meta, "labels")
        kept = {k: v for k, v in labels.items() if k not in self.controller_labels}
        kept.update({k: own[k] for k in self.controller_labels if k in own})
        return kept

    def run_patches(self, job: Obj, placements: Mapping[str, PodSetPlacement]) -> list[Obj]:
        """The merge patches, applied in order, that run it with these placements (one for
        most kinds; a kind whose templates may change only while suspended needs two)."""
        return [
            merge_fields(
                merge_patch(job, self.with_templates(job, placements)),
                self.suspend_fields(False, job),
            )
        ]

    def restore_patch(self, job: Obj, originals: Mapping[str, PodSetPlacement]) -> Obj | None:
        """The merge patch that puts its templates back as submitted (None: they are)."""
        patch = merge_patch(job, self.with_templates(job, originals))
        return patch or None

    def placements_of(self, job: Obj) -> dict[str, PodSetPlacement]:
        """Each pod set's nodeSelector and tolerations as the job has them now."""
        return {
            ps.name: PodSetPlacement(
                dict(at(ps.template, "spec", "nodeSelector")),
                list(items(ps.template, "spec", "tolerations")),
            )
            for ps in self.pod_sets(job)
        }

    def workload_pod_sets(self, job: Obj) -> list[Obj]:
        """The Workload's ``spec.podSets`` for this job."""
        pod_sets = []
        for ps in self.pod_sets(job):
            pod_set: Obj = {
                "name": ps.name,
                "count": max(ps.count, 1),
                "template": copy_json(ps.template),
            }
            request = taspods.topology_request(ps.template)
            if request is not None:
                pod_set["topologyRequest"] = request
            pod_sets.append(pod_set)
        return pod_sets


def own_template(holder: Mapping[str, Any]) -> Obj:
    """The pod template in ``holder`` (a job's spec, a pod set, a replicated job) as the
    object's own dict, not a copy: ``with_templates`` edits it in place on its copy of the
    job. A new empty dict where there is none."""
    found = at(holder, "template")
    return found if isinstance(found, dict) else {}


def outcome_of_conditions(job: Obj, succeeded: str, failed: str, kind: str) -> Outcome | None:
    """How a job ended by its ``succeeded`` or ``failed`` condition (True), with its
    message (else "<kind> finished successfully" / "<kind> failed")."""
    for c in items(job, "status", "conditions"):
        if c.get("status") == "True" and c.get("type") in (succeeded, failed):
            ok = c["type"] == succeeded
            default = f"{kind} finished successfully" if ok else f"{kind} failed"
            return Outcome(ok, str(c.get("message") or default))
    return None


def nested(path: tuple[str, ...], value: Any) -> Obj:
    """``{path[0]: {path[1]: ... value}}``: one field as a merge patch sets it."""
    result: Any = value
    for key in reversed(path):
        result = {key: result}
    return dict(result)


def _set_or_drop(spec: Obj, field: str, value: Any) -> None:
    if value:
        spec[field] = value
    else:
        spec.pop(field, None)


def merge_patch(old: Any, new: Any) -> Obj:
    """The JSON merge patch (RFC 7386) that turns ``old`` into ``new``: changed keys set,
    removed keys null, lists replaced whole (a merge patch cannot address list items)."""
    patch: Obj = {}
    for key in old.keys() | new.keys():
        if key not in new:
            patch[key] = None
        elif key not in old:
            patch[key] = new[key]
        elif isinstance(old[key], dict) and isinstance(new[key], dict):
            inner = merge_patch(old[key], new[key])
            if inner:
                patch[key] = inner
        elif old[key] != new[key]:
            patch[key] = new[key]
    return patch


def merge_fields(a: Obj, b: Obj) -> Obj:
    """``a`` with the fields of ``b`` set, nested mappings merged (a copy; neither changes)."""
    result = dict(a)
    for key, value in b.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merge_fields(result[key], value)
        else:
            result[key] = value
    return result
