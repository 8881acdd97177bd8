"""What an interrupted drill left (a Secret pointed elsewhere, a drain), found by its
``kfed.io/drill`` marker and put back: ``kfed drill restore``, and the check that refuses to
start a drill on top of another's leftovers."""

from __future__ import annotations

import contextlib
from typing import Any

from manager.api import constants as C
from manager.api.view import annotations_of
from manager.cli.common import CliError
from manager.cli.drills.servers import (
    DRILL_ANNOTATION,
    encode,
    read_marker,
    secret_kubeconfig,
    with_server,
)
from manager.cli.registration import set_maintenance
from manager.kube import errors
from manager.kube import resources as R
from manager.kube.api import KubeApi

Obj = dict[str, Any]


async def leftover(api: KubeApi, cluster: str, namespace: str, secret: str) -> str | None:
    """What an earlier drill left changed on this cluster, in one phrase (None: nothing)."""
    found = []
    with contextlib.suppress(errors.NotFound):
        obj = await api.get(R.SECRETS, secret, namespace)
        marker = read_marker(obj)
        if marker is not None:
            found.append(
                f"Secret {namespace}/{secret} still points at a drill's server "
                f"(run {marker.get('run')}, {marker.get('kind')}, started {marker.get('started')})"
            )
    with contextlib.suppress(errors.NotFound):
        obj = await api.get(R.MULTIKUEUE_CLUSTERS, cluster)
        marker = read_marker(obj)
        if marker is not None:
            found.append(
                f"MultiKueueCluster {cluster} is still drained by a drill "
                f"(run {marker.get('run')}, started {marker.get('started')})"
            )
    return "; ".join(found) or None


async def repair(api: KubeApi, cluster: str, namespace: str, secret: str) -> list[str]:
    """Undo what an interrupted drill left on this cluster: the Secret's original server (from
    the annotation), and a drill's drain."""
    done = []
    with contextlib.suppress(errors.NotFound):
        obj = await api.get(R.SECRETS, secret, namespace)
        marker = read_marker(obj)
        if marker is not None:
            original = marker.get("originalServer", "")
            if not original:
                raise CliError(
                    f"Secret {namespace}/{secret} carries {DRILL_ANNOTATION} without the "
                    f"original server: re-register it (kfed cluster add {cluster} "
                    "--kubeconfig-file ...)"
                )
            try:
                text = with_server(secret_kubeconfig(obj), original)
            except ValueError as err:
                raise CliError(f"Secret {namespace}/{secret}: {err}") from None
            await api.patch(
                R.SECRETS,
                secret,
                {
                    "metadata": {
                        "resourceVersion": obj["metadata"]["resourceVersion"],
                        "annotations": {DRILL_ANNOTATION: None},
                    },
                    "data": {C.MULTIKUEUE_KUBECONFIG_SECRET_KEY: encode(text)},
                },
                namespace,
            )
            done.append(f"Secret {namespace}/{secret} points at {original} again")
    with contextlib.suppress(errors.NotFound):
        obj = await api.get(R.MULTIKUEUE_CLUSTERS, cluster)
        if read_marker(obj) is not None:
            annotations = annotations_of(obj)
            if annotations.get(C.MAINTENANCE_ANNOTATION) == C.MAINTENANCE_DRAIN:
                await set_maintenance(api, cluster, None)
                done.append(f"{cluster} uncordoned")
            await api.patch(
                R.MULTIKUEUE_CLUSTERS,
                cluster,
                {"metadata": {"annotations": {DRILL_ANNOTATION: None}}},
            )
    return done
