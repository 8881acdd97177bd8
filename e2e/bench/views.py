"""What reading Kubernetes objects costs, three ways, printed and saved as JSON
(``python -m e2e.bench.views [--out FILE]``).

The controllers read the informers' objects through ``manager.api.view`` rather than by
parsing each into its pydantic model. Timed on ``--objects`` Workloads (as an informer
holds them): the reads a job controller pass makes of each (key, active, owner job,
ClusterQueue, creation time) through the views as the controllers call them; the same
fields by hand-written ``.get(...) or {}`` chains; and a pydantic ``Workload`` parse.
Figures only, no assertion: compare runs on one machine.
"""

from __future__ import annotations

import argparse
import json
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from manager.api import Workload
from manager.controllers import workloadstatus as ws

Obj = dict[str, Any]


def workload(i: int) -> Obj:
    owner: Obj = {"kind": "Job", "apiVersion": "batch/v1", "name": f"j{i}", "uid": f"u{i}"}
    owner["controller"] = True
    main = {"name": "main", "count": 1, "template": {"spec": {"containers": []}}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": f"w{i}",
            "namespace": "ns",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "ownerReferences": [owner],
        },
        "spec": {"queueName": "q", "active": True, "podSets": [main]},
        "status": {"admission": {"clusterQueue": "cq"}},
    }


def through_views(objects: list[Obj]) -> list[tuple[object, ...]]:
    return [
        (
            ws.key_of(w),
            ws.is_active(w),
            ws.owner_job(w),
            ws.cluster_queue_of(w),
            ws.creation_time(w),
        )
        for w in objects
    ]


def by_chains(objects: list[Obj]) -> list[tuple[object, ...]]:
    read: list[tuple[object, ...]] = []
    for w in objects:
        meta = w.get("metadata") or {}
        read.append(
            (
                f"{meta.get('namespace')}/{meta.get('name')}",
                (w.get("spec") or {}).get("active", True) is not False,
                [r for r in meta.get("ownerReferences") or [] if r.get("controller")],
                str(((w.get("status") or {}).get("admission") or {}).get("clusterQueue") or ""),
                ws.parse_time(meta.get("creationTimestamp")),
            )
        )
    return read


def parsed(objects: list[Obj]) -> list[Workload]:
    return [Workload.model_validate(w) for w in objects]


def best_per_object(what: Callable[[list[Obj]], object], objects: list[Obj], runs: int) -> float:
    """Microseconds per object, the best of ``runs`` passes (the least disturbed one)."""
    best = min(timeit.repeat(lambda: what(objects), number=1, repeat=runs))
    return round(best / len(objects) * 1e6, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args()
    objects = [workload(i) for i in range(args.objects)]
    figures = {
        "objects": args.objects,
        "us_per_object_views": best_per_object(through_views, objects, args.runs),
        "us_per_object_chains": best_per_object(by_chains, objects, args.runs),
        "us_per_object_pydantic_parse": best_per_object(
            parsed, objects[: max(1, args.objects // 10)], args.runs
        ),
    }
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
