"""The manager's mutating admission webhook for every kind of job kfed queues (Jobs below).

A Job submitted to the manager in a queue whose ClusterQueue uses the MultiKueue admission
check must never run there: kfed runs it on a worker. So, like upstream Kueue's
``ApplyDefaultForManagedBy``, the webhook sets ``spec.managedBy: kueue.x-k8s.io/multikueue``
at creation (the field is immutable afterwards), and the built-in Job controller of the
manager cluster leaves such Jobs alone. Like Kueue's Job webhook, it also suspends every Job
that names a queue, so that nothing starts before admission.

It refuses what would break that promise, with a readable reason: a Job that claims
``managedBy: kueue.x-k8s.io/multikueue`` in a queue with no MultiKueue check (nothing would
ever run it, and it would hold its quota forever), and, as upstream Kueue's Job webhook does,
a change of the queue (or prebuilt-workload) label of a Job that is not suspended (it would
be placed elsewhere while it runs here), and what its kind's upstream webhook refuses.

Three layers, each testable on its own:

- ``review_job``: the decision, pure: an AdmissionReview request in, a ``Verdict`` out;
- ``ClusterStateQueues``: "does this LocalQueue lead to a MultiKueue check?" over the
  ClusterState informers;
- ``webhook_app`` / ``WebhookServer``: AdmissionReview over HTTPS with aiohttp.
"""

from __future__ import annotations

import base64
import copy
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from manager.api import federated
from manager.api.constants import (
    MULTIKUEUE_MANAGED_BY,
    PREBUILT_WORKLOAD_LABEL,
    QUEUE_NAME_LABEL,
)
from manager.controllers.jobkinds import registry as jobkinds
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.controllers.state import ClusterState
from manager.federation.webhooks.certs import server_ssl_context
from manager.kube.informer import Informer

log = logging.getLogger(__name__)

MUTATE_JOB_PATH = "/mutate-batch-v1-job"
HEALTHZ_PATH = "/healthz"
READYZ_PATH = "/readyz"
ADMISSION_API_VERSION = "admission.k8s.io/v1"
NOT_READY_MESSAGE = (
    "kfed manager not ready, retry: its view of LocalQueues, ClusterQueues and "
    "AdmissionChecks is still loading"
)
NOT_READY_RETRY = 1
"""Seconds a refused client waits before trying again: informers list in well under that."""
MAX_REVIEW_BYTES = 8 * 1024 * 1024
"""A Job is at most etcd's 1.5 MiB; leave room for the AdmissionReview around it."""

UsesMultiKueue = Callable[[str, str], "bool | None"]
"""``(namespace, queue_name)``: True when the LocalQueue's ClusterQueue has a MultiKueue
check, False when it has none, None when the LocalQueue or its ClusterQueue is unknown."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the webhook answers for one request."""

    allowed: bool
    patch: list[dict[str, Any]] = field(default_factory=list)
    """JSONPatch operations (RFC 6902) applied to the Job; empty: leave it as it is."""
    warnings: list[str] = field(default_factory=list)
    """Shown to the user (kubectl prints them); never a reason to block."""
    message: str = ""
    """Why the request was denied (only when ``allowed`` is False)."""
    code: int = 403
    """The HTTP status a refusal reaches the client with (503: come back later)."""
    retry_after_seconds: int = 0
    """With a refusal: the apiserver turns it into a Retry-After header, on which client-go
    (kubectl, controllers) and kfed's own client retry by themselves."""


def review_job(
    request: Mapping[str, Any], uses_multikueue: UsesMultiKueue, *, ready: bool = True
) -> Verdict:
    """Decide one AdmissionReview ``request`` for a Job.

    A Job without the queue-name label is none of kfed's business and passes untouched, even
    before the manager is ready. A queued Job is suspended, and gets the MultiKueue
    ``managedBy`` when its queue leads to a MultiKueue check; while the queue view is not
    loaded, the answer for a queued Job is "retry", never a guess. A request that does not
    look like a Job creation is allowed unchanged with a warning: the webhook must never
    block what it does not understand.
    """
    kind = request.get("kind")
    job_kind = (
        jobkinds.by_group_version_kind(
            str(kind.get("group", "")), str(kind.get("version", "")), str(kind.get("kind", ""))
        )
        if isinstance(kind, Mapping)
        else None
    )
    if job_kind is None:
        known = ", ".join(
            f"{k.resource.api_version} {k.resource.kind}" for k in jobkinds.KINDS.values()
        )
        return _malformed(f"expected a kind of job kfed queues ({known}), got kind {kind!r}")
    job_obj = dict(obj) if isinstance(obj := request.get("object"), Mapping) else {}
    if job_obj and not job_kind.manages(job_obj):  # a pod its controller made: its owner's
        return Verdict(allowed=True)
    operation = request.get("operation")
    if operation == "UPDATE":
        return review_job_update(request, uses_multikueue, job_kind)
    if operation != "CREATE":
        return _malformed(f"only CREATE and UPDATE are reviewed, got operation {operation!r}")
    job = request.get("object")
    if not isinstance(job, Mapping):
        return _malformed("the request carries no Job object")
    metadata = job.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    labels = metadata.get("labels")
    queue = labels.get(QUEUE_NAME_LABEL) if isinstance(labels, Mapping) else None
    if not queue:
        return Verdict(allowed=True)
    if not isinstance(queue, str):
        return _malformed(f"label {QUEUE_NAME_LABEL} is not a string: {queue!r}")
    spec = job.get("spec")
    if not isinstance(spec, Mapping):
        return _malformed("the Job has no spec")
    namespace = request.get("namespace") or metadata.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        return _malformed("the request names no namespace")
    if not ready:
        return Verdict(
            allowed=False, message=NOT_READY_MESSAGE, code=503, retry_after_seconds=NOT_READY_RETRY
        )

    if refused := job_kind.refusal(dict(job)):
        return Verdict(allowed=False, message=refused)
    patch: list[dict[str, Any]] = []
    patched = copy.deepcopy(dict(job))  # as the patch so far leaves it
    if not job_kind.is_suspended(patched):
        for path, value in _leaves(job_kind.suspend_fields(True, patched)):
            patch += _set_ops(patched, path, value)
    managed_by = _field(job, job_kind.managed_by_path)
    field_name = job_kind.managed_by_name()
    federated = uses_multikueue(namespace, queue)
    if managed_by == MULTIKUEUE_MANAGED_BY and federated is False:
        # Nothing would ever run it: the manager's Job controller leaves it to MultiKueue,
        # and no MultiKueue check will ever place it. It would hold its quota forever.
        return Verdict(
            allowed=False,
            message=_never_placed(
                namespace,
                queue,
                f"remove {field_name}, or submit it to a federated queue",
                field_name,
            ),
        )
    if managed_by in (None, "", job_kind.default_managed_by) and federated:
        patch += _set_ops(patched, job_kind.managed_by_path, MULTIKUEUE_MANAGED_BY)
    return Verdict(allowed=True, patch=patch)


def _field(obj: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The value at ``path`` in ``obj`` (None where any step is missing)."""
    current: Any = obj
    for key in path:
        if not isinstance(current, Mapping):
            return None
        current = current.get(key)
    return current


def _leaves(
    fields: Mapping[str, Any], path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], Any]]:
    """Each field a merge patch sets (``{"spec": {"suspend": true}}``: ``spec.suspend``)."""
    found: list[tuple[tuple[str, ...], Any]] = []
    for key, value in fields.items():
        if isinstance(value, Mapping):
            found += _leaves(value, (*path, key))
        else:
            found.append(((*path, key), value))
    return found


def _set_ops(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> list[dict[str, Any]]:
    """The JSONPatch operation that sets ``path`` to ``value`` in ``obj`` (an ``add`` of the
    first missing object on the way with the rest inside it: ``/spec/runPolicy`` when a
    Kubeflow job has none), applied to ``obj`` too so that a later one sees it."""
    holder = obj
    for depth, key in enumerate(path[:-1]):
        inner = holder.get(key)
        if not isinstance(inner, dict):
            rest: Any = value
            for later in reversed(path[depth + 1 :]):
                rest = {later: rest}
            holder[key] = copy.deepcopy(rest)
            return [{"op": "add", "path": _pointer(path[: depth + 1]), "value": rest}]
        holder = inner
    holder[path[-1]] = value
    return [{"op": "add", "path": _pointer(path), "value": value}]


def _pointer(path: tuple[str, ...]) -> str:
    """A JSON pointer (RFC 6901) to ``path``."""
    return "".join("/" + key.replace("~", "~0").replace("/", "~1") for key in path)


def review_job_update(
    request: Mapping[str, Any], uses_multikueue: UsesMultiKueue, job_kind: JobKind = BATCH_JOB
) -> Verdict:
    """An update of a queued (or newly queued) Job: refuse what upstream Kueue refuses, and a
    move to a queue that could never run it. The queue of a running Job must not change:
    adding a queue label to a running Job would make kfed queue, and on a federation place
    elsewhere, a Job that already runs here. A suspended Job may move to another queue (its
    Workload follows) only where ``spec.managedBy``, which is immutable, still fits: a Job left
    to MultiKueue to a federated queue, any other Job to a queue that runs it on this cluster.

    This webhook fails open (an update must not depend on the manager); the admission core
    holds the same line for a Job left to MultiKueue that got past it."""
    new, old = request.get("object"), request.get("oldObject")
    if not isinstance(new, Mapping) or not isinstance(old, Mapping):
        return _malformed("the update request lacks the Job or its previous version")
    if job_kind.is_suspended(dict(new)):
        queue = _label(new, QUEUE_NAME_LABEL)
        namespace = request.get("namespace") or _meta(new).get("namespace")
        if not queue or queue == _label(old, QUEUE_NAME_LABEL) or not isinstance(queue, str):
            return Verdict(allowed=True)
        if not isinstance(namespace, str) or not namespace:
            return _malformed("the request names no namespace")
        managed_by = _field(new, job_kind.managed_by_path)
        field_name = job_kind.managed_by_name()
        federated = uses_multikueue(namespace, queue)
        if managed_by == MULTIKUEUE_MANAGED_BY and federated is False:
            return Verdict(
                allowed=False,
                message=_never_placed(
                    namespace,
                    queue,
                    f"label it with a federated queue instead ({field_name} cannot change)",
                    field_name,
                ),
            )
        if managed_by in (None, "", job_kind.default_managed_by) and federated:
            return Verdict(
                allowed=False,
                message=f"LocalQueue {namespace}/{queue} leads to a ClusterQueue with a "
                f"MultiKueue admission check, but this Job was created without {field_name} "
                f"{MULTIKUEUE_MANAGED_BY!r} (immutable), so it would run on this cluster, not on a "
                "worker: delete it and submit it again with that queue label",
            )
        return Verdict(allowed=True)
    for label in (QUEUE_NAME_LABEL, PREBUILT_WORKLOAD_LABEL):
        if _label(new, label) != _label(old, label):
            what = "queue name" if label == QUEUE_NAME_LABEL else "prebuilt workload name"
            return Verdict(
                allowed=False,
                message=f"metadata.labels[{label}]: Forbidden: must not update {what} when "
                "job is unsuspend",
            )
    return Verdict(allowed=True)


def _never_placed(
    namespace: str, queue: str, remedy: str, field_name: str = "spec.managedBy"
) -> str:
    return (
        f"{field_name} is {MULTIKUEUE_MANAGED_BY!r} but LocalQueue {namespace}/{queue} leads "
        f"to a ClusterQueue without a MultiKueue admission check, so nothing would ever run "
        f"this Job: {remedy}"
    )


def _meta(job: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = job.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}


def _label(job: Mapping[str, Any], key: str) -> Any:
    metadata = job.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    return labels.get(key) if isinstance(labels, Mapping) else None


def _malformed(problem: str) -> Verdict:
    log.warning("admission request allowed unchanged: %s", problem)
    return Verdict(allowed=True, warnings=[f"kfed webhook left this object unchanged: {problem}"])


def review_response(body: Any, verdict: Verdict) -> dict[str, Any]:
    """The AdmissionReview (admission.k8s.io/v1) that answers the review ``body`` with
    ``verdict``. It echoes the request's ``uid``, or the apiserver would discard it."""
    request = body.get("request") if isinstance(body, Mapping) else None
    uid = request.get("uid", "") if isinstance(request, Mapping) else ""
    response: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
    if verdict.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(verdict.patch).encode()).decode()
    if verdict.warnings:
        response["warnings"] = list(verdict.warnings)
    if not verdict.allowed:
        response["status"] = {
            "code": verdict.code,
            "reason": "ServiceUnavailable" if verdict.code == 503 else "Forbidden",
            "message": verdict.message,
        }
        if verdict.retry_after_seconds:
            response["status"]["details"] = {"retryAfterSeconds": verdict.retry_after_seconds}
    return {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview", "response": response}


def answer_review(body: Any, lookup: QueueLookup) -> dict[str, Any]:
    """Answer one decoded AdmissionReview body: the whole round trip, minus HTTP."""
    request = body.get("request") if isinstance(body, Mapping) else None
    if not isinstance(request, Mapping):
        verdict = _malformed("the body is not an AdmissionReview with a request")
    else:
        verdict = review_job(request, lookup.uses_multikueue, ready=lookup.ready())
    return review_response(body, verdict)


# -- the queue view ------------------------------------------------------------------------


class QueueLookup(Protocol):
    """What the webhook needs to know about queues."""

    def ready(self) -> bool:
        """True once the view is complete enough to decide (informers listed once)."""
        ...

    def uses_multikueue(self, namespace: str, queue_name: str) -> bool | None: ...


class ClusterStateQueues:
    """``QueueLookup`` over a ClusterState: LocalQueue -> ClusterQueue ->
    ``admissionChecksStrategy.admissionChecks[].name`` -> AdmissionCheck whose
    ``spec.controllerName`` is ``kueue.x-k8s.io/multikueue``.

    A queue that does not exist (yet) is not a MultiKueue queue, as upstream decides: the Job
    is still suspended, and waits for its queue like any other.
    """

    def __init__(self, state: ClusterState) -> None:
        self.state = state

    @property
    def informers(self) -> list[Informer]:
        """The informers this lookup reads; someone must run them."""
        return [self.state.local_queues, self.state.cluster_queues, self.state.admission_checks]

    def ready(self) -> bool:
        return all(informer.synced.is_set() for informer in self.informers)

    def uses_multikueue(self, namespace: str, queue_name: str) -> bool | None:
        cluster_queue = self.state.cluster_queue_of(namespace, queue_name)
        if cluster_queue is None:
            return None
        found = federated.federation_of(
            cluster_queue, self.state.admission_checks.get, lambda _: None
        )
        return found is not None


# -- HTTP ----------------------------------------------------------------------------------


def webhook_app(lookup: QueueLookup) -> web.Application:
    """The aiohttp application: POST ``/mutate-batch-v1-job``, GET ``/healthz`` and
    ``/readyz``. Only an unreadable body is an HTTP error (400); every AdmissionReview gets
    an AdmissionReview back."""

    async def mutate(request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except ValueError as err:  # invalid JSON or UTF-8
            return web.json_response({"message": f"unreadable AdmissionReview: {err}"}, status=400)
        return web.json_response(answer_review(body, lookup))

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        if lookup.ready():
            return web.Response(text="ok")
        return web.Response(text="queue view not loaded yet", status=503)

    app = web.Application(client_max_size=MAX_REVIEW_BYTES)
    app.router.add_post(MUTATE_JOB_PATH, mutate)
    app.router.add_get(HEALTHZ_PATH, healthz)
    app.router.add_get(READYZ_PATH, readyz)
    return app


class WebhookServer:
    """The webhook application served over TLS with ``tls.crt``/``tls.key`` of ``cert_dir``.

    ``port=0`` picks a free port; ``port`` holds the bound one once ``start()`` returned.
    """

    def __init__(self, lookup: QueueLookup, host: str, port: int, cert_dir: Path | str) -> None:
        self.lookup = lookup
        self.host = host
        self.port = port
        self.cert_dir = Path(cert_dir)
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        if self._runner is not None:
            raise RuntimeError("the webhook server is already running")
        runner = web.AppRunner(webhook_app(self.lookup), access_log=None)
        await runner.setup()
        try:
            site = web.TCPSite(
                runner, self.host, self.port, ssl_context=server_ssl_context(self.cert_dir)
            )
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        log.info(
            "admission webhook serving on https://%s:%d%s", self.host, self.port, MUTATE_JOB_PATH
        )

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    @property
    def url(self) -> str:
        """The mutate endpoint, for a webhook configuration's ``clientConfig.url``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}{MUTATE_JOB_PATH}"

    async def __aenter__(self) -> WebhookServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
