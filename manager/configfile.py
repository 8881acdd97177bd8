"""The manager's configuration file: Kueue's ``Configuration`` where the meaning is the same,
kfed's own settings beside them, and flags still win.

    apiVersion: config.kueue.x-k8s.io/v1beta2
    kind: Configuration
    namespace: kueue-system
    clientConnection: {qps: 50, burst: 100}
    leaderElection: {leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 2s}
    integrations: {frameworks: [batch/job, jobset.x-k8s.io/jobset]}
    multiKueue: {gcInterval: 1m, origin: multikueue, workerLostTimeout: 15m,
                 dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-all-at-once}
    resources: {deviceClassMappings: [{name: example.com/gpu, deviceClassNames: [gpu.example.com]}]}
    fairSharing: {enable: true, preemptionStrategies: [LessThanOrEqualToFinalShare]}
    kfed: {failoverPolicy: fast, admissionTimeout: 30s}   # kfed's own, by their flag names

``defaults_from(text, parser)`` turns it into the parser's defaults (``dest -> value``), each
value read as its flag reads its text (type and choices; a switch takes true or false), so an
explicit flag overrides it. A key kfed does not know, or a value of the wrong shape, is a
``ConfigError`` naming the key; an upstream key kfed has no equivalent for
(``waitForPodsReady``, ``webhook``, ...) is listed in the warnings it
returns, never silently taken.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

API_VERSIONS = ("config.kueue.x-k8s.io/v1beta1", "config.kueue.x-k8s.io/v1beta2")
KIND = "Configuration"

UPSTREAM_IGNORED = (
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
    defaults: dict[str, Any] = field(default_factory=dict)
    """argparse dest -> the value as its flag would have set it (as the flag's text when read
    without a parser)."""
    warnings: list[str] = field(default_factory=list)


Converter = Callable[[Any, str], "str | bool"]
"""Reads a value of the file as the text its flag would be given (bool for switches)."""


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
    "clientConnection": {"qps": ("kube_api_qps", _text), "burst": ("kube_api_burst", _text)},
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


def defaults_from(text: str, parser: argparse.ArgumentParser | None = None) -> Loaded:
    """Read a configuration file's ``text`` for ``parser``'s flags; kfed's own settings under
    ``kfed:`` are its long options in camelCase. Without a parser, upstream's keys are kept as
    their flags' text and ``kfed:`` is not read (for a reader that needs only upstream's keys)."""
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
    given: dict[str, tuple[str, str | bool]] = {}  # dest -> (where in the file, flag text)
    warnings: list[str] = []
    for key, value in doc.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "namespace":
            given["namespace"] = ("namespace", _text(value, "namespace"))
        elif key in UPSTREAM:
            _section(key, value, given, warnings)
        elif key in UPSTREAM_IGNORED:
            warnings.append(f"{key}: Kueue's setting has no equivalent in kfed; ignored")
        elif key == "kfed":
            if parser is not None:
                _own(value, own_flags(parser), given)
        else:
            known = ", ".join(["namespace", *UPSTREAM, "kfed", *UPSTREAM_IGNORED])
            raise ConfigError(f"unknown key {key!r} (known: {known})")
    if parser is None:
        return Loaded({dest: text for dest, (_, text) in given.items()}, warnings)
    by_dest = {action.dest: action for action in parser._actions}
    return Loaded(
        {dest: as_flag_reads(by_dest[dest], text, where) for dest, (where, text) in given.items()},
        warnings,
    )


def _section(
    name: str, value: Any, given: dict[str, tuple[str, str | bool]], warnings: list[str]
) -> None:
    if not isinstance(value, dict):
        raise ConfigError(f"{name}: expected a mapping, got {value!r}")
    for key, item in value.items():
        where = f"{name}.{key}"
        if key in UPSTREAM[name]:
            dest, read = UPSTREAM[name][key]
            given[dest] = (where, read(item, where))
        elif key in UPSTREAM_IGNORED_KEYS.get(name, set()):
            if not (name == "leaderElection" and key == "leaderElect" and item is True):
                warnings.append(f"{where}: Kueue's setting has no equivalent in kfed; ignored")
        else:
            known = ", ".join([*UPSTREAM[name], *sorted(UPSTREAM_IGNORED_KEYS.get(name, ()))])
            raise ConfigError(f"unknown key {where!r} (known in {name}: {known})")


_LISTS: dict[str, Converter] = {
    dest: read
    for keys in UPSTREAM.values()
    for dest, read in keys.values()
    if read in (_names, _json)
}
"""The flags whose text is a list (comma-separated names, or JSON): a YAML list is written so."""


def _own(
    value: Any, flags: dict[str, argparse.Action], given: dict[str, tuple[str, str | bool]]
) -> None:
    if not isinstance(value, dict):
        raise ConfigError(f"kfed: expected a mapping, got {value!r}")
    for key, item in value.items():
        where = f"kfed.{key}"
        if key not in flags:
            raise ConfigError(f"unknown key {where!r} (known: {', '.join(sorted(flags))})")
        flag = flags[key]
        if _is_switch(flag):
            given[flag.dest] = (where, _switch(item, where))
        elif isinstance(item, list) and flag.dest in _LISTS:
            given[flag.dest] = (where, _LISTS[flag.dest](item, where))
        else:
            given[flag.dest] = (where, _text(item, where))


NOT_IN_FILE = ("help", "config", "kubeconfig")
"""Flags the file cannot set: what finds the file, and what it would only make less clear."""


def own_flags(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The keys under ``kfed:``: each long option of ``parser`` in camelCase."""
    return {
        camel(action.option_strings[0]): action
        for action in parser._actions
        if action.option_strings
        and action.option_strings[0].startswith("--")
        and action.dest not in NOT_IN_FILE
    }


def _is_switch(flag: argparse.Action) -> bool:
    return flag.nargs == 0 and (
        isinstance(flag.const, bool) or isinstance(flag, argparse.BooleanOptionalAction)
    )


def as_flag_reads(flag: argparse.Action, text: str | bool, where: str) -> Any:
    """The value ``flag`` would have set had it been given ``text`` (``True``/``False``: given
    or not, for a switch); a value it would refuse is a ``ConfigError`` naming ``where``."""
    name = flag.option_strings[0]
    if isinstance(text, bool):
        if isinstance(flag, argparse.BooleanOptionalAction):
            return text
        return flag.const if text else not flag.const
    if _is_switch(flag):
        raise ConfigError(f"{where}: {name} is a switch: expected true or false, got {text!r}")
    try:
        value = flag.type(text) if callable(flag.type) else text
    except (TypeError, ValueError, argparse.ArgumentTypeError) as err:
        raise ConfigError(f"{where}: {text!r} is not a value of {name}: {err}") from None
    if flag.choices is not None and value not in flag.choices:
        choices = ", ".join(str(getattr(c, "value", c)) for c in flag.choices)
        raise ConfigError(f"{where}: {text!r} is not one of {choices} ({name})")
    return value


def camel(flag: str) -> str:
    """``--worker-lease-duration`` -> ``workerLeaseDuration`` (the key under ``kfed:``)."""
    head, *rest = flag.lstrip("-").split("-")
    return head + "".join(part.capitalize() for part in rest)
