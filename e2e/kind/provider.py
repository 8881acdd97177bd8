"""The `kind` cluster provider: the same interface as the local one, for hosts with Docker.

Every cluster is a kind cluster named ``kfed-<federation>-<cluster>``. In full mode the fake
GPU nodes come from the same kwok binary and Stages as the local provider, run on the host
against each kind cluster's kubeconfig, so Jobs behave the same on both providers (kind's own
node is tainted out of the way by labelling nothing on it as a GPU node).

``up`` first builds a plan (the exact commands, in order) and then runs it. This machine has
no Docker engine, so the tests check the plan instead of running it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from e2e import binaries
from e2e.local.cluster import STAGES_FILE, LocalCluster
from e2e.local.federation import (
    DEFAULT_NODES_FILE,
    MANAGER,
    cleanup_directory,
    load_node_sets,
    state_root,
    worker_names,
)
from e2e.local.kwoknodes import KWOK_NODE_ANNOTATION
from e2e.local.ports import Ports
from e2e.local.process import ManagedProcess


@dataclass(frozen=True, slots=True)
class Step:
    """One command of the plan; ``background`` commands keep running (kwok)."""

    argv: tuple[str, ...]
    input: str | None = None
    background: bool = False


class KindFederation:
    def __init__(
        self,
        name: str,
        *,
        workers: int = 2,
        full: bool = False,
        nodes_file: Path | None = None,
        kind: str = "kind",
        root: Path | None = None,
    ) -> None:
        self.name = name
        self.full = full
        self.kind = kind
        self.nodes_file = nodes_file or DEFAULT_NODES_FILE
        self.directory = (root or state_root() / "kind") / name
        self.cluster_names = [MANAGER, *worker_names(workers)]

    def kind_name(self, cluster: str) -> str:
        return f"kfed-{self.name}-{cluster}"

    def kubeconfig(self, cluster: str) -> Path:
        return self.directory / cluster / "kubeconfig"

    def _kubectl(self) -> str:
        try:
            return str(binaries.path_of("kubectl"))
        except binaries.BinariesMissing:
            return "kubectl"

    def _kwok(self) -> str:
        try:
            return str(binaries.path_of("kwok"))
        except binaries.BinariesMissing:
            return "kwok"

    def up_plan(self) -> list[Step]:
        steps = [
            Step(
                (
                    self.kind,
                    "create",
                    "cluster",
                    f"--name={self.kind_name(c)}",
                    f"--kubeconfig={self.kubeconfig(c)}",
                    "--wait=120s",
                )
            )
            for c in self.cluster_names
        ]
        if not self.full:
            return steps
        nodes = load_node_sets(self.nodes_file, self.cluster_names)
        key, value = KWOK_NODE_ANNOTATION
        for cluster in self.cluster_names:
            shape = LocalCluster(
                cluster, self.directory / cluster, Ports(0, 0, 0), nodes=nodes[cluster]
            )
            manifests = {"apiVersion": "v1", "kind": "List", "items": shape.node_manifests()}
            if manifests["items"]:
                steps.append(
                    Step(
                        (
                            self._kubectl(),
                            f"--kubeconfig={self.kubeconfig(cluster)}",
                            "apply",
                            "-f",
                            "-",
                        ),
                        input=json.dumps(manifests),
                    )
                )
            steps.append(
                Step(
                    (
                        self._kwok(),
                        f"--kubeconfig={self.kubeconfig(cluster)}",
                        f"--config={STAGES_FILE}",
                        "--manage-all-nodes=false",
                        f"--manage-nodes-with-annotation-selector={key}={value}",
                    ),
                    background=True,
                )
            )
        return steps

    def down_plan(self) -> list[Step]:
        return [
            Step((self.kind, "delete", "cluster", f"--name={self.kind_name(c)}"))
            for c in self.cluster_names
        ]

    def up(self) -> None:
        if shutil.which(self.kind) is None:
            raise RuntimeError(
                f"{self.kind} is not installed; the kind provider needs kind and a Docker engine "
                "(use --provider local on hosts without Docker)"
            )
        for cluster in self.cluster_names:
            self.kubeconfig(cluster).parent.mkdir(parents=True, exist_ok=True)
        for i, step in enumerate(self.up_plan()):
            if step.background:
                ManagedProcess(
                    role=f"bg-{i}",
                    argv=list(step.argv),
                    log_path=self.directory / "logs" / f"{i}.log",
                ).start()
            else:
                subprocess.run(step.argv, input=step.input, text=True, check=True)

    def down(self) -> None:
        cleanup_directory(self.directory)  # host-side kwok processes name paths in it
        if shutil.which(self.kind) is not None:
            for step in self.down_plan():
                subprocess.run(step.argv, check=False)
