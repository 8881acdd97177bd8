"""The manager's configuration file: Kueue's ``Configuration`` where the meaning is the same,
kfed's own settings beside them, and flags still win.

    apiVersion: config.kueue.x-k8s.io/v1beta2
    kind: Configuration
    namespace: kueue-system
    leaderElection: {leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 2s}
    integrations: {frameworks: [batch/job, jobset.x-k8s.io/jobset]}
    multiKueue: {gcInterval: 1m, origin: multikueue, workerLostTimeout: 15m,
                 dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-all-at-once}
    resources: {deviceClassMappings: [{name: example.com/gpu, deviceClassNames: [gpu.example.com]}]}
    fairSharing: {enable: true, preemptionStrategies: [LessThanOrEqualToFinalShare]}
    kfed: {failoverPolicy: fast, admissionTimeout: 30s}   # kfed's own, by their flag names

``defaults_from(text)`` turns it into argparse defaults (``dest -> value as the flag's text``),
so each value is read by the flag's own parser and an explicit flag overrides it. A key kfed
does not know, or a value of the wrong shape, is a ``ConfigError`` naming it; an upstream key
kfed has no equivalent for (``clientConnection``, ``waitForPodsReady``, ``webhook``, ...) is
listed in the warnings it returns, never silently taken.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

API_VERSIONS = ("config.kueue.x-k8s.io/v1beta1", "config.kueue.x-k8s.io/v1beta2")
KIND = "Configuration"

UPSTREAM_IGNORED = (
    "clientConnection",
    "controller",
    "health",
    "internalCertManagement",
    "manageJobsWithoutQueueName",
    "managedJobsNamespaceSelector",
    "metrics",
    "objectRetentionPolicies",
    "pprofBindAddress",
    "queueVisibility",
    "waitForPodsReady",
    "webhook",
    "featureGates",
)
"""Upstream keys with no equivalent in kfed: accepted (a Kueue configuration works as it is),
and each one present is named in a warning at start-up."""


class ConfigError(ValueError):
    """The file cannot be used as it is; the message says where."""


@dataclass(frozen=True, slots=True)
class Loaded:
    defaults: dict[str, str | bool] = field(default_factory=dict)
    """argparse dest -> the value as its flag would be written (bool for switches)."""
    warnings: list[str] = field(default_factory=list)


Converter = Callable[[Any, str], "str | bool"]


def _text(value: Any, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConfigError(f"{where}: expected a string or a number, got {value!r}")
    return str(value)


def _duration(value: Any, where: str) -> str:
    """Kueue's durations are Go durations (``1m30s``); kfed's parser reads those too."""
    text = _text(value, where)
    if not re.fullmatch(r"(\d+(\.\d+)?(h|m|s|ms)?)+", text):
        raise ConfigError(f"{where}: {text!r} is not a duration (e.g. 30s, 5m, 1h30m)")
    return text


def _names(value: Any, where: str) -> str:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{where}: expected a list of names, got {value!r}")
    return ",".join(value)


def _json(value: Any, where: str) -> str:
    if not isinstance(value, list):
        raise ConfigError(f"{where}: expected a list, got {value!r}")
    return json.dumps(value)


def _switch(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    return value


UPSTREAM: dict[str, dict[str, tuple[str, Converter]]] = {
    "leaderElection": {
        "leaseDuration": ("leader_lease_duration", _duration),
        "renewDeadline": ("leader_renew_deadline", _duration),
        "retryPeriod": ("leader_retry_period", _duration),
    },
    "integrations": {"frameworks": ("integrations", _names)},
    "multiKueue": {
        "gcInterval": ("gc_interval", _duration),
        "origin": ("origin", _text),
        "workerLostTimeout": ("worker_lost_timeout", _duration),
        "dispatcherName": ("dispatch_mode", _text),
    },
    "resources": {"deviceClassMappings": ("device_class_mappings", _json)},
    "fairSharing": {
        "enable": ("fair_sharing", _switch),
        "preemptionStrategies": ("fair_sharing_preemption_strategies", _names),
    },
}
"""Kueue's keys kfed acts on: section -> key -> (argparse dest, how the value is read)."""

UPSTREAM_IGNORED_KEYS = {
    "leaderElection": {"leaderElect", "resourceName", "resourceNamespace", "resourceLock"},
    "integrations": {"podOptions", "externalFrameworks", "labelKeysToCopy"},
    "multiKueue": {"externalFrameworks", "clusterProfile"},
    "resources": {"excludeResourcePrefixes", "transformations"},
}
"""Keys of the sections above that kfed has no equivalent for (named in a warning)."""


def defaults_from(text: str, kfed_flags: Mapping[str, str]) -> Loaded:
    """Read a configuration file's ``text``. ``kfed_flags``: the camelCase names of kfed's own
    settings (under ``kfed:``) -> their argparse dest."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"not YAML: {err}") from None
    if not isinstance(doc, dict):
        raise ConfigError("expected a mapping (a Kueue Configuration)")
    if doc.get("apiVersion") not in API_VERSIONS or doc.get("kind") != KIND:
        raise ConfigError(
            f"expected apiVersion {' or '.join(API_VERSIONS)} and kind {KIND}, got "
            f"{doc.get('apiVersion')!r} and {doc.get('kind')!r}"
        )
    defaults: dict[str, str | bool] = {}
    warnings: list[str] = []
    for key, value in doc.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "namespace":
            defaults["namespace"] = _text(value, "namespace")
        elif key in UPSTREAM:
            _section(key, value, defaults, warnings)
        elif key in UPSTREAM_IGNORED:
            warnings.append(f"{key}: Kueue's setting has no equivalent in kfed; ignored")
        elif key == "kfed":
            _own(value, kfed_flags, defaults)
        else:
            known = ", ".join(["namespace", *UPSTREAM, "kfed", *UPSTREAM_IGNORED])
            raise ConfigError(f"unknown key {key!r} (known: {known})")
    return Loaded(defaults, warnings)


def _section(name: str, value: Any, defaults: dict[str, str | bool], warnings: list[str]) -> None:
    if not isinstance(value, dict):
        raise ConfigError(f"{name}: expected a mapping, got {value!r}")
    for key, item in value.items():
        where = f"{name}.{key}"
        if key in UPSTREAM[name]:
            dest, read = UPSTREAM[name][key]
            defaults[dest] = read(item, where)
        elif key in UPSTREAM_IGNORED_KEYS.get(name, set()):
            if not (name == "leaderElection" and key == "leaderElect" and item is True):
                warnings.append(f"{where}: Kueue's setting has no equivalent in kfed; ignored")
        else:
            known = ", ".join([*UPSTREAM[name], *sorted(UPSTREAM_IGNORED_KEYS.get(name, ()))])
            raise ConfigError(f"unknown key {where!r} (known in {name}: {known})")


def _own(value: Any, kfed_flags: Mapping[str, str], defaults: dict[str, str | bool]) -> None:
    if not isinstance(value, dict):
        raise ConfigError(f"kfed: expected a mapping, got {value!r}")
    for key, item in value.items():
        if key not in kfed_flags:
            raise ConfigError(f"unknown key 'kfed.{key}' (known: {', '.join(sorted(kfed_flags))})")
        defaults[kfed_flags[key]] = _text(item, f"kfed.{key}")


def camel(flag: str) -> str:
    """``--worker-lease-duration`` -> ``workerLeaseDuration`` (the key under ``kfed:``)."""
    head, *rest = flag.lstrip("-").split("-")
    return head + "".join(part.capitalize() for part in rest)
