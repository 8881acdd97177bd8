"""The container image's build file, read statically (no Docker engine here): multi-stage,
dependencies pinned by constraints.txt, the final stage installs only prebuilt wheels into a
slim base with no compiler and no pip cache, and runs as a non-root user. The build context
is an allow-list of exactly what the wheel is built from."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"

PACKAGES = {"manager", "worker_shim", "e2e"}
"""What pyproject.toml's package finder includes: the wheel is built from these."""
BUILD_TOOLS = re.compile(
    r"\b(gcc|g\+\+|clang|make|build-essential|apt-get|apk|python3?-dev|libc-dev|cargo|rustc)\b"
)


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]


def stages() -> list[Stage]:
    """Instructions per stage, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    args: dict[str, str] = {}
    result: list[Stage] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "ARG" and not result:
            name, _, default = rest.partition("=")
            args[name] = default
        elif keyword == "FROM":
            parts = rest.split()
            base = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), ""), parts[0])
            alias = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            result.append(Stage(base, alias))
        else:
            result[-1].instructions.append((keyword, rest))
    return result


def test_the_build_is_multi_stage_on_a_slim_python() -> None:
    builder, final = stages()

    assert builder.name == "builder" and final.name is None
    assert builder.base == final.base
    assert re.fullmatch(r"python:3\.11-slim(-\w+)?", final.base), final.base


def test_dependencies_are_built_from_the_pinned_constraints() -> None:
    builder, _ = stages()

    (wheel,) = [r for r in builder.all("RUN") if "pip wheel" in r]
    assert "--constraint constraints.txt" in wheel
    assert any("constraints.txt" in c for c in builder.all("COPY"))


def test_the_final_stage_installs_only_the_built_wheels() -> None:
    _, final = stages()

    assert not final.all("COPY"), "wheels are bind-mounted, not copied into a layer"
    (install,) = [r for r in final.all("RUN") if "pip install" in r]
    assert "--mount=type=bind,from=builder,source=/wheels" in install
    assert "--no-index" in install and "--find-links=/wheels" in install
    assert "--constraint /wheels/constraints.txt" in install
    assert "pip uninstall --yes pip setuptools wheel" in install


def test_the_final_stage_has_no_build_tools_and_no_pip_cache() -> None:
    _, final = stages()

    for kw, args in final.instructions:
        assert not BUILD_TOOLS.search(args), f"{kw} {args}"
    env = " ".join(final.all("ENV"))
    assert "PIP_NO_CACHE_DIR=1" in env and "PYTHONDONTWRITEBYTECODE=1" in env


def test_the_image_runs_as_the_non_root_user_the_manifests_expect() -> None:
    _, final = stages()

    users = final.all("USER")
    assert users == ["65532:65532"], "the last USER decides; deploy/ sets runAsUser 65532"
    assert final.instructions[-1][0] in {"CMD", "EXPOSE", "USER"}


def test_the_build_context_is_only_what_the_wheel_needs() -> None:
    lines = [
        ln.strip() for ln in DOCKERIGNORE.read_text().splitlines() if ln.strip() and ln[0] != "#"
    ]

    assert lines[0] == "*", "an allow-list: secrets, .venv and .git never reach the daemon"
    allowed = {ln[1:].rstrip("/") for ln in lines if ln.startswith("!")}
    assert allowed == {"pyproject.toml", "constraints.txt", "README.md"} | PACKAGES
    for path in allowed:
        assert (REPO / path).exists(), path
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    assert {pattern.rstrip("*") for pattern in include} == PACKAGES
    builder, _ = stages()
    copied = {c.split()[0] for c in builder.all("COPY")} | {
        p for c in builder.all("COPY") for p in c.split()[:-1]
    }
    assert copied <= allowed, copied - allowed
