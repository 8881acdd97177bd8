"""The registry-free image build, checked without a Docker engine: the Dockerfile pulls no
frontend image and takes extra CA certificates and the package index as build arguments
(kept to the builder stage); the scripts of deploy/image parse, refuse bad arguments before
touching Docker, say why the daemons cannot start, and find the apt mirror debootstrap uses.
The build itself (docker, debootstrap) is `make image`: docs/install.md, "1. The image"."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
IMAGE_DIR = REPO / "deploy" / "image"
SCRIPTS = sorted(IMAGE_DIR.glob("*.sh"))


def dockerfile_stages() -> list[str]:
    """The Dockerfile's text per stage (from one FROM to the next), comments dropped."""
    lines = [ln for ln in DOCKERFILE.read_text().splitlines() if not ln.lstrip().startswith("#")]
    return re.split(r"^FROM ", "\n".join(lines), flags=re.MULTILINE)[1:]


def run(*argv: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=60, env=env, check=False
    )


def test_the_dockerfile_pulls_no_frontend_image() -> None:
    # A `# syntax=` parser directive makes BuildKit pull that frontend from a registry.
    directives = re.findall(r"^#\s*syntax\s*=.*$", DOCKERFILE.read_text(), flags=re.MULTILINE)

    assert directives == []


def test_extra_ca_certificates_are_a_build_argument_of_the_builder_only() -> None:
    builder, final = dockerfile_stages()

    assert re.search(r'^ARG EXTRA_CA_CERTS=""$', builder, flags=re.MULTILINE)
    runs = [ln for ln in builder.replace("\\\n", " ").splitlines() if ln.startswith("RUN ")]
    (trust,) = [r for r in runs if "update-ca-certificates" in r]
    assert '"$EXTRA_CA_CERTS"' in trust
    # pip is pointed at the bundle that now holds them, whichever pip the base has.
    assert "${EXTRA_CA_CERTS:+--cert /etc/ssl/certs/ca-certificates.crt}" in builder
    assert "EXTRA_CA_CERTS" not in final, "the final image trusts what its base trusts"


def test_only_the_dependency_layer_needs_the_package_index() -> None:
    builder, final = dockerfile_stages()

    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST"):
        assert re.search(rf"^ARG {name}$", builder, flags=re.MULTILINE), name
    joined = builder.replace("\\\n", " ")
    (download,) = [ln for ln in joined.splitlines() if "pip download" in ln]
    (wheel,) = [ln for ln in joined.splitlines() if "pip wheel" in ln]
    assert "--no-index" not in download
    assert "--no-index" in wheel, "kfed's code changes rebuild offline"
    assert joined.index("pip download") < joined.index("COPY manager"), "deps before code"
    assert "--no-index" in final.replace("\\\n", " ")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_the_scripts_parse_and_are_executable(script: Path) -> None:
    assert run("bash", "-n", script).returncode == 0
    assert os.access(script, os.X_OK)


def test_make_image_runs_the_build_script_with_the_image_tag() -> None:
    make = run("make", "-n", "-C", REPO, "image", "IMAGE=example/kfed:1", "IMAGE_ARGS=--save x")

    assert make.returncode == 0, make.stderr
    assert "IMAGE=example/kfed:1 bash deploy/image/build.sh --save x" in make.stdout


def test_the_build_script_refuses_bad_arguments_before_touching_docker() -> None:
    no_path = run("bash", IMAGE_DIR / "build.sh", "--save")
    unknown = run("bash", IMAGE_DIR / "build.sh", "--push")
    usage = run("bash", IMAGE_DIR / "build.sh", "--help")

    assert no_path.returncode == 1 and "--save needs a path" in no_path.stderr
    assert unknown.returncode == 1 and "unknown argument: --push" in unknown.stderr
    assert usage.returncode == 0 and "--save PATH" in usage.stdout
    assert "set -euo" not in usage.stdout


def test_the_daemons_script_says_why_it_cannot_start(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "KFED_CACHE_DIR": str(tmp_path / "cache")}
    if os.geteuid() != 0:
        expected = "must run as root"
        env["PATH"] = os.environ["PATH"]
    else:
        # Root, on a PATH with the shell's tools and none of the daemons.
        expected = "not installed: containerd ctr dockerd runc docker"
        tools = tmp_path / "bin"
        tools.mkdir()
        for tool in ("bash", "id", "grep", "date", "timeout", "cat", "tail", "sleep"):
            found = shutil.which(tool)
            assert found, tool
            (tools / tool).symlink_to(found)
        env["PATH"] = str(tools)

    start = run("bash", IMAGE_DIR / "daemons.sh", "start", env=env)
    usage = run("bash", IMAGE_DIR / "daemons.sh", "restart", env=env)

    assert start.returncode == 1
    assert expected in start.stderr, start.stderr
    assert usage.returncode == 1 and "usage:" in usage.stderr


def test_the_apt_mirror_is_read_from_both_kinds_of_apt_sources(tmp_path: Path) -> None:
    deb822 = tmp_path / "debian.sources"
    deb822.write_text(
        "Types: deb\nURIs: http://disabled.example/debian\nSuites: bookworm\n"
        "Components: main\nEnabled: no\n\n"
        "Types: deb-src\nURIs: http://sources-only.example/debian\nSuites: trixie\n\n"
        "Types: deb deb-src\nURIs: http://mirror.example/debian\n"
        "Suites: bookworm bookworm-updates\nComponents: main\n\n"
        "Types: deb\nURIs: http://mirror.example/debian-security\n"
        "Suites: bookworm-security\nComponents: main\n"
    )
    one_line = tmp_path / "local.list"
    one_line.write_text(
        "# deb http://commented.example/debian trixie main\n"
        "deb-src http://sources-only.example/debian trixie main\n"
        "deb [arch=amd64 signed-by=/usr/share/keyrings/local.gpg]"
        " http://local.example/debian trixie main\n"
    )

    def mirror(suite: str) -> str:
        result = run("bash", IMAGE_DIR / "apt-mirror.sh", suite, deb822, one_line)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    assert mirror("bookworm") == "http://mirror.example/debian"
    assert mirror("bookworm-security") == "http://mirror.example/debian-security"
    assert mirror("trixie") == "http://local.example/debian"
    assert mirror("bullseye") == ""
