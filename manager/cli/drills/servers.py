"""The servers a drill points a worker's kubeconfig at, and the marker it leaves on what it
changed (``kfed.io/drill``: the run, the kind, the original server). Pure: kubeconfig text
and objects in, text out."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from manager.api import constants as C
from manager.api.view import annotations_of
from manager.cli.common import CliError, usage_error
from manager.federation.workers import kubeconfig

Obj = dict[str, Any]


DRILL_ANNOTATION = "kfed.io/drill"
"""On a Secret or MultiKueueCluster a drill has changed: JSON with the run, the kind, when it
started and (for a Secret) the original server."""
REFUSED_SERVER = "https://127.0.0.1:1"
"""Nothing listens on port 1: every connection is refused at once (an apiserver that is down)."""
_CONFLICT_ATTEMPTS = 5


def _current_cluster(config: Any) -> Obj:
    if not isinstance(config, dict):
        raise ValueError("the kubeconfig is not a YAML mapping")
    context_name = config.get("current-context")
    contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or []}
    if context_name not in contexts:
        raise ValueError(f"the kubeconfig has no current context {context_name!r}")
    cluster_name = contexts[context_name].get("cluster")
    for entry in config.get("clusters") or []:
        if entry.get("name") == cluster_name and isinstance(entry.get("cluster"), dict):
            cluster: Obj = entry["cluster"]
            return cluster
    raise ValueError(f"the kubeconfig has no cluster {cluster_name!r}")


def server_of(kubeconfig_text: str) -> str:
    """The server of the kubeconfig's current context."""
    return str(_current_cluster(yaml.safe_load(kubeconfig_text)).get("server") or "")


def with_server(kubeconfig_text: str, server: str) -> str:
    """The same kubeconfig with the current context's server replaced; everything else (CA,
    credentials, other contexts) is kept. Raises ValueError for a malformed kubeconfig."""
    try:
        config = yaml.safe_load(kubeconfig_text)
    except yaml.YAMLError as err:
        raise ValueError(f"the kubeconfig is not YAML: {err}") from None
    _current_cluster(config)["server"] = server
    return yaml.safe_dump(config, sort_keys=False)


def secret_kubeconfig(secret: Obj) -> str:
    try:
        return kubeconfig.from_secret(secret)
    except kubeconfig.KubeconfigRejected as err:
        raise CliError(str(err)) from None


def encode(text: str) -> str:
    return kubeconfig.secret_data(text)[C.MULTIKUEUE_KUBECONFIG_SECRET_KEY]


def server_url(address: str) -> str:
    """``HOST:PORT`` (or an https URL) as an https server URL; a usage error otherwise."""
    url = address if "://" in address else f"https://{address}"
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "https" or not parts.hostname or port is None:
        raise usage_error(
            f"--blackhole {address!r} is not HOST:PORT (for example 10.255.255.1:6443)"
        )
    return urlunsplit(("https", parts.netloc, "", "", ""))


def drill_marker(run_id: str, kind: str, *, original_server: str = "") -> str:
    marker = {
        "run": run_id,
        "kind": kind,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if original_server:
        marker["originalServer"] = original_server
    return json.dumps(marker)


def read_marker(obj: Obj) -> dict[str, str] | None:
    raw = annotations_of(obj).get(DRILL_ANNOTATION)
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return {"run": "?", "kind": "?", "started": "?"}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else None
