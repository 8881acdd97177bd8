"""Every knob of the single-cluster controllers, with the reason for its default."""

from __future__ import annotations

from dataclasses import dataclass, field

from manager.api.dra import DeviceClassMappings
from manager.core import FairSharingConfig


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    workers: int = 16
    """Concurrent reconciles per controller (workloads, jobs). Keys never run twice at once.
    A reconcile mostly waits on the API server, and every write brings its workload back as
    an event: at 4, a burst of 1,000 Jobs (e2e/bench/multikueue) queued each new Workload's
    first reconcile behind the others' events, quota reservation P95 15.6 s; at 16, 2.1 s
    (upstream runs 10 Workload reconciles at once in its MultiKueue configuration)."""
    status_period: float = 1.0
    """How often ClusterQueue and LocalQueue status is recomputed and written if it changed."""
    requeue_base_seconds: float = 1.0
    """Backoff of a workload evicted for a reason other than preemption (a stopped queue, a
    failed admission check): base * 2^(n-1), capped. Preempted workloads requeue at once, as
    in Kueue, since their preemptor is what should run."""
    requeue_max_seconds: float = 300.0
    write_concurrency: int = 96
    """Status writes (admissions, evictions) in flight at once. Admitted workloads hold their
    quota until their write lands, so under load this pipe, not the scheduler, bounds the
    admission rate: at 32, Kueue's scheduler-performance baseline kept ~500 admissions waiting
    here on a 2-core machine (see docs/performance-scheduler.md)."""
    pending_status_concurrency: int = 4
    pending_status_qps: float = 20.0
    pending_status_burst: int = 100
    """Writes of why a workload is pending (informational, coalesced per workload): a few at
    a time and at most this many per second after a burst, so that under load they never
    crowd out admissions and evictions (see pendingstatus.py). 20/s is Kueue's own client
    rate (``clientConnection.qps``), which bounds its pending writes with all the rest. At
    50/s, upstream's scheduler benchmark (15,000 Workloads) got ~12,800 of them, each also a
    watch event for every watcher, and the API server, the run's bottleneck, was the slower
    for it: at 20/s, 4,500 writes, the run 296 -> 238 s, the controller's CPU 94 -> 72 s."""
    role: str = "manager"
    """``manager`` (global queues) or ``worker`` (a worker shim): names the spans this
    cluster's controllers record in each workload's trace."""
    fair_sharing: FairSharingConfig | None = None
    """Kueue's fair sharing (``--fair-sharing``): off unless asked for, as in Kueue."""
    integrations: tuple[str, ...] = (
        "batch/job",
        "jobset.x-k8s.io/jobset",
        "ray.io/raycluster",
        "ray.io/rayjob",
        "trainer.kubeflow.org/trainjob",
        "kubeflow.org/pytorchjob",
        "kubeflow.org/mpijob",
        "kubeflow.org/tfjob",
        "kubeflow.org/xgboostjob",
        "kubeflow.org/paddlejob",
        "kubeflow.org/jaxjob",
        "leaderworkerset.x-k8s.io/leaderworkerset",
        "workload.codeflare.dev/appwrapper",
        "statefulset",
        "deployment",
        "pod",
    )
    """Kinds of job to queue (Kueue's ``integrations.frameworks``; ``jobkinds/registry.py``).
    ``batch/job`` is always on; another kind starts once its CRD is served."""
    job_kind_discovery_seconds: float = 30.0
    """How often a kind whose CRD is not installed yet is looked for again."""
    event_qps: float = 10.0
    event_burst: int = 100
    """Kubernetes Events written per second by this process at most, after a burst, for
    routine Events and for alerts each (on top of client-go's per-object spam filter; see
    kube/events.py). Events inform people and must never crowd out the writes admissions
    depend on: unlimited, a federated workload would cost about six Event writes on the
    manager alone, more than all its other writes. At 10/s a burst of 1,000 Jobs spends
    about a tenth of the API writes on Events (docs/performance.md, "What Events cost"),
    and the burst tells the first jobs' stories whole. 0 writes none."""
    manage_jobs_without_queue_name: bool = False
    """Kueue's manageJobsWithoutQueueName: off, so a Job without the label is left alone."""
    topology_aware: bool = False
    """Place pod sets by topology here (``--topology-aware-scheduling``; docs/tas.md): watch
    Topologies, Nodes and every Pod of the cluster. Off by default, since the Pod watch costs
    memory in proportion to the cluster's pods; kfed's manager, which runs none, needs it off
    (its MultiKueue queues leave the placement to the worker)."""
    unadmitted_workloads_observability: bool = False
    """Upstream's UnadmittedWorkloadsObservability feature gate (v0.19, beta, off by default),
    ``--unadmitted-workloads-observability``: a pending workload's QuotaReserved=False reason
    (and its Pending Event's) is v0.19's finer one (``WaitingForQuota``, ``Misconfigured``,
    ...) instead of ``Pending`` or ``Inadmissible``, and ``kueue_unadmitted_workloads`` and
    ``kueue_local_queue_unadmitted_workloads`` are reported. Off, as upstream: tools that
    read the reasons see what Kueue writes by default."""
    device_class_mappings: DeviceClassMappings = field(default_factory=DeviceClassMappings)
    """Kueue's ``resources.deviceClassMappings`` (``--device-class-mappings``): the quota
    resource each DeviceClass of a pod's ResourceClaimTemplates is charged to. Empty: a job
    whose pods claim devices from a template is not admitted (its class is not mapped)."""
