"""The benchmark's Jobs: ``count`` small batch/v1 Jobs, alternately for the two GPU flavors
of the seed article (even index: rtx-a1000, odd: h100, steered by ``nodeSelector``
``gpu.model``), submitted at a steady rate; and the long-running probe Job of a partition
drill. Pure: manifests and a schedule, no I/O.

The Jobs are what a user submits to the manager, already in the shape kfed's webhook would
give them (``suspend: true``, ``spec.managedBy: kueue.x-k8s.io/multikueue``): the benchmark
runs the manager without its webhook, so nothing but dispatch sits on the measured path.
kwok "runs" each pod for ``runtime_ms`` (the ``pod-complete.stage.kwok.x-k8s.io/delay``
annotation, see e2e/local/kwok-stages.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from manager.api import constants as C

NAMESPACE = "ml-jobs"
LOCAL_QUEUE = "gpu-lq"
FLAVORS = ("rtx-a1000", "h100")
KWOK_DELAY_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"
BENCH_LABEL = "bench.kfed.io/role"
"""On every Job the benchmark creates (and its pods): ``load`` or ``probe``."""


@dataclass(frozen=True, slots=True)
class JobShape:
    """What each pod asks for: small, so that hundreds fit at once and quota never binds."""

    cpu: str = "100m"
    memory: str = "128Mi"
    gpus: int = 1
    runtime_ms: int = 2000

    def to_json(self) -> dict[str, Any]:
        return {
            "cpu": self.cpu,
            "memory": self.memory,
            "nvidia.com/gpu": self.gpus,
            "runtime_ms": self.runtime_ms,
        }


def job_name(index: int) -> str:
    return f"bench-{index:05d}"


def flavor_of(index: int) -> str:
    """Half the Jobs for each flavor, interleaved so both streams run at the same pace."""
    return FLAVORS[index % len(FLAVORS)]


def job_manifest(
    name: str, flavor: str, shape: JobShape, *, role: str = "load", runtime_ms: int | None = None
) -> dict[str, Any]:
    if flavor not in FLAVORS:
        raise ValueError(f"unknown flavor {flavor!r}; the benchmark has {', '.join(FLAVORS)}")
    amounts = {"cpu": shape.cpu, "memory": shape.memory, "nvidia.com/gpu": str(shape.gpus)}
    delay = shape.runtime_ms if runtime_ms is None else runtime_ms
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {C.QUEUE_NAME_LABEL: LOCAL_QUEUE, BENCH_LABEL: role},
        },
        "spec": {
            "suspend": True,
            "managedBy": C.MULTIKUEUE_MANAGED_BY,
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 0,
            "template": {
                "metadata": {
                    "labels": {BENCH_LABEL: role},
                    "annotations": {KWOK_DELAY_ANNOTATION: str(delay)},
                },
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {"gpu.model": flavor},
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": amounts, "limits": amounts},
                        }
                    ],
                },
            },
        },
    }


def load_jobs(count: int, shape: JobShape) -> list[dict[str, Any]]:
    """The same list for every dispatch mode, so the modes are compared on equal work."""
    return [job_manifest(job_name(i), flavor_of(i), shape) for i in range(count)]


PROBE_RUNTIME_MS = 3_600_000
"""A probe runs far longer than any drill: it only stops when the drill deletes it."""


def probe_name(drill: int) -> str:
    return f"probe-{drill:02d}"


def probe_flavor(drill: int) -> str:
    """Alternate flavors, so drills cut every worker that offers one."""
    return FLAVORS[(drill + 1) % len(FLAVORS)]  # h100 first: two workers offer each flavor


def probe_job(drill: int, shape: JobShape) -> dict[str, Any]:
    return job_manifest(
        probe_name(drill),
        probe_flavor(drill),
        shape,
        role="probe",
        runtime_ms=PROBE_RUNTIME_MS,
    )


def submission_offsets(count: int, rate: float) -> list[float]:
    """Seconds after the start at which each Job is due: a steady ``rate`` per second. The
    schedule is absolute, so a slow create delays only itself, never the ones after it."""
    if rate <= 0:
        raise ValueError(f"the submission rate must be positive, got {rate}")
    return [i / rate for i in range(count)]
