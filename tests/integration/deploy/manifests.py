"""The deploy/ tree as the tests see it: every overlay, which cluster it is for, and its
rendering by kubectl's built-in kustomize (no cluster needed)."""

from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e import binaries

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Overlay:
    path: str
    """Relative to deploy/."""
    cluster: str
    """Which cluster of a federation it is applied to: manager or worker."""

    @property
    def directory(self) -> Path:
        return DEPLOY / self.path


OVERLAYS = [
    Overlay("crds", "manager"),
    Overlay("manager/overlays/default", "manager"),
    Overlay("manager/overlays/cert-manager", "manager"),
    Overlay("manager/overlays/observability", "manager"),
    Overlay("manager/overlays/prometheus", "manager"),
    Overlay("manager/overlays/prometheus-cert-manager", "manager"),
    Overlay("worker/overlays/default", "worker"),
    Overlay("worker/overlays/observability", "worker"),
    Overlay("worker/overlays/drills", "worker"),
    Overlay("worker/overlays/logs", "worker"),
    Overlay("worker/overlays/prometheus", "worker"),
    Overlay("worker/overlays/prometheus-cert-manager", "worker"),
    Overlay("worker/overlays/fence-only", "worker"),
    Overlay("observability", "manager"),
]


def kubectl() -> str:
    return str(binaries.path_of("kubectl"))


@functools.cache
def render_text(directory: Path) -> str:
    """The rendered YAML (cached: an overlay does not change during a test run)."""
    result = subprocess.run(
        [kubectl(), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"kustomize {directory}: {result.stderr}"
    return result.stdout


def render(directory: Path) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(render_text(directory)) if doc]


def find(objects: list[Obj], kind: str, name: str) -> Obj:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind} {name}: {len(matches)} found"
    return matches[0]


def container_args(objects: list[Obj], deployment: str) -> list[str]:
    spec = find(objects, "Deployment", deployment)["spec"]["template"]["spec"]
    args: list[str] = spec["containers"][0]["args"]
    return args


RBAC_KINDS = {
    "Namespace",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
}


def render_isolated(overlay: Path, work_dir: Path, *, namespace: str, prefix: str) -> list[Obj]:
    """``overlay`` rendered into ``namespace`` with every name prefixed, so a test can apply
    it for real on a shared cluster (kustomize rewrites the bindings' subjects and roleRefs
    too; kustomize only accepts a relative path to the overlay)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    relative = os.path.relpath(overlay, work_dir)
    (work_dir / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "namespace": namespace,
                "namePrefix": prefix,
                "resources": [relative],
            }
        )
    )
    return render(work_dir)


def overlay(path: str) -> Overlay:
    (found,) = [o for o in OVERLAYS if o.path == path]
    return found
