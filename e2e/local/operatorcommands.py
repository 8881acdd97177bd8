"""How each batch operator of a full local worker is run: its command line, its environment
and configuration file, as ``build-operators.sh``'s header says it must run against a bare
control plane (leader election off, every port on 127.0.0.1, its webhook certificate ours),
and the dry-run object that proves its webhooks serve. ``operators.py`` starts them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from e2e import binaries
from e2e.local import pki

HOST = "127.0.0.1"
MPI_LOCK_NAMESPACE = "mpi-operator"
"""The MPI operator always elects a leader, with a Lease in this namespace."""
APPWRAPPER_NAMESPACE = "appwrapper-system"
APPWRAPPER_CONFIG = "appwrapper-operator-config"
"""The AppWrapper operator reads its configuration from this ConfigMap of $NAMESPACE (made
with its defaults, webhooks on, when missing: the bed writes it first)."""


def appwrapper_objects(health: int) -> list[dict[str, Any]]:
    """The AppWrapper operator's namespace and configuration: webhooks off (its webhook
    server's port is the constant 9443, its certificate rotator wants a Service), leader
    election off, health on 127.0.0.1, metrics off, none of its Autopilot node watching and
    pod affinities; its RBAC check of the wrapped kinds (a webhook's) off."""
    config = {
        "controllerManager": {
            "health": {"bindAddress": f"{HOST}:{health}"},
            "metrics": {"bindAddress": "0"},
            "leaderElection": False,
        },
        "webhooksEnabled": False,
        "appwrapper": {
            "userRBACAdmissionCheck": False,
            "autopilot": {"injectAntiAffinities": False, "monitorNodes": False},
        },
    }
    meta = {"name": APPWRAPPER_CONFIG, "namespace": APPWRAPPER_NAMESPACE}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": APPWRAPPER_NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta,
            "data": {"config.yaml": yaml.safe_dump(config)},
        },
    ]


TRAINING_OPERATOR_SCHEMES = ("pytorchjob", "tfjob", "xgboostjob", "paddlejob", "jaxjob")
"""The training-operator's kinds the bed runs (``--enable-scheme``; v1.9.2 has them all,
JAXJob since v1.9), and whose CRDs it installs: not its MPIJob (v1), kfed's is the MPI
operator's (v2beta1)."""


def _probe(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": "kfed-webhook-probe", "namespace": "default"}
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec}


_POD = {"containers": [{"name": "probe", "image": "busybox"}]}
WEBHOOK_PROBES: dict[str, dict[str, Any]] = {
    # The controller panics on a JobSet that skipped its defaulting webhook (nil network).
    "jobset": _probe(
        "jobset.x-k8s.io/v1alpha2",
        "JobSet",
        {
            "replicatedJobs": [
                {
                    "name": "probe",
                    "template": {
                        "spec": {"template": {"spec": {"restartPolicy": "Never", **_POD}}}
                    },
                }
            ]
        },
    ),
    "lws": _probe(
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
        {"leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": _POD}}},
    ),
}
"""What proves an operator's webhooks serve: its defaulting and validating webhooks both run
on a server-side dry run of this object, and nothing is stored."""


def command(
    name: str,
    *,
    kubeconfig: Path,
    home: Path,
    versions: str,
    serving: pki.KeyPair,
    health: int,
    metrics: int,
    webhook: int,
) -> tuple[list[str], dict[str, str] | None]:
    """The argv and extra environment of operator ``name`` (its files under ``home``)."""
    binary = str(binaries.operator_path(name, versions=versions))
    flag = f"--kubeconfig={kubeconfig}"
    if name == "mpi-operator":
        # Its health server's address comes from KFED_HEALTH_ADDR (build-operators.sh's
        # patch; released, a constant :8080); KUBECONFIG, when set, wins over its flag.
        mpi_env = {"KFED_HEALTH_ADDR": f"{HOST}:{health}", "KUBECONFIG": str(kubeconfig)}
        return [
            binary,
            f"--kubeConfig={kubeconfig}",
            f"--lock-namespace={MPI_LOCK_NAMESPACE}",
            "--threadiness=4",
        ], mpi_env
    if name == "appwrapper":  # its configuration: appwrapper_objects, in the ConfigMap
        aw_env = {"NAMESPACE": APPWRAPPER_NAMESPACE, "KUBECONFIG": str(kubeconfig)}
        return [binary, flag, f"--config={APPWRAPPER_CONFIG}", "--zap-encoder=console"], aw_env
    if name == "kuberay":
        return [
            binary,
            flag,
            "--enable-leader-election=false",
            f"--metrics-addr={HOST}:{metrics}",
            f"--health-probe-bind-address={HOST}:{health}",
            "--log-stdout-encoder=console",
            # No Ray runs on kwok: a RayJob's dashboard never answers. A test that writes the
            # Ray job's end as the dashboard would report it (tests/.../test_rayjob.py) has
            # KubeRay's own grace-period rule end the RayJob at once, not 300 s later.
        ], {"RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS": "0"}
    if name in ("training-operator", "trainer"):
        # Each reads its certificate from $TMPDIR/k8s-webhook-server/serving-certs only: one
        # TMPDIR per instance keeps the workers' operators apart.
        tmp = home / "tmp"
        _certificate(serving, tmp / "k8s-webhook-server" / "serving-certs")
        env = {"TMPDIR": str(tmp)}
        if name == "training-operator":
            return [
                binary,
                flag,
                # The kinds kfed queues (not its MPIJob: the MPI operator's is kfed's).
                *(f"--enable-scheme={s}" for s in TRAINING_OPERATOR_SCHEMES),
                "--leader-elect=false",
                f"--metrics-bind-address={HOST}:{metrics}",
                f"--health-probe-bind-address={HOST}:{health}",
                f"--webhook-server-port={webhook}",
                "--zap-encoder=console",
            ], env
        config = {
            "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
            "certManagement": {"enable": False},
            # host must be set: without it v2.1.0 dies of a nil pointer.
            "webhook": {"port": webhook, "host": HOST},
            "metrics": {"bindAddress": f"{HOST}:{metrics}", "secureServing": False},
        }
    else:  # jobset, lws: the same kubebuilder Configuration, each of its own group
        certs = _certificate(serving, home / "certs")
        env = None
        metrics_config = {"bindAddress": f"{HOST}:{metrics}"}
        if name == "jobset":
            metrics_config["certDir"] = str(certs)  # lws's: self-signed, made at start
        config = {
            "apiVersion": f"config.{'jobset' if name == 'jobset' else 'lws'}.x-k8s.io/v1alpha1",
            # Else it wants a Secret of its own and writes to a fixed /tmp directory.
            "internalCertManagement": {"enable": False},
            "webhook": {"port": webhook, "host": HOST, "certDir": str(certs)},
            "metrics": metrics_config,
        }
    config |= {
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "health": {"healthProbeBindAddress": f"{HOST}:{health}"},
    }
    path = home / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return [binary, flag, f"--config={path}", "--zap-encoder=console"], env


def _certificate(serving: pki.KeyPair, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    serving.write(directory, "tls")
    return directory
