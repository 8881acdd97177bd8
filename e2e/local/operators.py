"""The batch operators a full local worker cluster runs: JobSet, Kubeflow Trainer v2, KubeRay,
Kubeflow's training-operator v1 (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob), the MPI
operator v2 (MPIJob), LeaderWorkerSet and the AppWrapper operator.

Each runs as one more process of its LocalCluster (role = operator name, log in the cluster's
``logs/``), from the binaries ``build-operators.sh`` caches, exactly as that script's header
says they must run against a bare control plane: leader election off, every port a free one on
127.0.0.1, webhooks served with a certificate of our own CA and registered by URL (never a
Service: there is no kube-proxy), CRDs applied server-side before anything starts
(``operatorcommands.py`` has each one's command line). Nothing is read from a network at run
time: CRDs, webhook manifests and runtimes come from the cache.
"""

from __future__ import annotations

import base64
import copy
import http.client
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from e2e import binaries
from e2e.local import pki
from e2e.local.cluster import LocalCluster
from e2e.local.errors import ClusterStartError, KubectlError
from e2e.local.operatorcommands import (
    HOST,
    MPI_LOCK_NAMESPACE,
    TRAINING_OPERATOR_SCHEMES,
    WEBHOOK_PROBES,
    appwrapper_objects,
    command,
)
from e2e.local.ports import free_ports
from e2e.waiting import wait_for_sync

# Also the order they start in: JobSet's CRDs must be served before the trainer starts (it
# watches JobSets from startup).
OPERATORS: tuple[str, ...] = (
    "jobset",
    "trainer",
    "kuberay",
    "training-operator",
    "mpi-operator",
    "lws",
    "appwrapper",
)
WITHOUT_WEBHOOKS = ("kuberay", "training-operator", "mpi-operator", "appwrapper")
"""Operators whose webhooks the bed does not register: KubeRay's are off unless
ENABLE_WEBHOOKS=true, the MPI operator has none, and the training-operator's only validate (its
controller defaults each of its jobs itself); the AppWrapper operator's are off in its
configuration (they label and validate; its controller needs none)."""
TRAINING_OPERATOR_NAMESPACE = "kubeflow"
"""Where the training-operator's cert rotator keeps its Secret (its default namespace)."""
TRAINING_OPERATOR_SECRET = "training-operator-webhook-cert"
TRAINING_OPERATOR_CERT_FILE = Path("/tmp/k8s-webhook-server/serving-certs/tls.crt")
"""The rotator of training-operator v1.9.2 waits for this fixed file to exist (in a pod, its
Secret's volume) before any controller starts; it never reads it, nor does its webhook server
(which reads $TMPDIR's): the bed writes a placeholder once per host."""
# A TrainJob runs as a JobSet: without the JobSet controller the trainer cannot do anything.
_NEEDS = {"trainer": "jobset"}
FIELD_MANAGER = "kfed-operators"
CRD_APPLY_TIMEOUT = 600.0
"""Seconds for the operators' CRDs to be applied, and then for them to be Established."""
CRD_APPLY_ATTEMPTS = 4
# As JobSet's config/components/webhook/patches: its pod webhooks see JobSet pods only, so a
# stopped jobset never blocks other pods.
JOBSET_POD_SELECTOR: dict[str, Any] = {
    "matchExpressions": [{"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]
}
LWS_POD_SELECTOR: dict[str, Any] = {
    "matchExpressions": [{"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}]
}
"""Likewise LWS's (its config/webhook patches): its pod webhooks see LeaderWorkerSet pods."""
POD_SELECTORS = {"jobset": JOBSET_POD_SELECTOR, "lws": LWS_POD_SELECTOR}


def _namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def ready(port: int, path: str = "/readyz") -> bool:
    """Whether a controller's health server on 127.0.0.1:``port`` answers ``path`` with 200."""
    conn = http.client.HTTPConnection(HOST, port, timeout=2)
    try:
        conn.request("GET", path)
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def check_names(names: Iterable[str]) -> tuple[str, ...]:
    """The operators asked for, in start order, without duplicates; ValueError names an
    unknown one or a missing dependency."""
    wanted = set(names)
    unknown = sorted(wanted - set(OPERATORS))
    if unknown:
        raise ValueError(
            f"unknown operator {', '.join(map(repr, unknown))}; known: {', '.join(OPERATORS)}"
        )
    for name, needed in _NEEDS.items():
        if name in wanted and needed not in wanted:
            raise ValueError(f"operator {name} needs {needed} too (its jobs run as JobSets)")
    return tuple(n for n in OPERATORS if n in wanted)


def webhook_file(name: str, versions: str | None = None) -> Path | None:
    """The module's webhook manifests.yaml beside the binary (jobset, trainer, lws)."""
    if name in WITHOUT_WEBHOOKS:
        return None
    path = binaries.operator_dir(name, versions=versions) / "webhook" / "manifests.yaml"
    if not path.exists():
        # A cache built before build-operators.sh copied them: the script adds them.
        raise binaries.operator_missing(f"operator {name} has no webhook manifests {path}")
    return path


def require_built(names: Iterable[str], versions: str | None = None) -> None:
    """Raise BinariesMissing (naming build-operators.sh) before anything starts."""
    for name in names:
        binaries.operator_path(name, versions=versions)
        webhook_file(name, versions)


def webhook_configurations(
    manifests: str, *, prefix: str, port: int, ca_pem: bytes
) -> list[dict[str, Any]]:
    """Rewrite a kubebuilder webhook manifests.yaml for a local operator: each webhook's
    Service clientConfig becomes ``https://127.0.0.1:<port><path>`` with our CA as caBundle,
    each configuration is named ``<prefix>-<name>`` (jobset and trainer ship the same names),
    and pod webhooks see the operator's own pods only (``POD_SELECTORS``)."""
    bundle = base64.b64encode(ca_pem).decode()
    result = []
    for doc in yaml.safe_load_all(manifests):
        if not doc:
            continue
        out = copy.deepcopy(doc)
        out["metadata"] = {"name": f"{prefix}-{doc['metadata']['name']}"}
        for hook in out["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://{HOST}:{port}{path}", "caBundle": bundle}
            if any("pods" in rule.get("resources", []) for rule in hook.get("rules", [])):
                # Others (upstream Kueue's): JobSet's, as before LWS had its own.
                hook["objectSelector"] = copy.deepcopy(
                    POD_SELECTORS.get(prefix, JOBSET_POD_SELECTOR)
                )
        result.append(out)
    return result


CRD_FILES = {
    "training-operator": tuple(f"kubeflow.org_{kind}s.yaml" for kind in TRAINING_OPERATOR_SCHEMES)
}
"""Operators whose bed installs some of their CRDs only: the kinds kfed queues (each of the
training-operator's is ~0.6 MB of schema for every kube-apiserver to compile)."""


def install_crds(cluster: LocalCluster, names: Iterable[str]) -> None:
    """Apply the operators' CRDs (of the cluster's set of versions) and wait until they are
    Established. Idempotent."""
    paths: list[Path] = []
    for name in check_names(names):
        crds = binaries.operator_dir(name, versions=cluster.operators_set) / "crds"
        paths += [crds / f for f in CRD_FILES[name]] if name in CRD_FILES else [crds]
    apply_crd_directories(cluster, paths)


def apply_crd_directories(
    cluster: LocalCluster, dirs: list[Path], *, field_manager: str = FIELD_MANAGER
) -> None:
    """Apply every CRD file of ``dirs`` (each a directory, or one CRD file; server-side: they
    are up to 1.3 MB, too big for the last-applied annotation) and wait until they are
    Established. Idempotent."""
    if not dirs:
        return
    files = [arg for d in dirs for arg in ("-f", str(d))]
    # Seven operators' CRDs (11 MB; KubeRay's 4 MB apply in 5 s on an idle API server): with
    # three beds starting at once on two cores this one apply took over 120 s (2026-12-07),
    # so kubectl gets long; and one CRD's apply can outlast the API server's own 60 s
    # request timeout (a 504 "Timeout: request did not complete", every test of the bed's
    # group errored): the apply is idempotent and those done stay done, so it is tried again.
    for attempt in Retrying(
        retry=retry_if_exception(_server_timed_out),
        stop=stop_after_attempt(CRD_APPLY_ATTEMPTS),
        wait=wait_random_exponential(multiplier=2, max=20),
        reraise=True,
    ):
        with attempt:
            cluster.kubectl(
                "apply", "--server-side", "--force-conflicts", f"--field-manager={field_manager}",
                *files, timeout=CRD_APPLY_TIMEOUT,
            )  # fmt: skip
    # By name, not -f: kubectl would parse the megabytes of YAML again.
    crds = [crd_name(f) for d in dirs for f in (sorted(d.glob("*.yaml")) if d.is_dir() else [d])]

    def established() -> bool:
        # kubectl wait fails at once, rather than waiting, on a CRD created a moment ago
        # whose status has no conditions yet: ask again until it waits.
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=30s", *crds)
        return True

    wait_for_sync(
        established,
        timeout=CRD_APPLY_TIMEOUT,
        what=f"{cluster.name}: CRDs of {', '.join(_owner(d) for d in dirs)} Established",
        interval=0.5,
        ignore=(KubectlError,),
    )


def _server_timed_out(err: BaseException) -> bool:
    """A request the API server gave up on under load (504: its --request-timeout)."""
    return isinstance(err, KubectlError) and "Timeout: request did not complete" in str(err)


def _owner(path: Path) -> str:
    """The operator directory a crds/ directory (or a file in it) belongs to."""
    return (path.parent if path.is_dir() else path.parent.parent).name


def crd_name(path: Path) -> str:
    """``crd/<plural>.<group>`` from a CRD file named by controller-gen, <group>_<plural>.yaml."""
    group, _, plural = path.stem.partition("_")
    return f"crd/{plural}.{group}"


@dataclass
class ClusterOperators:
    """The operators of one cluster once started: what ``wait_ready`` needs to check them."""

    cluster: LocalCluster
    names: tuple[str, ...]
    health_ports: dict[str, int] = field(default_factory=dict)

    @property
    def directory(self) -> Path:
        return self.cluster.directory / "operators"

    def start(self) -> None:
        """Write certificates and configurations, register the webhooks, start each operator
        (from the main thread: the processes die with their parent thread)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        ca = pki.CertificateAuthority(f"kfed-{self.cluster.name}-webhook-ca")
        serving = ca.issue("kfed-operator-webhooks", server_hosts=(HOST,))
        ports = iter(free_ports(3 * len(self.names)))
        hooks: list[dict[str, Any]] = []
        self._prerequisites(serving)
        for name in self.names:
            health, metrics, webhook = next(ports), next(ports), next(ports)
            self.health_ports[name] = health
            argv, env = command(
                name,
                kubeconfig=self.cluster.kubeconfig,
                home=self.directory / name,
                versions=self.cluster.operators_set,
                serving=serving,
                health=health,
                metrics=metrics,
                webhook=webhook,
            )
            manifests = webhook_file(name, self.cluster.operators_set)
            if manifests is not None:
                hooks += webhook_configurations(
                    manifests.read_text(), prefix=name, port=webhook, ca_pem=ca.pair.cert_pem
                )
            if name == "appwrapper":  # its configuration is a ConfigMap, read at start
                self.cluster.apply_objects(appwrapper_objects(health), field_manager=FIELD_MANAGER)
            self.cluster.start_process(name, argv, env=env)
        if hooks:
            # Fail closed (as upstream): until an operator serves, its kinds cannot be created;
            # wait_ready waits for that.
            self.cluster.apply_objects(hooks, field_manager=FIELD_MANAGER)

    def _prerequisites(self, serving: pki.KeyPair) -> None:
        """What the Kubeflow operators need before they start: the MPI operator's lock
        namespace; the training-operator's Secret (empty: its rotator fills it) and the file
        its rotator waits for."""
        objects: list[dict[str, Any]] = []
        if "mpi-operator" in self.names:
            objects.append(_namespace(MPI_LOCK_NAMESPACE))
        if "training-operator" in self.names:
            objects.append(_namespace(TRAINING_OPERATOR_NAMESPACE))
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {
                        "name": TRAINING_OPERATOR_SECRET,
                        "namespace": TRAINING_OPERATOR_NAMESPACE,
                    },
                }
            )
            if not TRAINING_OPERATOR_CERT_FILE.exists():
                TRAINING_OPERATOR_CERT_FILE.parent.mkdir(parents=True, exist_ok=True)
                TRAINING_OPERATOR_CERT_FILE.write_bytes(serving.cert_pem)
        if objects:
            self.cluster.apply_objects(objects, field_manager=FIELD_MANAGER)

    # -- readiness ---------------------------------------------------------------------

    def _alive_or_raise(self, name: str) -> None:
        proc = self.cluster.processes[name]
        if not proc.alive:
            raise ClusterStartError(
                f"{self.cluster.name}: operator {name} exited (code {proc.exit_code()}); "
                f"log {proc.log_path}:\n{proc.log_tail()}"
            )

    def _healthy(self, name: str) -> bool:
        self._alive_or_raise(name)
        if name == "mpi-operator":
            # Only /healthz; it runs its controller once it leads (a Lease of its own).
            return ready(self.health_ports[name], "/healthz") and self._leading(name)
        if name == "appwrapper":
            # Never its /readyz: that starts its webhook server (the constant :9443, all
            # interfaces), which one instance per worker on one host cannot all bind.
            return ready(self.health_ports[name], "/healthz")
        return ready(self.health_ports[name])

    def _leading(self, name: str) -> bool:
        done = self.cluster.kubectl(
            "get",
            "lease",
            "-n",
            MPI_LOCK_NAMESPACE,
            name,
            "-o",
            "jsonpath={.spec.holderIdentity}",
            check=False,
        )
        return done.returncode == 0 and bool(done.stdout.strip())

    def _kubectl_ok(self, name: str, *args: str, input: str) -> bool:
        self._alive_or_raise(name)
        return self.cluster.kubectl(*args, input=input, check=False).returncode == 0

    def wait_ready(self, *, timeout: float = 120.0) -> None:
        """Until each operator's /readyz answers and its webhooks serve: a dry-run JobSet
        (LeaderWorkerSet) passes JobSet's (LWS's) webhooks; the trainer's stock
        ClusterTrainingRuntimes (installed here, a TrainJob names one) pass the trainer's."""
        for name in self.names:
            wait_for_sync(
                lambda n=name: self._healthy(n),  # type: ignore[misc]
                timeout=timeout,
                interval=0.2,
                what=f"{self.cluster.name}: {name} /readyz",
            )
        for name in (n for n in self.names if n in WEBHOOK_PROBES):
            probe = json.dumps(WEBHOOK_PROBES[name])
            wait_for_sync(
                lambda n=name, p=probe: self._kubectl_ok(  # type: ignore[misc]
                    n, "create", "--dry-run=server", "-f", "-", input=p
                ),
                timeout=timeout,
                interval=0.3,
                what=f"{self.cluster.name}: {name} webhooks serving",
            )
        if "trainer" in self.names:
            trainer = binaries.operator_dir("trainer", versions=self.cluster.operators_set)
            runtimes = trainer / "runtimes"
            docs = [
                d
                for f in sorted(runtimes.glob("*.yaml"))
                for d in yaml.safe_load_all(f.read_text())
                if d
            ]
            body = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
            wait_for_sync(
                lambda: self._kubectl_ok(
                    "trainer",
                    "apply",
                    "--server-side",
                    "--force-conflicts",
                    f"--field-manager={FIELD_MANAGER}",
                    "-f",
                    "-",
                    input=body,
                ),
                timeout=timeout,
                interval=0.3,
                what=f"{self.cluster.name}: trainer webhooks serving (runtimes applied)",
            )


def start(cluster: LocalCluster, names: Iterable[str]) -> ClusterOperators:
    """Start the operators on ``cluster`` (their CRDs installed first, see install_crds);
    returns at once: call ``wait_ready`` on the result."""
    running = ClusterOperators(cluster, check_names(names))
    running.start()
    return running
