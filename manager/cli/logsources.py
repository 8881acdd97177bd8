"""``kfed logs``' pure parts: the worker a job runs or ran on (or why it has none), the
label selector of its pods there, which of their containers to read and how their lines are
prefixed, and log bytes cut into lines."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from manager.api import constants as C
from manager.api.view import at
from manager.cli.common import CliError, usage_error
from manager.controllers import conditions
from manager.controllers import workloadstatus as ws
from manager.controllers.jobkinds.base import JobKind
from manager.controllers.jobkinds.batchjob import BATCH_JOB
from manager.federation.engine.retaining import ran_on
from manager.federation.engine.workloadview import why

Obj = dict[str, Any]
_BATCH_UID_LABEL = "batch.kubernetes.io/controller-uid"
_CHECK_CLUSTER = re.compile(r'on "([^"]+)"')
_TERMINAL_PHASES = ("Succeeded", "Failed")


# -- where the job runs or ran (pure) ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Whereabouts:
    cluster: str
    finished: str
    """How it finished ("Succeeded: Reached expected number of succeeded pods"); "" while
    it has not."""


def whereabouts(workload: Obj, what: str) -> Whereabouts:
    """The worker the workload runs or ran on; a CliError (exit 1) saying why there is
    none yet. ``what`` names the job in messages ("Job ml-jobs/light-job")."""
    status = ws.status_of(workload)
    # A finished run may have ended on another worker than clusterName says (kfed.io/ran-on).
    cluster = (ran_on(workload) if ws.is_finished(workload) else "") or str(
        status.get("clusterName") or ""
    )
    if not cluster:
        for check in status.get("admissionChecks") or []:
            found = _CHECK_CLUSTER.search(str(check.get("message") or ""))
            if check.get("state") == "Ready" and found:
                cluster = found.group(1)
    if not cluster:
        meta = at(workload, "metadata")
        not_yet = (
            "never ran on a worker"
            if ws.is_finished(workload)
            else ("has not been placed on a worker yet")
        )
        raise CliError(
            f"{what} {not_yet}, so it has no logs: {why(workload)}; "
            f"see `kfed explain {meta.get('namespace')}/{meta.get('name')}`"
        )
    finished = ""
    if ws.is_finished(workload):
        condition = conditions.find(status.get("conditions"), C.FINISHED) or {}
        finished = ": ".join(
            str(part) for part in (condition.get("reason"), condition.get("message")) if part
        )
        finished = finished or "finished"
    return Whereabouts(cluster, finished)


# -- the job's pods and their containers (pure) -----------------------------------------------


def pod_selector(kind: JobKind, name: str, job: Obj | None) -> str:
    """The label selector of the job's pods on the worker: a batch Job's by its uid while it
    exists (never a former Job's of the same name), else by the kind's pod label."""
    if kind is BATCH_JOB and job is not None and job["metadata"].get("uid"):
        return f"{_BATCH_UID_LABEL}={job['metadata']['uid']}"
    return kind.pod_selector(name)


def container_state(pod: Obj, container: str) -> tuple[str, str]:
    """("waiting" | "running" | "terminated", why it waits)."""
    status = at(pod, "status")
    phase = str(status.get("phase") or "Pending")
    for entry in (status.get("containerStatuses") or []) + (
        status.get("initContainerStatuses") or []
    ):
        if entry.get("name") != container:
            continue
        state = entry.get("state") or {}
        if "running" in state:
            return "running", ""
        if "terminated" in state:
            return "terminated", ""
        return "waiting", str((state.get("waiting") or {}).get("reason") or phase)
    if phase in _TERMINAL_PHASES:
        return "terminated", ""
    return "waiting", phase


@dataclass(frozen=True, slots=True)
class Source:
    """One container of one pod, and how its lines are prefixed."""

    pod: str
    uid: str
    container: str
    prefix: str
    state: str
    waiting_reason: str

    @property
    def key(self) -> tuple[str, str]:
        return self.uid, self.container


def _containers(pod: Obj, *, init: bool) -> list[str]:
    spec = at(pod, "spec")
    names = [str(c["name"]) for c in spec.get("containers") or []]
    if init:
        names += [str(c["name"]) for c in spec.get("initContainers") or []]
    return names


def log_sources(pods: list[Obj], container: str | None) -> list[Source]:
    """The containers to read, pods oldest first: every container of each pod, or only
    ``container`` (which may be an init container). Lines are prefixed ``POD``, or
    ``POD/CONTAINER`` when several containers of one pod are read. A ``container`` no pod has
    is a usage error naming the ones they have."""
    ordered = sorted(
        pods,
        key=lambda p: (str(p["metadata"].get("creationTimestamp") or ""), p["metadata"]["name"]),
    )
    sources = []
    for pod in ordered:
        names = _containers(pod, init=container is not None)
        chosen = [n for n in names if n == container] if container is not None else names
        for name in chosen:
            pod_name = str(pod["metadata"]["name"])
            state, reason = container_state(pod, name)
            sources.append(
                Source(
                    pod=pod_name,
                    uid=str(pod["metadata"].get("uid") or pod_name),
                    container=name,
                    prefix=pod_name if len(chosen) == 1 else f"{pod_name}/{name}",
                    state=state,
                    waiting_reason=reason,
                )
            )
    if pods and container is not None and not sources:
        have = sorted({n for pod in pods for n in _containers(pod, init=True)})
        raise usage_error(
            f"no container {container!r} in the job's pods; they have: {', '.join(have)}"
        )
    return sources


class LineSplitter:
    """Bytes as they arrive -> whole lines (a log line may span chunks)."""

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, chunk: bytes) -> list[str]:
        *lines, self._rest = (self._rest + chunk).split(b"\n")
        return [_text(line) for line in lines]

    def flush(self) -> list[str]:
        """The last line, when the log does not end with a newline."""
        rest, self._rest = self._rest, b""
        return [_text(rest)] if rest else []


def _text(line: bytes) -> str:
    return line.rstrip(b"\r").decode(errors="replace")


def job_ended(kind: JobKind, job: Obj | None) -> bool:
    """The job ended on the worker, or is gone from it (collected once it finished)."""
    return job is None or kind.outcome(job) is not None
