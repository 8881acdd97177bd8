"""The ClusterProfile access providers the platform configures for the manager (Kueue's
``multiKueue.clusterProfile.accessProviders``; ``--cluster-profile-providers``): a name and
the exec credentials plugin the manager may run for it (workers/clusterprofiles.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from manager.api.view import at, items

EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")


@dataclass(frozen=True, slots=True)
class Provider:
    """An access provider the platform configured: its name and credentials plugin."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    api_version: str = EXEC_API_VERSIONS[0]
    provide_cluster_info: bool = False


def parse_providers(text: str) -> tuple[Provider, ...]:
    """The ``--cluster-profile-providers`` JSON (Kueue's ``accessProviders`` list): a list
    of ``{name, execConfig: {command, args, env, apiVersion, provideClusterInfo}}``."""
    raw = json.loads(text) if text.strip() else []
    if not isinstance(raw, list):
        raise ValueError("cluster profile providers: expected a list")
    providers: list[Provider] = []
    for entry in raw:
        name, exec_config = (
            entry.get("name") if isinstance(entry, dict) else None,
            at(entry, "execConfig"),
        )
        command = exec_config.get("command")
        if not isinstance(name, str) or not name or not isinstance(command, str) or not command:
            raise ValueError(f"cluster profile provider {entry!r}: needs a name and a command")
        envs = items(exec_config, "env")
        api_version = str(exec_config.get("apiVersion") or EXEC_API_VERSIONS[0])
        if api_version not in EXEC_API_VERSIONS:
            raise ValueError(
                f"cluster profile provider {name!r}: apiVersion {api_version!r} is not one of "
                + ", ".join(EXEC_API_VERSIONS)
            )
        providers.append(
            Provider(
                name=name,
                command=command,
                args=tuple(str(a) for a in items(exec_config, "args")),
                env=tuple((str(e.get("name")), str(e.get("value"))) for e in envs),
                api_version=api_version,
                provide_cluster_info=bool(exec_config.get("provideClusterInfo")),
            )
        )
    names = [p.name for p in providers]
    if len(set(names)) != len(names):
        raise ValueError(f"cluster profile providers: a name repeats in {names}")
    return tuple(providers)
