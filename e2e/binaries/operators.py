"""The operators' CRDs, read from their Go modules at the pinned versions (``versions.env``).

A test that needs only an operator's API (its CRD), not the operator running, gets the CRD
files here: ``go mod download`` of the pinned module (seconds, from the module proxy; never
committed), the same files ``build-operators.sh`` copies beside the binaries.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from e2e.binaries import VERSIONS_FILE


@dataclass(frozen=True, slots=True)
class Operator:
    name: str
    module: str
    version_key: str
    crd_dir: str
    """Where the module keeps its CRD YAMLs."""


JOBSET = Operator("jobset", "sigs.k8s.io/jobset", "JOBSET_VERSION", "config/components/crd/bases")
TRAINER = Operator(
    "trainer", "github.com/kubeflow/trainer/v2", "TRAINER_VERSION", "manifests/base/crds"
)
KUBERAY = Operator(
    "kuberay", "github.com/ray-project/kuberay/ray-operator", "KUBERAY_VERSION", "config/crd/bases"
)
APPWRAPPER = Operator(
    "appwrapper",
    "github.com/project-codeflare/appwrapper",
    "APPWRAPPER_VERSION",
    "config/crd/bases",
)


def version_of(operator: Operator, path: Path = VERSIONS_FILE) -> str:
    for raw in path.read_text().splitlines():
        key, _, value = raw.strip().partition("=")
        if key == operator.version_key:
            return value.strip()
    raise KeyError(f"{operator.version_key} is not pinned in {path}")


def module_dir(operator: Operator) -> Path:
    """The pinned module in the Go module cache (downloaded first when missing)."""
    version = f"v{version_of(operator)}"
    done = subprocess.run(
        ["go", "mod", "download", "-json", f"{operator.module}@{version}"],
        check=False,
        capture_output=True,
        text=True,
    )
    info = json.loads(done.stdout or "{}")
    if done.returncode != 0 or not info.get("Dir"):
        raise RuntimeError(
            f"cannot download {operator.module}@{version} from the Go module proxy: "
            f"{info.get('Error') or done.stderr.strip()}"
        )
    return Path(info["Dir"])


def crd_files(operator: Operator) -> list[Path]:
    """The operator's CRD YAMLs at the pinned version, in name order."""
    files = sorted((module_dir(operator) / operator.crd_dir).glob("*.yaml"))
    return [f for f in files if f.name != "kustomization.yaml"]
