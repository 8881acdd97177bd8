"""Kubeconfigs as ``kfed`` commands read them: an API client for a kubeconfig file (or a
``:``-separated list, like $KUBECONFIG) or an in-memory one, and a context's namespace."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from manager.cli.common import CliError, first_line, usage_error
from manager.kube.api import KubeApi

REQUEST_TIMEOUT = 10.0
"""Seconds per API request: a person is waiting."""


def _existing_paths(value: str) -> list[Path]:
    return [
        Path(p).expanduser() for p in value.split(os.pathsep) if p and Path(p).expanduser().exists()
    ]


async def connect(
    kubeconfig: str, context: str | None, *, name: str, flag_hint: str = "--kubeconfig/--context"
) -> KubeApi:
    """A KubeApi for a kubeconfig file; a missing or broken file is a usage error (exit 2)."""
    paths = _existing_paths(kubeconfig)
    if not paths:
        raise usage_error(f"kubeconfig {kubeconfig} not found: pass {flag_hint} or set $KUBECONFIG")
    try:
        api = await KubeApi.from_kubeconfig_file(
            os.pathsep.join(str(p) for p in paths), context=context, name=name
        )
    except Exception as err:  # kubernetes_asyncio raises ConfigException, TypeError, ...
        where = f"{kubeconfig}" + (f" (context {context})" if context else "")
        raise usage_error(
            f"cannot load kubeconfig {where}: {first_line(err)}; check {flag_hint}"
        ) from None
    api.request_timeout = REQUEST_TIMEOUT
    host = getattr(api.client.configuration, "host", "")
    api.name = f"{name} {host}".strip()
    return api


async def connect_dict(config: dict[str, Any], context: str, *, name: str) -> KubeApi:
    """A KubeApi for an in-memory (already validated) kubeconfig, e.g. a worker's."""
    try:
        api = await KubeApi.from_kubeconfig_dict(config, context=context, name=name)
    except Exception as err:
        raise CliError(f"{name}: its kubeconfig cannot be loaded: {first_line(err)}") from None
    api.request_timeout = REQUEST_TIMEOUT
    host = getattr(api.client.configuration, "host", "")
    api.name = f"{name} {host}".strip()
    return api


def context_namespace(kubeconfig: str, context: str | None) -> str | None:
    """The namespace of a kubeconfig context (``context``, else the current-context), as
    kubectl reads it across a ``:``-separated list of files (the first file to set a value
    wins); None when there is none or the files cannot be read."""
    current: str | None = context
    contexts: dict[str, Any] = {}
    for path in _existing_paths(kubeconfig):
        try:
            config = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue
        if not isinstance(config, dict):
            continue
        if current is None and config.get("current-context"):
            current = str(config["current-context"])
        for entry in config.get("contexts") or []:
            if isinstance(entry, dict) and entry.get("name") not in contexts:
                contexts[str(entry.get("name"))] = entry.get("context") or {}
    found = contexts.get(current or "")
    namespace = found.get("namespace") if isinstance(found, dict) else None
    return str(namespace) if namespace else None
