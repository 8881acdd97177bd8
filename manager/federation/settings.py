"""Every knob of the federation, with the reasoning behind its default."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from enum import StrEnum

from manager.api import constants as C
from manager.api.externalframeworks import names_flag
from manager.api.knobs import knob
from manager.federation.accessproviders import Provider, parse_providers
from manager.federation.decisions.retention import parse_duration


class DispatchMode(StrEnum):
    CAPACITY_AWARE = "kfed.io/capacity-aware"
    """kfed's default: ONE copy, on the best-fitting worker with free quota in the flavor."""
    ALL_AT_ONCE = C.MULTIKUEUE_DISPATCHER_ALL_AT_ONCE
    """Upstream's default: a copy on every worker; the first to admit wins."""
    INCREMENTAL = C.MULTIKUEUE_DISPATCHER_INCREMENTAL
    """Upstream's incremental dispatcher: rounds of ``incremental_step`` workers."""


class FailoverPolicy(StrEnum):
    """When the workloads of a lost worker may run elsewhere (per ClusterQueue, annotation
    ``kfed.io/failover``; the manager's ``--failover-policy`` is the default)."""

    AT_MOST_ONCE = "at-most-once"
    """kfed's default: a workload moves only when its copy surely stopped: the worker came
    back and its copy is fenced or gone, or ``worker_lost_timeout`` passed (the shim fences
    it by then, if its own control plane lets it). A worker whose control plane is down
    cannot stop its pods (kubelets keep containers running), so nothing moves sooner."""
    FAST = "fast"
    """Move once the worker's shim has surely fenced, if it could act: seconds, not minutes.
    For jobs that tolerate running twice: when the worker's own control plane is down its
    shim cannot stop anything, and the job may run in two places until it returns."""


def failover_policy(value: str | None, default: FailoverPolicy) -> FailoverPolicy:
    """The policy an annotation value asks for; ``wait`` (kfed 0.1's name) is at-most-once,
    and anything unknown is the safe one."""
    if not value:
        return default
    if value == "wait":
        return FailoverPolicy.AT_MOST_ONCE
    try:
        return FailoverPolicy(value)
    except ValueError:
        return FailoverPolicy.AT_MOST_ONCE


DISPATCH_MODE_NAMES = {
    "capacity-aware": DispatchMode.CAPACITY_AWARE,
    "all-at-once": DispatchMode.ALL_AT_ONCE,
    "incremental": DispatchMode.INCREMENTAL,
}
"""The ``--dispatch-mode`` names; upstream's ``multiKueue.dispatcherName`` values are taken
too."""


def dispatch_mode(text: str) -> DispatchMode:
    """A dispatch mode by its flag name, or by upstream's dispatcher name."""
    if text in DISPATCH_MODE_NAMES:
        return DISPATCH_MODE_NAMES[text]
    try:
        return DispatchMode(text)
    except ValueError:
        names = ", ".join([*DISPATCH_MODE_NAMES, *(m.value for m in DispatchMode)])
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {names}") from None


def providers(text: str) -> tuple[Provider, ...]:
    """ClusterProfile access providers from their JSON (Kueue's ``accessProviders``)."""
    try:
        return parse_providers(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def duration(text: str) -> float:
    """Seconds, from ``90``, ``90s``, ``10m``, ``1h30m``."""
    try:
        return parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


@dataclass(frozen=True, slots=True)
class FederationSettings:
    """Each setting once: its default, why that default, its flag (``knobs.add_flags``) and
    its key in Kueue's Configuration where the meaning is the same."""

    namespace: str = knob(
        "kueue-system",
        "--namespace",
        "where the workers' kubeconfig Secrets and the leader Lease live (on the manager), "
        "and the fencing Leases (on the workers)",
    )
    origin: str = knob(
        "multikueue",
        "--origin",
        "value of the origin label on remote objects (upstream's default); managers that share "
        "workers must use distinct origins",
        config="multiKueue.origin",
    )
    external_frameworks: tuple[str, ...] = knob(
        (),
        "--multikueue-external-frameworks",
        "kinds of job kfed has no adapter for that it federates anyway, as MultiKueue's generic "
        "adapter does (comma-separated Kind.version.group; docs/jobs.md, External frameworks)",
        config="multiKueue.externalFrameworks",
        parse=names_flag,
        metavar="KIND.VERSION.GROUP,...",
    )
    manager_identity: str = "kfed-manager"
    """This manager's name (``--identity``: its host and pid by default)."""
    dispatch_mode: DispatchMode = knob(
        DispatchMode.CAPACITY_AWARE,
        "--dispatch-mode",
        "capacity-aware (kfed: one copy, on the best-fitting worker), all-at-once (upstream's "
        "default: a copy on every worker, the first to admit wins) or incremental (upstream: "
        "rounds of --incremental-step workers)",
        config="multiKueue.dispatcherName",
        parse=dispatch_mode,
        metavar="{capacity-aware,all-at-once,incremental}",
    )
    dispatch_workers: int = knob(
        16,
        "--dispatch-workers",
        "workloads placed or followed at once (each reconcile mostly waits on a worker's API: "
        "at a few jobs per second 4 left workloads seconds in the dispatch queue)",
    )
    incremental_step: int = knob(
        3, "--incremental-step", "incremental dispatch: workers added to each round"
    )
    incremental_round_timeout: float = knob(
        300.0,
        "--incremental-round-timeout",
        "incremental dispatch: seconds before the next round adds workers",
        parse=duration,
    )
    admission_timeout: float = knob(
        30.0,
        "--admission-timeout",
        "seconds a copy may wait for its worker to admit it; then it is withdrawn and the next "
        "worker tried",
        parse=duration,
    )
    nominate_after: float = knob(
        1.0,
        "--nominate-after",
        "capacity-aware: seconds after which a copy not admitted yet is shown on the Workload "
        "as nominated (most are admitted sooner, and cost no write for it)",
        parse=duration,
    )
    dispatch_deadline: float = knob(
        300.0,
        "--dispatch-deadline",
        "seconds a workload no worker can ever hold (no worker has its queue or flavor, or "
        "enough quota) keeps its manager quota before it is evicted and requeued",
        parse=duration,
    )
    gc_interval: float = knob(
        60.0,
        "--gc-interval",
        "seconds between sweeps for remote objects of our origin whose manager workload is gone",
        config="multiKueue.gcInterval",
        parse=duration,
    )
    request_timeout: float = knob(
        5.0,
        "--worker-request-timeout",
        "seconds per request to a worker: long enough for a loaded apiserver, short enough to "
        "notice a partition quickly",
        parse=duration,
    )
    reconnect_initial: float = knob(
        1.0,
        "--worker-reconnect-initial",
        "seconds before the first new connection attempt to a lost worker (doubling, jittered)",
        parse=duration,
    )
    reconnect_max: float = knob(
        60.0,
        "--worker-reconnect-max",
        "the longest pause between connection attempts to a worker",
        parse=duration,
    )
    lease_duration: float = knob(
        10.0,
        "--worker-lease-duration",
        "the manager's Lease on each worker: its shim fences (suspends this origin's "
        "workloads) when it has not seen a renewal for this long",
        parse=duration,
    )
    lease_renew_period: float = knob(
        2.0,
        "--worker-lease-renew-period",
        "seconds between renewals of the Lease on each worker",
        parse=duration,
    )
    fence_grace: float = knob(
        4.0,
        "--fence-grace",
        "extra seconds after the worker's lease surely expired, for the shim to suspend the "
        "jobs and their pods to stop, before the manager runs them elsewhere",
        parse=duration,
    )
    foreign_object_recheck: float = knob(
        30.0,
        "--foreign-object-recheck",
        "seconds a worker holding an object of a workload's name that kfed did not create is "
        "skipped for that workload before it is considered again",
        parse=duration,
    )
    failover_policy: FailoverPolicy = knob(
        FailoverPolicy.AT_MOST_ONCE,
        "--failover-policy",
        "when a lost worker's workloads may run elsewhere, for ClusterQueues without the "
        "kfed.io/failover annotation: at-most-once (only once they surely stopped, or after "
        "--worker-lost-timeout) or fast (once the worker's shim surely fenced them; they may "
        "run twice while the worker's own control plane is down)",
    )
    worker_lost_timeout: float = knob(
        300.0,
        "--worker-lost-timeout",
        "seconds after which at-most-once workloads of a lost worker move anyway (its shim "
        "fences them by then), and the wait for workers that cannot fence (15 min upstream)",
        aliases=("--unfenced-worker-lost-timeout",),  # kfed 0.1's name
        config="multiKueue.workerLostTimeout",
        parse=duration,
    )
    finished_retention: float = knob(
        0.0,
        "--finished-retention",
        "how long a finished workload's objects (its copy, Job and pods) stay on the worker it "
        "ran on before they are collected: seconds, or 90s, 10m, 1h30m; 0 (the default): at "
        "once, as upstream. Per ClusterQueue: annotation kfed.io/finished-retention. A "
        "deleted workload's go at once",
        parse=duration,
        metavar="DURATION",
    )
    manager_quota_automation: bool = knob(
        True,
        "--manager-quota-automation",
        "keep the nominal quota of a manager ClusterQueue whose MultiKueueConfig asks for "
        "quotaManagement: Automated equal to the sum of its workers' (Kueue's "
        "MultiKueueManagerQuotaAutomation feature gate, alpha and off by default there: with "
        "--no-manager-quota-automation such ClusterQueues are left alone, as Kueue leaves them)",
    )
    credentials_warning: float = knob(
        6 * 3600.0,
        "--credentials-warning",
        "seconds before a worker's kubeconfig token or client certificate expires that its "
        "MultiKueueCluster gets the kfed.io/CredentialsExpiring condition, an Event and a "
        "dashboard warning",
        parse=duration,
    )
    cluster_profile_providers: tuple[Provider, ...] = knob(
        (),
        "--cluster-profile-providers",
        "JSON list of ClusterProfile access providers ({name, execConfig: {command, args, env, "
        "apiVersion, provideClusterInfo}}): how a worker registered by a ClusterProfile gets "
        "its credentials, the only credentials plugins the manager runs (docs/clusterprofile.md)",
        config="multiKueue.clusterProfile.accessProviders",
        parse=providers,
        metavar="JSON",
    )
    cluster_profile_drain_timeout: float = knob(
        600.0,
        "--cluster-profile-drain-timeout",
        "seconds a worker whose ClusterProfile was deleted is kept, drained, for its workloads "
        "to move elsewhere before it is let go (what is left then moves once it has surely "
        "fenced it)",
        parse=duration,
    )

    @property
    def fenced_failover_after(self) -> float:
        """Seconds after the start of the last renewal that may have reached a worker until
        its fast-policy jobs have surely stopped: request timeout + lease duration + grace."""
        return self.request_timeout + self.lease_duration + self.fence_grace

    @property
    def outage_failover_after(self) -> float:
        """The same for at-most-once jobs, which the shim fences only after the outage
        timeout: request timeout + worker lost timeout + grace."""
        return self.request_timeout + self.worker_lost_timeout + self.fence_grace

    def fence_after(self, policy: FailoverPolicy) -> int:
        """Seconds without a lease renewal after which the shim fences a copy of this policy
        (annotation ``kfed.io/fence-after-seconds`` on the copy)."""
        seconds = self.lease_duration if policy is FailoverPolicy.FAST else self.worker_lost_timeout
        return max(1, int(seconds))


MANAGER_LEASE_PREFIX = "kfed-manager-"
"""Lease ``kfed-manager-<origin>`` in ``namespace`` on every worker: the fencing lease."""
SHIM_HEARTBEAT_LEASE = "kfed-worker-shim"
"""Lease the worker shim renews in ``namespace``: tells the manager the worker can fence."""
TOPOLOGY_REPORT = "kfed-topology"
"""ConfigMap the worker shim writes in ``namespace`` with TAS: its topology capacity per flavor
(manager/core/tas_summary.py), which the manager places TAS workloads by."""
SHIM_MODE_ANNOTATION = "kfed.io/worker-shim-mode"
"""On that Lease: ``admit`` (kfed's shim admits there) or ``fence-only`` (upstream Kueue
admits there; the shim only fences). Either way the worker fences itself."""
FAILOVER_POLICY_ANNOTATION = "kfed.io/failover"
"""On a manager ClusterQueue: ``at-most-once`` or ``fast`` (see FailoverPolicy)."""
FENCE_AFTER_ANNOTATION = "kfed.io/fence-after-seconds"
"""On a remote Workload: how long the shim waits without a manager lease renewal before it
fences this copy (the lease duration for fast copies, the outage timeout otherwise)."""
RETENTION_ANNOTATION = "kfed.io/finished-retention"
"""On a manager ClusterQueue: how long its finished workloads' objects stay on their worker
(``1h``, ``90s``, ``1h30m`` or seconds); overrides the manager's ``--finished-retention``."""
RAN_ON_ANNOTATION = "kfed.io/ran-on"
"""On a finished manager Workload: the worker its run ended on, written only when
``status.clusterName`` does not say it (it finished there unseen after it was requeued)."""
ALLOWED_CLUSTERS_ANNOTATION = "kfed.io/allowed-clusters"
"""On a Job (copied to its Workload): comma-separated worker names it may run on."""
PLACEMENT_ANNOTATION = "kfed.io/placement"
"""On a manager Workload: the last dispatch decision, as JSON, for `kfed explain`."""
JOB_NAME_ANNOTATION = C.JOB_NAME_ANNOTATION
