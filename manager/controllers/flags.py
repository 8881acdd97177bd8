"""The admission controllers' command-line flags, declared once for both processes that run
them: the manager (global queues) and the worker shim (a worker's own queues)."""

from __future__ import annotations

import argparse
from pathlib import Path

from manager import core
from manager.api import dra
from manager.controllers.jobkinds import registry as jobkinds
from manager.controllers.settings import ControllerSettings

_STRATEGIES = [s.value for s in core.FairSharingStrategy]
_DEFAULT_STRATEGIES = ",".join(s.value for s in core.FairSharingConfig().preemption_strategies)


def add_controller_flags(parser: argparse.ArgumentParser) -> None:
    d = ControllerSettings()
    parser.add_argument(
        "--workers", type=int, default=d.workers, help="reconciles at once per controller"
    )
    parser.add_argument(
        "--topology-aware-scheduling",
        action="store_true",
        help="place pod sets by topology as Kueue's TAS does (a ResourceFlavor's "
        "topologyName, a pod set's kueue.x-k8s.io/podset-*-topology annotations): watches "
        "Topologies, Nodes and all Pods of this cluster (docs/tas.md)",
    )
    parser.add_argument(
        "--fair-sharing",
        action="store_true",
        help="Kueue's fair sharing: ClusterQueues of a cohort share unused quota by their "
        "spec.fairSharing.weight, and borrowing queues may be preempted to even it out "
        "(Kueue's fairSharing.enable)",
    )
    parser.add_argument(
        "--fair-sharing-preemption-strategies",
        default=_DEFAULT_STRATEGIES,
        metavar="LIST",
        help=f"comma-separated, in order, from {', '.join(_STRATEGIES)} (Kueue's "
        "fairSharing.preemptionStrategies); only with --fair-sharing",
    )
    parser.add_argument(
        "--unadmitted-workloads-observability",
        action="store_true",
        help="Kueue's UnadmittedWorkloadsObservability feature gate (v0.19): a pending "
        "workload's QuotaReserved=False reason says why it waits (WaitingForQuota, "
        "NoMatchingFlavor, ExceedsMaxQuota, Misconfigured, Suspended, ...) instead of Pending "
        "or Inadmissible, and kueue_unadmitted_workloads counts the workloads by it",
    )
    parser.add_argument(
        "--integrations",
        default=",".join(d.integrations),
        metavar="LIST",
        help=f"comma-separated kinds of job to queue, from {', '.join(jobkinds.KINDS)} "
        "(Kueue's integrations.frameworks); batch/job is always on, another kind starts "
        "once its CRD is served",
    )
    parser.add_argument(
        "--event-qps",
        type=float,
        default=d.event_qps,
        help="Kubernetes Events written per second at most, after a burst of --event-burst, "
        "for routine Events and for alerts (Warnings other than why a workload waits) each "
        "(0: none)",
    )
    parser.add_argument("--event-burst", type=int, default=d.event_burst, help="see --event-qps")
    parser.add_argument(
        "--device-class-mappings",
        default="",
        metavar="JSON",
        help="the quota resource each DRA DeviceClass is charged to, as Kueue's "
        'resources.deviceClassMappings in JSON: \'[{"name": "example.com/gpu", '
        '"deviceClassNames": ["gpu.example.com"]}]\' (or @FILE holding that JSON); '
        "a job claiming devices of an unmapped class is not admitted (docs/dra.md)",
    )


def controller_settings_from(args: argparse.Namespace, *, role: str) -> ControllerSettings:
    """The settings the flags ask for; raises ValueError (with the flag's name) when a value
    is not one the flag takes."""
    fair_sharing = None
    if args.fair_sharing:
        names = [n.strip() for n in args.fair_sharing_preemption_strategies.split(",") if n.strip()]
        unknown = [n for n in names if n not in _STRATEGIES]
        if unknown or not names:
            raise ValueError(
                f"--fair-sharing-preemption-strategies: {', '.join(unknown) or 'empty'} is not "
                f"one of {', '.join(_STRATEGIES)}"
            )
        fair_sharing = core.FairSharingConfig(
            preemption_strategies=tuple(core.FairSharingStrategy(n) for n in names)
        )
    integrations = tuple(n.strip() for n in args.integrations.split(",") if n.strip())
    try:
        jobkinds.parse(integrations)
    except ValueError as err:
        raise ValueError(f"--integrations: {err}") from None
    if args.event_qps < 0 or args.event_burst < 1:
        raise ValueError("--event-qps must be 0 or more and --event-burst 1 or more")
    return ControllerSettings(
        device_class_mappings=device_class_mappings(args.device_class_mappings),
        workers=args.workers,
        role=role,
        fair_sharing=fair_sharing,
        integrations=integrations,
        event_qps=args.event_qps,
        event_burst=args.event_burst,
        topology_aware=bool(getattr(args, "topology_aware_scheduling", False)),
        unadmitted_workloads_observability=bool(
            getattr(args, "unadmitted_workloads_observability", False)
        ),
    )


def device_class_mappings(value: str) -> dra.DeviceClassMappings:
    """``--device-class-mappings``' value (JSON, or @FILE holding it), checked; ValueError
    naming the flag. ``kfed whatif`` reads the mapping with it too."""
    text = value
    if value.startswith("@"):
        try:
            text = Path(value[1:]).read_text()
        except OSError as err:
            raise ValueError(f"--device-class-mappings: cannot read {value[1:]}: {err}") from None
    try:
        return dra.parse_device_class_mappings(text)
    except ValueError as err:
        raise ValueError(f"--device-class-mappings: {err}") from None
