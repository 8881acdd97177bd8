"""Where the Go-built test-bed binaries live, and how to build them.

The versions are pinned once, in ``versions.env`` beside this file; ``build.sh`` builds
from the Go module proxy into a cache outside the repository (``$KFED_CACHE_DIR``, default
``~/.cache/kfed``), keyed by version, so switching versions never mixes binaries.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

_HERE = Path(__file__).resolve().parent
BUILD_SCRIPT = _HERE / "build.sh"
OPERATORS_BUILD_SCRIPT = _HERE / "build-operators.sh"
KUEUE_BUILD_SCRIPT = _HERE / "build-kueue.sh"
PROMTOOL_BUILD_SCRIPT = _HERE / "build-promtool.sh"
HELM_BUILD_SCRIPT = _HERE / "build-helm.sh"
VERSIONS_FILE = _HERE / "versions.env"


@dataclass(frozen=True, slots=True)
class Versions:
    kubernetes: str
    etcd: str
    kwok: str


def _pins(path: Path = VERSIONS_FILE) -> dict[str, str]:
    values: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


VERSION_SETS = ("pinned", "newest")
"""The two sets of versions.env: ``pinned`` (K8S_VERSION, ...: the releases kfed was built
on) and ``newest`` (NEWEST_K8S_VERSION, ...: the newest the module proxy serves). One of them
is the bed's (``bed_set``), built by ``make binaries``; the other is built on demand for
mixed-version fleets."""


def bed_set() -> str:
    """The set every cluster of a bed runs unless told otherwise: ``$KFED_BED_VERSIONS``, else
    versions.env's BED_VERSIONS."""
    chosen = os.environ.get("KFED_BED_VERSIONS") or _pins().get("BED_VERSIONS", "pinned")
    if chosen not in VERSION_SETS:
        raise ValueError(f"the bed's set must be one of {', '.join(VERSION_SETS)}, not {chosen!r}")
    return chosen


def other_set() -> str:
    """The set that is not the bed's: built on demand, for the version-skew tests."""
    return next(s for s in VERSION_SETS if s != bed_set())


def read_versions(path: Path = VERSIONS_FILE, *, versions: str | None = None) -> Versions:
    """The Kubernetes, etcd and kwok versions of one set of versions.env (default: the bed's)."""
    versions = versions or bed_set()
    if versions not in VERSION_SETS:
        raise ValueError(f"versions must be one of {', '.join(VERSION_SETS)}, not {versions!r}")
    values = _pins(path)
    prefix = "NEWEST_" if versions == "newest" else ""
    return Versions(
        kubernetes=values[f"{prefix}K8S_VERSION"],
        etcd=values[f"{prefix}ETCD_VERSION"],
        kwok=values[f"{prefix}KWOK_VERSION"],
    )


def built(versions: str) -> bool:
    """Whether every binary of a set is built, its operators too (the version-skew tests run
    only where it is)."""
    try:
        for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd", "kwok"):
            path_of(name, versions=versions)
        for operator in OPERATOR_BINARIES:
            operator_path(operator, versions=versions)
    except BinariesMissing:
        return False
    return True


def cache_dir() -> Path:
    return Path(os.environ.get("KFED_CACHE_DIR", Path.home() / ".cache" / "kfed"))


class BinariesMissing(RuntimeError):
    """The binaries are not built; the message says how to build them."""


def _dir_of(binary: str, versions: Versions) -> Path:
    root = cache_dir() / "bin"
    if binary == "etcd":
        return root / f"etcd-v{versions.etcd}"
    if binary == "kwok":
        return root / f"kwok-v{versions.kwok}"
    return root / f"k8s-v{versions.kubernetes}"


def path_of(binary: str, *, versions: str | None = None) -> Path:
    """Path of a built binary (kube-apiserver, kube-controller-manager, kube-scheduler,
    kubectl, kubelet, etcd, kwok) of a set of versions; raises BinariesMissing when it has
    not been built yet."""
    versions = versions or bed_set()
    directory = _dir_of(binary, read_versions(versions=versions))
    path = directory / binary
    if not (directory / ".done").exists() or not path.exists():
        how = f"`KFED_VERSIONS={versions} bash {BUILD_SCRIPT}` (or `make binaries-{versions}`)"
        raise BinariesMissing(f"{binary} is not built in {directory}: run {how} first")
    return path


# Operator name -> (its pin in versions.env, its binary): build-operators.sh puts the binary
# in bin/<name>-v<version>/ with crds/ (and webhook/, runtimes/) beside it.
OPERATOR_BINARIES: dict[str, tuple[str, str]] = {
    "jobset": ("JOBSET_VERSION", "jobset"),
    "trainer": ("TRAINER_VERSION", "trainer-controller-manager"),
    "kuberay": ("KUBERAY_VERSION", "ray-operator"),
    "training-operator": ("TRAINING_OPERATOR_VERSION", "training-operator"),
    "mpi-operator": ("MPI_OPERATOR_VERSION", "mpi-operator"),
    "lws": ("LWS_VERSION", "lws"),
    "appwrapper": ("APPWRAPPER_VERSION", "appwrapper"),
    "karpenter": ("KARPENTER_VERSION", "karpenter"),
}


def operator_missing(problem: str) -> BinariesMissing:
    return BinariesMissing(
        f"{problem}: run `bash {OPERATORS_BUILD_SCRIPT}` (or `make binaries`) first"
    )


def operator_dir(name: str, *, versions: str | None = None) -> Path:
    """Directory of a built operator (``OPERATOR_BINARIES``) of a set of versions: its
    binary, crds/ and, for some, webhook/ and runtimes/; raises BinariesMissing when it has
    not been built yet."""
    if name not in OPERATOR_BINARIES:
        raise KeyError(f"no operator {name!r}; known: {', '.join(OPERATOR_BINARIES)}")
    versions = versions or bed_set()
    binary = OPERATOR_BINARIES[name][1]
    directory = cache_dir() / "bin" / f"{name}-v{operator_version(name, versions=versions)}"
    if not (directory / ".done").exists() or not (directory / binary).exists():
        how = f" (the {versions} set: `make binaries-{versions}`)"
        raise operator_missing(f"operator {name} ({binary}) is not built in {directory}{how}")
    return directory


def operator_version(name: str, *, versions: str | None = None) -> str:
    """The version of an operator (``OPERATOR_BINARIES``) a set of versions.env pins."""
    versions = versions or bed_set()
    if versions not in VERSION_SETS:
        raise ValueError(f"versions must be one of {', '.join(VERSION_SETS)}, not {versions!r}")
    prefix = "NEWEST_" if versions == "newest" else ""
    return _pins()[prefix + OPERATOR_BINARIES[name][0]]


def operator_path(name: str, *, versions: str | None = None) -> Path:
    """Path of a built operator's binary; raises BinariesMissing when it is not built."""
    return operator_dir(name, versions=versions) / OPERATOR_BINARIES[name][1]


# What build-kueue.sh builds per target, in bin/kueue-v<version>/ beside src/ (the module).
KUEUE_TARGETS: dict[str, tuple[str, ...]] = {
    "kueue": ("kueue",),
    "harness": ("minimalkueue", "performance-scheduler-runner"),
}


def kueue_dir(target: str = "kueue") -> Path:
    """Directory of upstream Kueue built by build-kueue.sh: ``kueue`` (cmd/kueue, for the
    interop tests) or ``harness`` (minimalkueue and the scheduler-performance runner), beside
    src/, the module copy (its CRDs, webhook manifests and the harness's configs); raises
    BinariesMissing when that target has not been built yet."""
    if target not in KUEUE_TARGETS:
        raise KeyError(f"no kueue target {target!r}; known: {', '.join(KUEUE_TARGETS)}")
    directory = cache_dir() / "bin" / f"kueue-v{kueue_version()}"
    if not (directory / f".{target}-done").exists():
        raise BinariesMissing(
            f"upstream Kueue's {', '.join(KUEUE_TARGETS[target])} not built in {directory}: "
            f"run `bash {KUEUE_BUILD_SCRIPT} {target}` first"
        )
    return directory


def kueue_version() -> str:
    """``$KUEUE_VERSION`` (as build-kueue.sh reads it), else the bed's set's."""
    return os.environ.get("KUEUE_VERSION") or bed_kueue_version()


def bed_kueue_version() -> str:
    """The upstream Kueue release of the bed's set (what ``make binaries`` builds)."""
    pinned, newest = kueue_versions()
    return newest if bed_set() == "newest" else pinned


def kueue_versions() -> tuple[str, str]:
    """Upstream Kueue's two versions in versions.env: the pinned one (KUEUE_VERSION) and the
    newest (NEWEST_KUEUE_VERSION, built by ``make binaries-newest``)."""
    pins = _pins()
    return pins["KUEUE_VERSION"], pins["NEWEST_KUEUE_VERSION"]


def promtool_path() -> Path:
    """Path of promtool built by build-promtool.sh at the pinned ``PROMETHEUS_VERSION`` (or
    ``$PROMETHEUS_VERSION``); raises BinariesMissing when it has not been built yet."""
    version = os.environ.get("PROMETHEUS_VERSION") or _pins()["PROMETHEUS_VERSION"]
    directory = cache_dir() / "bin" / f"promtool-v{version}"
    if not (directory / ".done").exists() or not (directory / "promtool").exists():
        raise BinariesMissing(
            f"promtool v{version} is not built in {directory}: run "
            f"`bash {PROMTOOL_BUILD_SCRIPT}` (or `make binaries`) first"
        )
    return directory / "promtool"


def helm_path() -> Path:
    """Helm built by build-helm.sh at the pinned HELM_VERSION (or ``$HELM_VERSION``); raises
    BinariesMissing when it has not been built yet."""
    version = os.environ.get("HELM_VERSION") or _pins()["HELM_VERSION"]
    directory = cache_dir() / "bin" / f"helm-v{version}"
    if not (directory / ".done").exists():
        raise BinariesMissing(
            f"helm v{version} is not built in {directory}: run `bash {HELM_BUILD_SCRIPT}` "
            "(or `make binaries`) first"
        )
    return directory / "helm"


def ensure_built(versions: str | None = None) -> None:
    """Build whatever is missing of a set of versions (a no-op when everything is cached)."""
    env = {**os.environ, "KFED_VERSIONS": versions or bed_set()}
    subprocess.run(["bash", str(BUILD_SCRIPT)], check=True, stdout=subprocess.DEVNULL, env=env)
