"""The article on kind, deployed as in production: kfed's image and deploy/ manifests in a
manager and two worker kind clusters, workers registered with ServiceAccount kubeconfigs.

Phases (each is a method; ``python -m e2e.kind`` runs them, docs/kind.md explains them):

1. ``create``: the three kind clusters; worker nodes labelled ``gpu.model`` with
   ``nvidia.com/gpu`` patched onto their status (see layout.py);
2. ``image``: ``docker build`` of the repository's Dockerfile, ``kind load`` into each;
3. ``install``: ``kubectl apply -k`` of deploy/crds on every cluster, then of
   deploy/manager/overlays/default on the manager and deploy/worker/overlays/drills on the
   workers, then wait for the rollouts;
4. ``register``: per worker, deploy/worker/make-kubeconfig.sh for the manager's
   ServiceAccount there, with the worker's control-plane address on the kind network (what
   the manager's pods can reach), and ``kfed cluster add``;
5. ``article``: the article's queues unchanged on the manager (plus the MultiKueue check),
   per-worker queues for the GPUs each has, the two jobs unchanged; waits until light-job is
   placed on worker-1 and heavy-job on worker-2;
6. ``drill``: worker-2's spare RTX A1000 node joins its queue, then
   ``kfed drill partition --cluster worker-1`` (the manager runs in a cluster: the blackhole
   is a non-routable address);
7. ``delete``: the kind clusters.

Commands go through a Shell: on a Docker host they run; ``PlanShell`` records them (the
tests check the recorded plan on machines without Docker).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from e2e import binaries
from e2e.examples import ARTICLE
from e2e.kind import layout
from e2e.kind.shell import Shell
from e2e.local.federation import state_root

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
SEED = ARTICLE
ARTICLE_JOBS = {"light-job": "worker-1", "heavy-job": "worker-2"}
"""Where the article says each job runs."""
MANAGER_OVERLAY = DEPLOY / "manager" / "overlays" / "default"
WORKER_OVERLAY = DEPLOY / "worker" / "overlays" / "drills"
CRDS = DEPLOY / "crds"
"""Applied on their own, before the overlays (which leave them out)."""
MAKE_KUBECONFIG = DEPLOY / "worker" / "make-kubeconfig.sh"
BLACKHOLE = "10.255.255.1:6443"
"""Non-routable: connections from the manager's pod hang, as across a partition."""
NAMESPACE = "kueue-system"


def default_kubectl() -> str:
    try:
        return str(binaries.path_of("kubectl"))
    except binaries.BinariesMissing:
        return "kubectl"


def default_kfed() -> str:
    beside = Path(sys.executable).with_name("kfed")
    return str(beside) if beside.exists() else "kfed"


@dataclass
class KindScenario:
    shell: Shell
    name: str = "article"
    image: str = "kfed:0.1.0"
    node_image: str | None = None
    directory: Path | None = None
    kind: str = "kind"
    docker: str = "docker"
    kubectl: str = "kubectl"
    kfed: str = "kfed"
    timeout: float = 300.0

    def __post_init__(self) -> None:
        if self.directory is None:
            self.directory = state_root() / "kind-article" / self.name

    @property
    def clusters(self) -> tuple[layout.KindCluster, ...]:
        return layout.CLUSTERS

    @property
    def workers(self) -> list[layout.KindCluster]:
        return [c for c in self.clusters if c.name != "manager"]

    def kind_name(self, cluster: str) -> str:
        return f"kfed-{self.name}-{cluster}"

    def path(self, *parts: str) -> Path:
        assert self.directory is not None
        return self.directory.joinpath(*parts)

    def kubeconfig(self, cluster: str) -> Path:
        """The admin kubeconfig kind writes (host addresses: for this host only)."""
        return self.path(cluster, "kubeconfig")

    def remote_kubeconfig(self, worker: str) -> Path:
        """The manager's kubeconfig for a worker (kind-network address, ServiceAccount)."""
        return self.path(worker, "manager-remote.kubeconfig")

    def on(self, cluster: str, *args: str) -> list[str]:
        return [self.kubectl, f"--kubeconfig={self.kubeconfig(cluster)}", *args]

    def kfed_on_manager(self, *args: str) -> list[str]:
        return [self.kfed, *args, "--kubeconfig", str(self.kubeconfig("manager"))]

    # -- phases --------------------------------------------------------------------------

    def create(self) -> None:
        for cluster in self.clusters:
            config = self.path(cluster.name, "kind.yaml")
            text = yaml.safe_dump(layout.kind_config(cluster, self.node_image), sort_keys=False)
            self.shell.write(config, text)
            self.shell.run(
                [
                    self.kind,
                    "create",
                    "cluster",
                    f"--name={self.kind_name(cluster.name)}",
                    f"--config={config}",
                    f"--kubeconfig={self.kubeconfig(cluster.name)}",
                    "--wait=180s",
                ]
            )
            names = cluster.node_names(self.kind_name(cluster.name))
            for node_name, node in zip(names, cluster.nodes, strict=True):
                self.shell.run(
                    self.on(
                        cluster.name,
                        "patch",
                        "node",
                        node_name,
                        "--subresource=status",
                        "--type=json",
                        f"--patch={layout.gpu_status_patch(node)}",
                    )
                )

    def build_image(self) -> None:
        self.shell.run([self.docker, "build", "--tag", self.image, str(REPO)])
        for cluster in self.clusters:
            self.shell.run(
                [
                    self.kind,
                    "load",
                    "docker-image",
                    self.image,
                    f"--name={self.kind_name(cluster.name)}",
                ]
            )

    def install(self) -> None:
        for cluster in self.clusters:
            self.shell.run(self.on(cluster.name, "apply", "--server-side", "-k", str(CRDS)))
            self.shell.run(
                self.on(cluster.name, "wait", "--for=condition=Established", "crd", "--all")
            )
            overlay = MANAGER_OVERLAY if cluster.name == "manager" else WORKER_OVERLAY
            self.shell.run(self.on(cluster.name, "apply", "--server-side", "-k", str(overlay)))
        rollouts = [("manager", "kfed-manager")]
        rollouts += [(w.name, "kfed-worker-shim") for w in self.workers]
        for where, deployment in rollouts:
            self.shell.run(
                self.on(
                    where,
                    "-n",
                    NAMESPACE,
                    "rollout",
                    "status",
                    f"deployment/{deployment}",
                    f"--timeout={self.timeout:.0f}s",
                )
            )

    def register(self) -> None:
        for worker in self.workers:
            control_plane = f"{self.kind_name(worker.name)}-control-plane"
            address = self.shell.capture(
                [
                    self.docker,
                    "inspect",
                    "--format",
                    '{{(index .NetworkSettings.Networks "kind").IPAddress}}',
                    control_plane,
                ],
                placeholder=f"<{control_plane} address on the kind network>",
            )
            self.shell.run(
                [
                    "bash",
                    str(MAKE_KUBECONFIG),
                    f"--kubeconfig={self.kubeconfig(worker.name)}",
                    f"--name={worker.name}",
                    f"--server=https://{address}:6443",
                    f"--output={self.remote_kubeconfig(worker.name)}",
                ]
            )
            self.shell.run(
                self.kfed_on_manager(
                    "cluster",
                    "add",
                    worker.name,
                    "--kubeconfig-file",
                    str(self.remote_kubeconfig(worker.name)),
                    "--timeout",
                    "120s",
                )
            )

    def article(self) -> None:
        self.shell.run(
            self.on("manager", "apply", "-f", "-"), input=yaml.safe_dump_all(layout.manager_check())
        )
        self.shell.run(self.on("manager", "apply", "-f", str(SEED / "01-queues.yaml")))
        check = {"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "multikueue"}]}}}
        self.shell.run(
            self.on(
                "manager",
                "patch",
                "clusterqueue",
                "gpu-cq",
                "--type=merge",
                f"--patch={json.dumps(check)}",
            )
        )
        for worker in self.workers:
            queues = layout.worker_queues(layout.queued_nodes(worker))
            self.shell.run(
                self.on(worker.name, "apply", "-f", "-"), input=yaml.safe_dump_all(queues)
            )
        for job in ("02-light-job.yaml", "03-heavy-job.yaml"):
            self.shell.run(self.on("manager", "apply", "-f", str(SEED / job)))
        self.shell.wait(
            self.on("manager", "get", "workloads", "-n", "ml-jobs", "-o", "json"),
            placed_as_the_article_says,
            timeout=self.timeout,
            what="light-job placed on worker-1 and heavy-job on worker-2",
        )
        self.shell.run(self.kfed_on_manager("workloads", "-A"))
        for worker in self.workers:
            self.shell.run(self.on(worker.name, "get", "pods", "-n", "ml-jobs", "-o", "wide"))

    def drill(self) -> None:
        for worker in self.workers:
            if layout.spare_flavors(worker):
                queues = layout.worker_queues(list(worker.nodes))
                self.shell.run(
                    self.on(worker.name, "apply", "-f", "-"), input=yaml.safe_dump_all(queues)
                )
        self.shell.run(
            self.kfed_on_manager(
                "drill", "partition", "--cluster", "worker-1", "--blackhole", BLACKHOLE
            )
        )

    def delete(self) -> None:
        for cluster in self.clusters:
            name = self.kind_name(cluster.name)
            self.shell.run([self.kind, "delete", "cluster", f"--name={name}"])

    PHASES = ("create", "image", "install", "register", "article", "drill")

    def run(self, phases: tuple[str, ...] = PHASES) -> None:
        actions = {
            "create": self.create,
            "image": self.build_image,
            "install": self.install,
            "register": self.register,
            "article": self.article,
            "drill": self.drill,
            "delete": self.delete,
        }
        for phase in phases:
            actions[phase]()


def placed_as_the_article_says(workloads_json: str) -> bool:
    """Whether ``kubectl get workloads -o json`` on the manager shows each article job's
    Workload placed on its worker (``status.clusterName``)."""
    placed = placements(workloads_json)
    return all(placed.get(job) == cluster for job, cluster in ARTICLE_JOBS.items())


def placements(workloads_json: str) -> dict[str, str]:
    """Job name -> the worker its Workload was placed on (only the placed ones)."""
    try:
        items = json.loads(workloads_json).get("items") or []
    except ValueError:
        return {}
    result = {}
    for wl in items:
        owners = wl.get("metadata", {}).get("ownerReferences") or []
        job = next((o["name"] for o in owners if o.get("kind") == "Job"), None)
        cluster = (wl.get("status") or {}).get("clusterName")
        if job and cluster:
            result[job] = cluster
    return result


def environment_defaults() -> dict[str, str]:
    """Binaries: the built kubectl when there is one, the kfed beside this Python."""
    return {
        "kubectl": os.environ.get("KUBECTL", default_kubectl()),
        "kfed": os.environ.get("KFED", default_kfed()),
        "kind": os.environ.get("KIND", "kind"),
        "docker": os.environ.get("DOCKER", "docker"),
    }
