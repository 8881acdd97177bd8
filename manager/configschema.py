"""The shape of upstream Kueue's ``Configuration`` (``config.kueue.x-k8s.io`` v1beta1 and
v1beta2): every key it has and the kind of value each takes, so that the manager's
configuration file can tell a Kueue key it does not act on (a warning) from a key that is no
Kueue key at all or a value Kueue itself would refuse (an error).

Written from upstream's ``apis/config/<version>/configuration_types.go`` (and the types it
embeds: component-base's leader election, client-go's exec credential plugin, the label and
device selectors) at v0.17.0, v0.18.6 and v0.19.2: each version's keys are the union over those
releases (each release only added keys). Values are checked as upstream's strict decoding and
its ``pkg/config/validation.go`` check them where that is a matter of one value: its type, a
choice among named values, a bound. A duration is a Go duration string (``90s``, ``1h30m``),
as ``metav1.Duration`` reads it; ``controller.cacheSyncTimeout`` is a Go ``time.Duration`` and
so a number of nanoseconds.

``walk`` checks a document against a schema and yields each setting it carries, by its dotted
path: a scalar, a list or a map with keys of the user's own (``featureGates``) is one setting;
a mapping of Kueue's own keys is walked into.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

V1BETA1 = "config.kueue.x-k8s.io/v1beta1"
V1BETA2 = "config.kueue.x-k8s.io/v1beta2"


class SchemaError(ValueError):
    """A key that is not Kueue's, or a value of the wrong kind; the message says where."""

    def __init__(self, message: str, unknown: str | None = None) -> None:
        super().__init__(message)
        self.unknown = unknown
        """The dotted path of the key that is not Kueue's, if that is what is wrong."""


@dataclass(frozen=True, slots=True)
class Scalar:
    kind: str
    """string, bool, int, number (an int or a float), duration or quantity (a string or a
    number, as Kubernetes quantities are written)."""
    choices: tuple[str, ...] = ()
    """For a string: the values it may take (none: any)."""
    minimum: int | None = None
    maximum: int | None = None


@dataclass(frozen=True, slots=True)
class Struct:
    fields: Mapping[str, Node]


@dataclass(frozen=True, slots=True)
class ListOf:
    items: Node


@dataclass(frozen=True, slots=True)
class MapOf:
    """A mapping whose keys are the user's (resource names, feature gates, kinds)."""

    values: Node


Node = Scalar | Struct | ListOf | MapOf


def _one_of(*values: str) -> Scalar:
    return Scalar("string", choices=values)


STRING = Scalar("string")
BOOL = Scalar("bool")
INT = Scalar("int")
NUMBER = Scalar("number")
DURATION = Scalar("duration")
QUANTITY = Scalar("quantity")
NOT_NEGATIVE = Scalar("int", minimum=0)
NAMES = ListOf(STRING)

FRAMEWORKS = (
    "batch/job",
    "kubeflow.org/mpijob",
    "ray.io/rayjob",
    "ray.io/rayservice",
    "ray.io/raycluster",
    "jobset.x-k8s.io/jobset",
    "kubeflow.org/paddlejob",
    "kubeflow.org/pytorchjob",
    "kubeflow.org/tfjob",
    "kubeflow.org/xgboostjob",
    "kubeflow.org/jaxjob",
    "trainer.kubeflow.org/trainjob",
    "workload.codeflare.dev/appwrapper",
    "sparkoperator.k8s.io/sparkapplication",
    "pod",
    "deployment",
    "statefulset",
    "leaderworkerset.x-k8s.io/leaderworkerset",
)
"""Kueue's built-in integrations (``integrations.frameworks``), v0.17 to v0.19 alike."""

PREEMPTION_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")

_LABEL_SELECTOR = Struct(
    {
        "matchLabels": MapOf(STRING),
        "matchExpressions": ListOf(
            Struct(
                {
                    "key": STRING,
                    "operator": _one_of("In", "NotIn", "Exists", "DoesNotExist"),
                    "values": NAMES,
                }
            )
        ),
    }
)

_LEADER_ELECTION = Struct(
    {
        "leaderElect": BOOL,
        "leaseDuration": DURATION,
        "renewDeadline": DURATION,
        "retryPeriod": DURATION,
        "resourceLock": STRING,
        "resourceName": STRING,
        "resourceNamespace": STRING,
    }
)

_WEBHOOK = Struct({"port": INT, "host": STRING, "certDir": STRING})

_HEALTH = Struct(
    {
        "healthProbeBindAddress": STRING,
        "readinessEndpointName": STRING,
        "livenessEndpointName": STRING,
    }
)

_CONTROLLER = Struct({"groupKindConcurrency": MapOf(INT), "cacheSyncTimeout": INT})

_TLS = Struct(
    {
        # empty: Go's default (TLS 1.2); 1.0 and 1.1 are refused
        "minVersion": _one_of("", "VersionTLS12", "VersionTLS13"),
        "cipherSuites": NAMES,
        "curvePreferences": ListOf(INT),
    }
)


def _metrics(*, custom_label_kinds: bool) -> Struct:
    label: dict[str, Node] = {
        "name": STRING,
        "sourceLabelKey": STRING,
        "sourceAnnotationKey": STRING,
    }
    if custom_label_kinds:
        label["sourceKind"] = _one_of("Cohort", "LocalQueue", "ClusterQueue", "Workload")
        label["trackedValues"] = NAMES
    return Struct(
        {
            "bindAddress": STRING,
            "enableClusterQueueResources": BOOL,
            "customLabels": ListOf(Struct(label)),
            "localQueueMetrics": Struct({"enable": BOOL, "localQueueSelector": _LABEL_SELECTOR}),
        }
    )


_INTERNAL_CERTS = Struct(
    {"enable": BOOL, "webhookServiceName": STRING, "webhookSecretName": STRING}
)

_REQUEUING = Struct(
    {
        "timestamp": _one_of("Eviction", "Creation"),
        "backoffLimitCount": NOT_NEGATIVE,
        "backoffBaseSeconds": NOT_NEGATIVE,
        "backoffMaxSeconds": NOT_NEGATIVE,
    }
)


def _wait_for_pods_ready(*, enable: bool) -> Struct:
    keys: dict[str, Node] = {"enable": BOOL} if enable else {}
    keys.update(
        {
            "timeout": DURATION,
            "blockAdmission": BOOL,
            "requeuingStrategy": _REQUEUING,
            "recoveryTimeout": DURATION,
        }
    )
    return Struct(keys)


_CLIENT_CONNECTION = Struct({"qps": NUMBER, "burst": INT})

_EXEC_CONFIG = Struct(
    {
        "command": STRING,
        "args": NAMES,
        "env": ListOf(Struct({"name": STRING, "value": STRING})),
        "apiVersion": STRING,
        "installHint": STRING,
        "provideClusterInfo": BOOL,
        "interactiveMode": _one_of("Never", "IfAvailable", "Always"),
    }
)
_PROVIDERS = ListOf(Struct({"name": STRING, "execConfig": _EXEC_CONFIG}))


def _multikueue(*, v1beta2: bool) -> Struct:
    keys: dict[str, Node] = {
        "gcInterval": DURATION,
        "origin": STRING,
        "workerLostTimeout": DURATION,
        "dispatcherName": STRING,
        "externalFrameworks": ListOf(Struct({"name": STRING})),
    }
    if v1beta2:
        keys["clusterProfile"] = Struct(
            {"accessProviders": _PROVIDERS, "credentialsProviders": _PROVIDERS}
        )
        keys["incrementalDispatcherConfig"] = Struct({"stepSize": Scalar("int", minimum=1)})
    return Struct(keys)


def _integrations(*, pod_options: bool) -> Struct:
    keys: dict[str, Node] = {
        "frameworks": ListOf(_one_of(*FRAMEWORKS)),
        "externalFrameworks": NAMES,
        "labelKeysToCopy": NAMES,
    }
    if pod_options:
        keys["podOptions"] = Struct(
            {"namespaceSelector": _LABEL_SELECTOR, "podSelector": _LABEL_SELECTOR}
        )
    return Struct(keys)


_DEVICE_SELECTOR = Struct({"cel": Struct({"expression": STRING})})
_DEVICE_SOURCE = Struct({"name": STRING, "driver": STRING, "deviceSelector": _DEVICE_SELECTOR})


def _resources(*, v1beta2: bool) -> Struct:
    mapping: dict[str, Node] = {"name": STRING, "deviceClassNames": NAMES}
    keys: dict[str, Node] = {}
    if v1beta2:
        mapping["sources"] = ListOf(Struct({"counter": _DEVICE_SOURCE, "capacity": _DEVICE_SOURCE}))
        keys["quotaCheckStrategy"] = _one_of("BlockUndeclared", "IgnoreUndeclared")
    keys.update(
        {
            "excludeResourcePrefixes": NAMES,
            "transformations": ListOf(
                Struct(
                    {
                        "input": STRING,
                        "strategy": _one_of("Retain", "Replace"),
                        "multiplyBy": STRING,
                        "outputs": MapOf(QUANTITY),
                    }
                )
            ),
            "deviceClassMappings": ListOf(Struct(mapping)),
        }
    )
    return Struct(keys)


def _fair_sharing(*, enable: bool) -> Struct:
    keys: dict[str, Node] = {"enable": BOOL} if enable else {}
    keys["preemptionStrategies"] = ListOf(_one_of(*PREEMPTION_STRATEGIES))
    return Struct(keys)


_ADMISSION_FAIR_SHARING = Struct(
    {
        "usageHalfLifeTime": DURATION,
        "usageSamplingInterval": DURATION,
        "resourceWeights": MapOf(NUMBER),
    }
)

_RETENTION = Struct(
    {"workloads": Struct({"afterFinished": DURATION, "afterDeactivatedByKueue": DURATION})}
)


def _configuration(*, v1beta2: bool) -> Struct:
    keys: dict[str, Node] = {
        "namespace": STRING,
        # ControllerManager, inline
        "webhook": _WEBHOOK,
        "leaderElection": _LEADER_ELECTION,
        "metrics": _metrics(custom_label_kinds=v1beta2),
        "health": _HEALTH,
        "pprofBindAddress": STRING,
        "controller": _CONTROLLER,
        "tls": _TLS,
        # Configuration's own
        "manageJobsWithoutQueueName": BOOL,
        "managedJobsNamespaceSelector": _LABEL_SELECTOR,
        "internalCertManagement": _INTERNAL_CERTS,
        "waitForPodsReady": _wait_for_pods_ready(enable=not v1beta2),
        "clientConnection": _CLIENT_CONNECTION,
        "integrations": _integrations(pod_options=not v1beta2),
        "multiKueue": _multikueue(v1beta2=v1beta2),
        "fairSharing": _fair_sharing(enable=not v1beta2),
        "admissionFairSharing": _ADMISSION_FAIR_SHARING,
        "resources": _resources(v1beta2=v1beta2),
        "featureGates": MapOf(BOOL),
        "objectRetentionPolicies": _RETENTION,
    }
    if v1beta2:
        keys["visibilityServer"] = Struct(
            {"bindAddress": STRING, "bindPort": Scalar("int", minimum=1, maximum=65535)}
        )
    else:
        keys["queueVisibility"] = Struct(
            {"clusterQueues": Struct({"maxCount": INT}), "updateIntervalSeconds": INT}
        )
    return Struct(keys)


CONFIGURATION: dict[str, Struct] = {
    V1BETA1: _configuration(v1beta2=False),
    V1BETA2: _configuration(v1beta2=True),
}
"""apiVersion -> the keys of its ``Configuration`` (``apiVersion`` and ``kind`` aside)."""


def node_at(schema: Node, path: str) -> Node | None:
    """The schema of the key at ``path`` (``multiKueue.origin``, ``metrics.customLabels[0].name``),
    or None when ``schema`` has no such key."""
    node: Node | None = schema
    for key in re.sub(r"\[[^]]*\]", "", path).split("."):
        while isinstance(node, ListOf | MapOf):
            node = node.items if isinstance(node, ListOf) else node.values
        node = node.fields.get(key) if isinstance(node, Struct) else None
    return node


@dataclass(frozen=True, slots=True)
class Setting:
    path: str
    """Dotted, from the document's top (``multiKueue.incrementalDispatcherConfig.stepSize``)."""
    value: Any


def walk(value: Any, schema: Struct, path: str = "") -> Iterator[Setting]:
    """Check ``value`` (a mapping) against ``schema``, yielding each setting it carries in the
    document's order; a key set to null is taken as not set (as Go's decoder takes it). The
    first key that is not the schema's, or value of the wrong kind, raises ``SchemaError``."""
    if not isinstance(value, dict):
        raise SchemaError(f"{path or 'the file'}: expected a mapping, got {value!r}")
    if not value and path:
        yield Setting(path, value)  # set, to nothing of its own (``fairSharing: {}``)
    for key, item in value.items():
        where = f"{path}.{key}" if path else str(key)
        if key not in schema.fields:
            known = ", ".join(sorted(schema.fields))
            within = f" in {path}" if path else ""
            raise SchemaError(f"unknown key {where!r} (known{within}: {known})", where)
        if item is None:
            continue
        node = schema.fields[key]
        if isinstance(node, Struct):
            yield from walk(item, node, where)
        else:
            check(item, node, where)
            yield Setting(where, item)


def check(value: Any, node: Node, where: str) -> None:
    """``value`` is one ``node`` takes, or ``SchemaError`` names ``where``."""
    if isinstance(node, Struct):
        for _ in walk(value, node, where):
            pass
    elif isinstance(node, ListOf):
        if not isinstance(value, list):
            raise SchemaError(f"{where}: expected a list, got {value!r}")
        for i, item in enumerate(value):
            if item is not None:
                check(item, node.items, f"{where}[{i}]")
    elif isinstance(node, MapOf):
        if not isinstance(value, dict):
            raise SchemaError(f"{where}: expected a mapping, got {value!r}")
        for key, item in value.items():
            if item is not None:
                check(item, node.values, f"{where}[{key}]")
    else:
        _scalar(value, node, where)


_GO_DURATION = re.compile(
    r"[-+]?(0|((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+)"  # Go takes µ (U+00B5) and μ (U+03BC)
)

_EXPECTED = {
    "string": "a string",
    "bool": "true or false",
    "int": "a whole number",
    "number": "a number",
    "duration": "a duration such as 30s, 5m or 1h30m",
    "quantity": "a quantity such as 2, 500m or 4Gi",
}


def _scalar(value: Any, node: Scalar, where: str) -> None:
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    fits = {
        "string": isinstance(value, str),
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "number": is_number,
        "duration": isinstance(value, str) and bool(_GO_DURATION.fullmatch(value)),
        "quantity": isinstance(value, str) or is_number,
    }[node.kind]
    if not fits:
        raise SchemaError(f"{where}: expected {_EXPECTED[node.kind]}, got {value!r}")
    if node.choices and value not in node.choices:
        choices = ", ".join(c for c in node.choices if c)
        raise SchemaError(f"{where}: {value!r} is not one of {choices}")
    if node.minimum is not None and value < node.minimum:
        raise SchemaError(f"{where}: {value!r} is less than {node.minimum}")
    if node.maximum is not None and value > node.maximum:
        raise SchemaError(f"{where}: {value!r} is more than {node.maximum}")
