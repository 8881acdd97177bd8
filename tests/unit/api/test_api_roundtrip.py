"""Every kind parses from what upstream Kueue (or a user) writes, and dumps back unchanged.

Each example is written the way the apiserver returns it: camelCase, defaults filled in,
quantities both as integers and as strings. Dumping with ``by_alias`` and
``exclude_unset`` must give back exactly the input, including fields kfed does not model.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from manager.api import (
    ClusterQueue,
    Job,
    LocalQueue,
    MultiKueueCluster,
    ResourceFlavor,
    Workload,
    model_for,
    parse_object,
)
from manager.api.kinds import UnknownKind
from manager.api.meta import ObjectMeta, is_condition_true
from manager.api.quantity import Quantity
from manager.api.quota import FlavorQuotas, ResourceGroup, ResourceQuota

EXAMPLES: dict[str, str] = {
    "ResourceFlavor": """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: h100
  uid: 0b5c6a8e-1111-2222-3333-444455556666
  resourceVersion: "42"
  generation: 1
  creationTimestamp: "2025-01-02T03:04:05Z"
spec:
  nodeLabels: {gpu.model: h100}
  nodeTaints:
  - {key: nvidia.com/gpu, value: present, effect: NoSchedule}
  tolerations:
  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
  topologyName: default
""",
    "ClusterQueue": """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: gpu-cq
  annotations: {kfed.io/note: seed}
spec:
  cohortName: research
  namespaceSelector: {}
  queueingStrategy: BestEffortFIFO
  stopPolicy: None
  flavorFungibility: {whenCanBorrow: MayStopSearch, whenCanPreempt: TryNextFlavor}
  preemption:
    reclaimWithinCohort: Any
    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
    withinClusterQueue: LowerPriority
  admissionChecksStrategy:
    admissionChecks:
    - {name: multikueue, onFlavors: [h100]}
  fairSharing: {weight: "1.5"}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: rtx-a1000
      resources:
      - {name: cpu, nominalQuota: 32}
      - {name: memory, nominalQuota: 128Gi, lendingLimit: 64Gi}
      - {name: nvidia.com/gpu, nominalQuota: 2, borrowingLimit: "1"}
  admissionScope: {admissionMode: NoAdmissionFairSharing}
status:
  conditions:
  - type: Active
    status: "True"
    reason: Ready
    message: Can admit new workloads
    lastTransitionTime: "2025-01-02T03:04:05Z"
    observedGeneration: 3
  flavorsReservation:
  - name: rtx-a1000
    resources:
    - {name: cpu, total: 2500m, borrowed: "0"}
  flavorsUsage:
  - name: rtx-a1000
    resources:
    - {name: cpu, total: "2", borrowed: "0"}
  pendingWorkloads: 3
  reservingWorkloads: 1
  admittedWorkloads: 1
  fairSharing: {weightedShare: 0}
""",
    "LocalQueue": """
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: gpu-lq, namespace: ml-jobs}
spec: {clusterQueue: gpu-cq, stopPolicy: Hold}
status:
  pendingWorkloads: 0
  reservingWorkloads: 1
  admittedWorkloads: 1
  flavorsUsage:
  - name: h100
    resources: [{name: nvidia.com/gpu, total: 1}]
  fairSharing:
    weightedShare: 5
    admissionFairSharingStatus:
      consumedResources: {cpu: "3"}
      lastUpdate: "2025-01-02T03:04:05Z"
""",
    "Cohort": """
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: research}
spec:
  parentName: org
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8, borrowingLimit: 2}]
  fairSharing: {weight: 2}
status:
  fairSharing: {weightedShare: 12}
""",
    "WorkloadPriorityClass": """
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 10000
description: Production training runs
""",
    "AdmissionCheck": """
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: multikueue}
spec:
  controllerName: kueue.x-k8s.io/multikueue
  parameters: {apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: workers}
status:
  conditions:
  - {type: Active, status: "True", reason: Active, message: Connected,
     lastTransitionTime: "2025-01-02T03:04:05Z"}
""",
    "MultiKueueConfig": """
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueConfig
metadata: {name: workers}
spec:
  clusters: [worker-1, worker-2]
""",
    "MultiKueueCluster": """
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata:
  name: worker-1
  annotations: {kfed.io/maintenance: cordon}
spec:
  clusterSource:
    kubeConfig: {location: worker-1-secret, locationType: Secret}
status:
  conditions:
  - {type: Active, status: "False", reason: ClientConnectionFailed,
     message: "dial tcp: connection refused; connection attempts: 3",
     lastTransitionTime: "2025-01-02T03:04:05Z"}
""",
    "Workload": """
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: job-light-job-3f2a1
  namespace: ml-jobs
  labels: {kueue.x-k8s.io/job-uid: 8d0f0d5e-aaaa-bbbb-cccc-ddddeeeeffff}
  ownerReferences:
  - {apiVersion: batch/v1, kind: Job, name: light-job,
     uid: 8d0f0d5e-aaaa-bbbb-cccc-ddddeeeeffff, controller: true, blockOwnerDeletion: true}
  finalizers: [kueue.x-k8s.io/resource-in-use]
spec:
  active: true
  queueName: gpu-lq
  priority: 10000
  priorityClassRef: {group: kueue.x-k8s.io, kind: WorkloadPriorityClass, name: high}
  maximumExecutionTimeSeconds: 3600
  podSets:
  - name: main
    count: 2
    minCount: 1
    template:
      metadata:
        labels: {app: light}
      spec:
        restartPolicy: Never
        nodeSelector: {gpu.model: rtx-a1000}
        tolerations:
        - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
              - matchExpressions:
                - {key: gpu.model, operator: In, values: [rtx-a1000, h100]}
            preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 1
              preference:
                matchExpressions: [{key: zone, operator: In, values: [a]}]
          podAntiAffinity: {}
        containers:
        - name: cuda
          image: nvidia/cuda:12.4.1-runtime-ubuntu22.04
          command: [bash, -lc, nvidia-smi && sleep 10]
          resources:
            requests: {cpu: "2", memory: 4Gi, nvidia.com/gpu: "1"}
            limits: {cpu: "2", memory: 4Gi, nvidia.com/gpu: "1"}
status:
  conditions:
  - {type: QuotaReserved, status: "True", reason: QuotaReserved,
     message: Quota reserved in ClusterQueue gpu-cq, lastTransitionTime: "2025-01-02T03:04:05Z"}
  - {type: Admitted, status: "True", reason: Admitted,
     message: The workload is admitted, lastTransitionTime: "2025-01-02T03:04:06Z"}
  admission:
    clusterQueue: gpu-cq
    podSetAssignments:
    - name: main
      count: 2
      flavors: {cpu: rtx-a1000, memory: rtx-a1000, nvidia.com/gpu: rtx-a1000}
      resourceUsage: {cpu: "4", memory: 8Gi, nvidia.com/gpu: "2"}
  admissionChecks:
  - name: multikueue
    state: Ready
    message: The workload got reservation on "worker-1"
    lastTransitionTime: "2025-01-02T03:04:06Z"
  requeueState: {count: 1, requeueAt: "2025-01-02T03:14:06Z"}
  reclaimablePods: [{name: main, count: 0}]
  clusterName: worker-1
  schedulingStats:
    evictions: [{reason: Preempted, underlyingCause: "", count: 1}]
""",
    "Job": """
apiVersion: batch/v1
kind: Job
metadata:
  name: light-job
  namespace: ml-jobs
  labels: {kueue.x-k8s.io/queue-name: gpu-lq}
spec:
  suspend: true
  managedBy: kueue.x-k8s.io/multikueue
  parallelism: 1
  completions: 1
  backoffLimit: 6
  podReplacementPolicy: TerminatingOrFailed
  selector:
    matchLabels: {batch.kubernetes.io/controller-uid: "1234"}
  template:
    metadata:
      labels: {batch.kubernetes.io/job-name: light-job}
    spec:
      restartPolicy: Never
      nodeSelector: {gpu.model: rtx-a1000}
      containers:
      - name: cuda
        image: nvidia/cuda:12.4.1-runtime-ubuntu22.04
        command: [bash, -lc, nvidia-smi && sleep 10]
        resources:
          requests: {cpu: "2", memory: 4Gi, nvidia.com/gpu: "1"}
          limits: {cpu: "2", memory: 4Gi, nvidia.com/gpu: "1"}
status:
  startTime: "2025-01-02T03:04:07Z"
  completionTime: "2025-01-02T03:04:20Z"
  succeeded: 1
  ready: 0
  terminating: 0
  uncountedTerminatedPods: {}
  conditions:
  - {type: SuccessCriteriaMet, status: "True", reason: CompletionsReached,
     message: Reached expected number of succeeded pods,
     lastProbeTime: "2025-01-02T03:04:20Z", lastTransitionTime: "2025-01-02T03:04:20Z"}
  - {type: Complete, status: "True", reason: CompletionsReached,
     message: Reached expected number of succeeded pods,
     lastProbeTime: "2025-01-02T03:04:20Z", lastTransitionTime: "2025-01-02T03:04:20Z"}
""",
}


def _load(kind: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(EXAMPLES[kind])
    return data


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_every_kind_round_trips_unchanged(kind: str) -> None:
    data = _load(kind)
    obj = parse_object(data)
    assert type(obj).__name__ == kind
    assert obj.model_dump(mode="json", by_alias=True, exclude_unset=True) == data
    assert obj.to_wire() == data


def test_unknown_fields_survive_a_read_modify_write() -> None:
    cq = ClusterQueue.model_validate(_load("ClusterQueue"))
    cq.spec.stop_policy = cq.spec.stop_policy.HOLD
    wire = cq.to_wire()
    assert wire["spec"]["stopPolicy"] == "Hold"
    assert wire["spec"]["admissionScope"] == {"admissionMode": "NoAdmissionFairSharing"}


def test_typed_fields_read_like_kueue() -> None:
    wl = Workload.model_validate(_load("Workload"))
    pod_set = wl.spec.pod_sets[0]
    container = pod_set.template.spec.containers[0]
    assert container.resources is not None
    assert container.resources.requests["memory"] == Quantity.parse("4Gi")
    assert pod_set.template.spec.node_selector == {"gpu.model": "rtx-a1000"}
    affinity = pod_set.template.spec.affinity
    assert affinity is not None and affinity.node_affinity is not None
    required = affinity.node_affinity.required_during_scheduling_ignored_during_execution
    assert required is not None
    assert required.node_selector_terms[0].match_expressions[0].values == ["rtx-a1000", "h100"]
    assert wl.status is not None and wl.status.admission is not None
    assert wl.status.admission.cluster_queue == "gpu-cq"
    assert is_condition_true(wl.status.conditions, "Admitted")
    assert wl.status.conditions[0].last_transition_time == datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_defaults_match_kueue() -> None:
    cq = ClusterQueue.new("cq")
    assert cq.spec.queueing_strategy == "BestEffortFIFO"
    assert cq.spec.stop_policy == "None"
    assert cq.spec.flavor_fungibility.when_can_borrow == "MayStopSearch"
    assert cq.spec.flavor_fungibility.when_can_preempt == "TryNextFlavor"
    assert cq.spec.preemption.reclaim_within_cohort == "Never"
    assert cq.spec.preemption.borrow_within_cohort.policy == "Never"
    assert cq.spec.preemption.within_cluster_queue == "Never"
    assert cq.spec.namespace_selector is None  # selects no namespace, as in Kueue
    wl = Workload.model_validate(
        {"spec": {"podSets": [{"template": {"spec": {"containers": [{"name": "c"}]}}}]}}
    )
    assert wl.spec.active is True
    assert (wl.spec.pod_sets[0].name, wl.spec.pod_sets[0].count) == ("main", 1)
    mkc = MultiKueueCluster.model_validate(
        {"spec": {"clusterSource": {"kubeConfig": {"location": "s"}}}}
    )
    assert mkc.spec.cluster_source.kube_config is not None
    assert mkc.spec.cluster_source.kube_config.location_type == "Secret"


def test_objects_built_in_python_write_only_what_was_set() -> None:
    cq = ClusterQueue.new(
        "gpu-cq",
        spec={
            "resource_groups": [
                ResourceGroup(
                    covered_resources=["nvidia.com/gpu"],
                    flavors=[
                        FlavorQuotas(
                            name="h100",
                            resources=[ResourceQuota(name="nvidia.com/gpu", nominal_quota=4)],
                        )
                    ],
                )
            ]
        },
    )
    assert cq.to_wire() == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "gpu-cq"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "h100",
                            "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 4}],
                        }
                    ],
                }
            ]
        },
    }


def test_python_names_and_wire_names_both_work() -> None:
    lq = LocalQueue.model_validate({"metadata": {"name": "q"}, "spec": {"cluster_queue": "cq"}})
    assert lq.spec.cluster_queue == "cq"
    assert lq.to_wire()["spec"] == {"clusterQueue": "cq"}
    assert ObjectMeta(resource_version="7").to_wire() == {"resourceVersion": "7"}


def test_times_are_written_as_kubernetes_writes_them() -> None:
    rf = ResourceFlavor.model_validate(
        {"metadata": {"name": "f", "creationTimestamp": "2025-01-02T12:04:05+09:00"}}
    )
    assert rf.to_wire()["metadata"]["creationTimestamp"] == "2025-01-02T03:04:05Z"


@pytest.mark.parametrize(
    ("kind", "patch", "field"),
    [
        ("ClusterQueue", {"spec": {"queueingStrategy": "LIFO"}}, "queueingStrategy"),
        ("ClusterQueue", {"apiVersion": "kueue.x-k8s.io/v1beta1"}, "apiVersion"),
        ("LocalQueue", {"spec": {"clusterQueue": "Not_A_Name"}}, "clusterQueue"),
        ("MultiKueueConfig", {"spec": {"clusters": []}}, "clusters"),
        ("WorkloadPriorityClass", {"value": 2**31}, "value"),
    ],
)
def test_invalid_values_are_rejected_in_python_too(
    kind: str, patch: dict[str, Any], field: str
) -> None:
    data = _load(kind)
    for key, value in patch.items():
        if isinstance(value, dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    with pytest.raises(ValidationError, match=field):
        model_for("kueue.x-k8s.io/v1beta2", kind).model_validate(data)


def test_negative_quotas_are_rejected() -> None:
    with pytest.raises(ValidationError, match="must not be negative"):
        ResourceQuota(name="cpu", nominal_quota="-1")


def test_unknown_kinds_are_named() -> None:
    with pytest.raises(UnknownKind, match="Deployment in apps/v1"):
        parse_object({"apiVersion": "apps/v1", "kind": "Deployment"})


def test_a_job_keeps_its_unknown_fields_when_admission_edits_it() -> None:
    job = Job.model_validate(_load("Job"))
    job.spec.suspend = False
    job.spec.template.spec.node_selector["gpu.model"] = "h100"
    wire = job.to_wire()
    assert wire["spec"]["suspend"] is False
    assert wire["spec"]["template"]["spec"]["nodeSelector"] == {"gpu.model": "h100"}
    assert wire["spec"]["podReplacementPolicy"] == "TerminatingOrFailed"
    assert wire["spec"]["template"]["spec"]["containers"][0]["command"][0] == "bash"
    assert wire["status"]["uncountedTerminatedPods"] == {}


def test_edits_in_place_of_defaulted_fields_are_written() -> None:
    job = Job.model_validate(
        {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}
    )
    job.spec.template.spec.node_selector["gpu.model"] = "h100"
    job.metadata.labels["kueue.x-k8s.io/queue-name"] = "gpu-lq"
    cq = ClusterQueue.new("cq")
    cq.spec.flavor_fungibility.when_can_borrow = cq.spec.flavor_fungibility.when_can_preempt
    job_wire, cq_wire = job.to_wire(), cq.to_wire()
    assert job_wire["spec"]["template"]["spec"]["nodeSelector"] == {"gpu.model": "h100"}
    assert job_wire["metadata"] == {"labels": {"kueue.x-k8s.io/queue-name": "gpu-lq"}}
    assert cq_wire["spec"] == {"flavorFungibility": {"whenCanBorrow": "TryNextFlavor"}}
