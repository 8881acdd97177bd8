"""What charging a DRA job costs on the manager, printed (``python -m e2e.bench.dracharge``).

The manager's view of a large worker: ``--nodes`` nodes of ``--gpus`` MIG-style a100s each
(each GPU shares 7 ``slices`` among itself, seven 1g and two 3g partitions: 10 devices per
GPU), published as the test bed publishes them (``e2e/local/dra.py``). Timed: the charge of
one pod claiming a 3g partition under a counter mapping (``dra.charge``: every device of the
driver read and matched, as upstream's counter charge does), the charge of a plain
``nvidia.com/gpu: 1`` container that a DeviceClass serves, and the merge of the workers'
catalogues the charge reads. Figures only, no assertion: compare runs on one machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import tracemalloc
from collections.abc import Callable

from e2e.local import dra as bed
from manager.api import dra, dracounters
from manager.controllers import devicecatalogue

SLICES = "example.com/gpu-slices"
GPU = "example.com/gpu"


def _timed(what: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        what()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    devices = bed.Devices(
        "a100", args.gpus, "nvidia.com/gpu", bed.Partitions(7, {"1g": 1, "3g": 3})
    )
    slices = [bed.resource_slice(f"node-{i}", devices) for i in range(args.nodes)]
    for version, made in enumerate(slices, start=1):  # as an informer holds them
        made["metadata"]["resourceVersion"] = str(version)
    classes = {c["metadata"]["name"]: c for c in bed.device_classes([devices])}
    selector = f'device.attributes["{bed.DRIVER}"].model == "a100"'
    mappings = dra.parse_device_class_mappings(
        json.dumps(
            [
                {"name": GPU, "deviceClassNames": [bed.class_name("a100")]},
                {
                    "name": SLICES,
                    "deviceClassNames": [bed.class_name("a100", "3g")],
                    "sources": [
                        {
                            "counter": {
                                "name": "slices",
                                "driver": bed.DRIVER,
                                "deviceSelector": {"cel": {"expression": selector}},
                            }
                        }
                    ],
                },
            ]
        )
    )
    merged_at = time.perf_counter()
    catalogue = devicecatalogue.merged([("worker", dra.DeviceCatalogue(classes, slices))])
    merged = time.perf_counter() - merged_at
    template = {
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "p", "exactly": {"deviceClassName": bed.class_name("a100", "3g")}}
                    ]
                }
            }
        }
    }
    claims = [{"name": "main", "count": 1, "template": {"spec": {
        "resourceClaims": [{"name": "p", "resourceClaimTemplateName": "t"}],
        "containers": [{"name": "c", "resources": {"claims": [{"name": "p"}]}}]}}}]  # fmt: skip
    extended = [{"name": "main", "count": 1, "template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}}]  # fmt: skip
    first_at = time.perf_counter()
    result = dra.charge(claims, {"t": template}, mappings, catalogue)
    first = time.perf_counter() - first_at
    assert result == dra.Charge({"main": {SLICES: 3}}), result
    # What reading the slices keeps, measured from empty (the module's own memo, cleared).
    dracounters._slices.clear()
    dracounters._looks.clear()
    tracemalloc.start()
    dra.charge(claims, {"t": template}, mappings, catalogue)
    kept, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    counter = _timed(lambda: dra.charge(claims, {"t": template}, mappings, catalogue), args.runs)
    served = _timed(lambda: dra.charge(extended, {}, mappings, catalogue), args.runs)
    devices_total = sum(len(s["spec"]["devices"]) for s in slices)
    print(
        f"{args.nodes} nodes x {args.gpus} partitioned GPUs ({devices_total} devices): "
        f"a 3g partition charged by its counter in {first * 1e3:.0f} ms the first time "
        f"(its slices parsed and kept: {kept / 2**20:.1f} MiB), {counter * 1e3:.1f} ms after; "
        f"a DRA-served nvidia.com/gpu in {served * 1e3:.3f} ms; "
        f"the workers' catalogue merged in {merged * 1e3:.1f} ms (median of {args.runs})"
    )


if __name__ == "__main__":
    main()
