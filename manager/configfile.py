"""The manager's configuration file: Kueue's ``Configuration`` where the meaning is the same,
kfed's own settings beside them, and flags still win.

    apiVersion: config.kueue.x-k8s.io/v1beta2
    kind: Configuration
    namespace: kueue-system
    clientConnection: {qps: 50, burst: 100}
    leaderElection: {leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 2s}
    integrations: {frameworks: [batch/job, jobset.x-k8s.io/jobset]}
    multiKueue: {gcInterval: 1m, origin: multikueue, workerLostTimeout: 15m,
                 dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-incremental,
                 incrementalDispatcherConfig: {stepSize: 2}}
    resources: {deviceClassMappings: [{name: example.com/gpu, deviceClassNames: [gpu.example.com]}]}
    fairSharing: {preemptionStrategies: [LessThanOrEqualToFinalShare]}
    kfed: {failoverPolicy: fast, admissionTimeout: 30s}   # kfed's own, by their flag names

``defaults_from(text, parser)`` turns it into the parser's defaults (``dest -> value``), each
value read as its flag reads its text (type and choices; a switch takes true or false), so an
explicit flag overrides it.

The whole file is checked against upstream's schema of its apiVersion (``configschema``): a
key that is not Kueue's (nor ``kfed:``), or a value Kueue would refuse (wrong type, not one of
the named values, out of bounds), is a ``ConfigError`` naming the key. A Kueue key kfed does
not act on (``webhook.port``, ``tls.minVersion``, ``resources.quotaCheckStrategy``, ...) is
taken, and named, by its dotted path, in one of the warnings it returns: a Kueue
configuration file works as it is, and nothing in it is silently dropped.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from manager.api import constants as C
from manager.api import externalframeworks as external
from manager.configschema import CONFIGURATION, V1BETA1, V1BETA2, SchemaError, node_at, walk
from manager.controllers.jobkinds.external import built_in
from manager.controllers.jobkinds.registry import KINDS

API_VERSIONS = (V1BETA1, V1BETA2)
KIND = "Configuration"


class ConfigError(ValueError):
    """The file cannot be used as it is; the message says where."""


@dataclass(frozen=True, slots=True)
class Loaded:
    defaults: dict[str, Any] = field(default_factory=dict)
    """argparse dest -> the value as its flag would have set it (as the flag's text when read
    without a parser)."""
    warnings: list[str] = field(default_factory=list)
    """One per Kueue setting of the file that kfed does not act on, led by its dotted path."""


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


def _external(value: Any, where: str) -> str:
    """``multiKueue.externalFrameworks`` (``[{name: Kind.version.group}]``), checked as
    upstream checks it, as its flag's comma-separated names."""
    try:
        return ",".join(external.check(multikueue=value, built_in=built_in()).federated)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def _switch(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    return value


ACTED_ON: dict[str, tuple[str, Converter]] = {
    "namespace": ("namespace", _text),
    "clientConnection.qps": ("kube_api_qps", _text),
    "clientConnection.burst": ("kube_api_burst", _text),
    "leaderElection.leaseDuration": ("leader_lease_duration", _duration),
    "leaderElection.renewDeadline": ("leader_renew_deadline", _duration),
    "leaderElection.retryPeriod": ("leader_retry_period", _duration),
    "integrations.frameworks": ("integrations", _names),
    "multiKueue.gcInterval": ("gc_interval", _duration),
    "multiKueue.origin": ("origin", _text),
    "multiKueue.workerLostTimeout": ("worker_lost_timeout", _duration),
    "multiKueue.dispatcherName": ("dispatch_mode", _text),
    "multiKueue.incrementalDispatcherConfig.stepSize": ("incremental_step", _text),
    "multiKueue.externalFrameworks": ("external_frameworks", _external),
    "multiKueue.clusterProfile.accessProviders": ("cluster_profile_providers", _json),
    "multiKueue.clusterProfile.credentialsProviders": ("cluster_profile_providers", _json),
    "resources.deviceClassMappings": ("device_class_mappings", _json),
    "fairSharing.enable": ("fair_sharing", _switch),
    "fairSharing.preemptionStrategies": ("fair_sharing_preemption_strategies", _names),
}
"""Kueue's keys kfed acts on, by dotted path: (argparse dest, how the value is read). Every
other key of upstream's schema is taken with a warning. ``integrations.frameworks`` keeps the
integrations kfed federates and names the others in a warning; ``fairSharing.enable`` is
v1beta1's (kfed takes it in a v1beta2 file too, as its documentation long showed), where
v1beta2 turns fair sharing on by ``fairSharing`` being there at all."""

IGNORED = "Kueue's setting has no equivalent in kfed; ignored"
STEP_GATE = "MultiKueueIncrementalDispatcherConfig"
"""Upstream's feature gate (beta, on, since v0.19) without which it ignores ``stepSize``."""
INCREMENTAL = (C.MULTIKUEUE_DISPATCHER_INCREMENTAL, "incremental")
PROFILE_GATE = "MultiKueueClusterProfile"
"""Upstream's alpha gate for ``clusterProfileRef``: kfed reads ClusterProfiles without it."""
CUSTOM_JOBS_GATE = "MultiKueueAdaptersForCustomJobs"
"""Upstream's feature gate (beta, on, since v0.15) of MultiKueue's generic adapter."""


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
    version = doc.get("apiVersion")
    if version not in API_VERSIONS or doc.get("kind") != KIND:
        raise ConfigError(
            f"expected apiVersion {' or '.join(API_VERSIONS)} and kind {KIND}, got "
            f"{version!r} and {doc.get('kind')!r}"
        )
    body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind", "kfed")}
    given: dict[str, tuple[str, str | bool]] = {}  # dest -> (where in the file, flag text)
    warnings = _upstream(str(version), body, given)
    if parser is None:
        return Loaded({dest: text for dest, (_, text) in given.items()}, warnings)
    if doc.get("kfed") is not None:
        _own(doc["kfed"], own_flags(parser), given)
    by_dest = {action.dest: action for action in parser._actions}
    return Loaded(
        {dest: as_flag_reads(by_dest[dest], text, where) for dest, (where, text) in given.items()},
        warnings,
    )


def _upstream(
    version: str, body: dict[Any, Any], given: dict[str, tuple[str, str | bool]]
) -> list[str]:
    """Check ``body`` (the file less apiVersion, kind and ``kfed:``) against upstream's schema
    of ``version``, put what kfed acts on in ``given``, and return the warnings for the rest."""
    schema = CONFIGURATION[version]
    fair_sharing = body.get("fairSharing")
    if version == V1BETA2 and isinstance(fair_sharing, dict) and "enable" in fair_sharing:
        if fair_sharing["enable"] is not None:
            enable = _switch(fair_sharing["enable"], "fairSharing.enable")
            given["fair_sharing"] = ("fairSharing.enable", enable)
        body = {**body, "fairSharing": {k: v for k, v in fair_sharing.items() if k != "enable"}}
    for key in body:
        if key not in schema.fields:
            known = ", ".join([*sorted(schema.fields), "kfed"])
            raise ConfigError(f"unknown key {key!r} (known: {known}){_of_another(version, key)}")
    try:
        settings = list(walk(body, schema))
    except SchemaError as err:
        raise ConfigError(f"{err}{_of_another(version, err.unknown)}") from None
    if version == V1BETA2 and isinstance(fair_sharing, dict):
        given.setdefault("fair_sharing", ("fairSharing", True))  # there: on
    gates = body.get("featureGates") or {}
    warnings: list[str] = []
    for setting in settings:
        path, value = setting.path, setting.value
        if path == "integrations.frameworks":
            others = [name for name in value if name not in KINDS]
            value = [name for name in value if name in KINDS]
            if others:
                warnings.append(
                    f"{path}: {', '.join(others)}: Kueue integrations kfed does not federate; "
                    f"ignored (kfed's: {', '.join(KINDS)})"
                )
        if (
            path == "multiKueue.incrementalDispatcherConfig.stepSize"
            and gates.get(STEP_GATE) is False
        ):
            warnings.append(
                f"{path}: ignored, as Kueue ignores it with featureGates.{STEP_GATE} false"
            )
        elif path in ACTED_ON:
            dest, read = ACTED_ON[path]
            given[dest] = (path, read(value, path))
        elif path == "integrations.externalFrameworks":
            _external_integrations(value)
        elif path == "featureGates":
            warnings += _feature_gates(value, given)
        elif path == "leaderElection.leaderElect":
            if value is not True:
                warnings.append(f"{path}: kfed always elects a leader among its replicas; ignored")
        elif path != "fairSharing":  # ``fairSharing: {}`` (v1beta2): fair sharing on
            warnings.append(f"{path}: {IGNORED}")
    _incremental_config_needs_its_dispatcher(body)
    profiles = (body.get("multiKueue") or {}).get("clusterProfile") or {}
    if profiles.get("accessProviders") and profiles.get("credentialsProviders"):
        raise ConfigError(
            "multiKueue.clusterProfile: accessProviders and credentialsProviders (its deprecated "
            "name) are mutually exclusive, as in Kueue"
        )
    if gates.get(CUSTOM_JOBS_GATE) is False and "external_frameworks" in given:
        del given["external_frameworks"]
        warnings.append(
            f"multiKueue.externalFrameworks: ignored, as Kueue ignores it with "
            f"featureGates.{CUSTOM_JOBS_GATE} false"
        )
    return warnings


def _external_integrations(value: Any) -> None:
    """``integrations.externalFrameworks``: checked as upstream checks it, and otherwise
    nothing to do: kfed admits a Workload whatever kind owns it, and never makes one for a
    kind it has no adapter for (docs/jobs.md, External frameworks)."""
    try:
        external.check(integrations=value, built_in=built_in())
    except ValueError as err:
        raise ConfigError(str(err)) from None


GATES_ACTED_ON = {
    "UnadmittedWorkloadsObservability": "unadmitted_workloads_observability",
    "MultiKueueManagerQuotaAutomation": "manager_quota_automation",
}
"""Kueue feature gates that switch something kfed has (its flag's dest): the gate's value
sets it; every other gate is named in a warning."""


def _feature_gates(gates: Any, given: dict[str, tuple[str, str | bool]]) -> list[str]:
    warnings = []
    for gate, value in sorted(dict(gates).items()):
        path = f"featureGates.{gate}"
        if gate in GATES_ACTED_ON:
            given[GATES_ACTED_ON[gate]] = (path, _switch(value, path))
        elif gate == PROFILE_GATE:
            if value is not True:
                warnings.append(f"{path}: kfed always reads ClusterProfiles; ignored")
        elif gate not in (STEP_GATE, CUSTOM_JOBS_GATE):  # read with what they govern
            warnings.append(f"{path}: {IGNORED}")
    return warnings


def _of_another(version: str, path: str | None) -> str:
    """For an unknown key that the other apiVersion of Kueue's has: say so."""
    other = V1BETA2 if version == V1BETA1 else V1BETA1
    if path is None or node_at(CONFIGURATION[other], path) is None:
        return ""
    return f"; {path} is a key of {other}, not of {version}"


def _incremental_config_needs_its_dispatcher(body: dict[Any, Any]) -> None:
    """Upstream refuses ``multiKueue.incrementalDispatcherConfig`` unless ``dispatcherName`` is
    the incremental dispatcher's: kfed too, rather than take a step for nothing."""
    multikueue = body.get("multiKueue") or {}
    if multikueue.get("incrementalDispatcherConfig") is None:
        return
    if multikueue.get("dispatcherName") not in INCREMENTAL:
        raise ConfigError(
            "multiKueue.incrementalDispatcherConfig: only valid when multiKueue.dispatcherName "
            f"is {C.MULTIKUEUE_DISPATCHER_INCREMENTAL}, got {multikueue.get('dispatcherName')!r}"
        )


_LISTS: dict[str, Converter] = {
    "integrations": _names,
    "fair_sharing_preemption_strategies": _names,
    "device_class_mappings": _json,
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
