"""How the kind scenario touches the host: run a command, capture its output, wait until a
command's output says something, write a file. ``HostShell`` does it for real;
``PlanShell`` only records it, which is how ``python -m e2e.kind plan`` prints the commands
and how the tests check them on a machine without Docker."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from e2e.waiting import wait_for_sync


class Shell(Protocol):
    def run(self, argv: Sequence[str], *, input: str | None = None) -> None:
        """Run a command; a failure stops the scenario."""
        ...

    def capture(self, argv: Sequence[str], *, placeholder: str) -> str:
        """Run a command and return its standard output, stripped (``placeholder`` when
        only planning)."""
        ...

    def wait(
        self, argv: Sequence[str], done: Callable[[str], bool], *, timeout: float, what: str
    ) -> None:
        """Run a command again and again until ``done`` holds for its output."""
        ...

    def write(self, path: Path, text: str) -> None: ...


class CommandFailed(RuntimeError):
    """One line: the command, its exit code and the last line it printed."""


@dataclass
class HostShell:
    echo: Callable[[str], None] = print

    def run(self, argv: Sequence[str], *, input: str | None = None) -> None:
        self.echo(f"$ {shlex.join(argv)}")
        result = subprocess.run(list(argv), input=input, text=True, check=False)
        if result.returncode != 0:
            raise CommandFailed(f"{shlex.join(argv)}: exit code {result.returncode}")

    def capture(self, argv: Sequence[str], *, placeholder: str) -> str:
        result = subprocess.run(list(argv), capture_output=True, text=True, check=False)
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or [""])[-1]
            raise CommandFailed(f"{shlex.join(argv)}: exit code {result.returncode}: {last}")
        return result.stdout.strip()

    def wait(
        self, argv: Sequence[str], done: Callable[[str], bool], *, timeout: float, what: str
    ) -> None:
        self.echo(f"… waiting up to {timeout:.0f}s for {what}")
        wait_for_sync(
            lambda: done(self.capture(argv, placeholder="")),
            timeout=timeout,
            what=what,
            interval=2.0,
            ignore=(CommandFailed,),
        )

    def write(self, path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@dataclass(frozen=True, slots=True)
class Planned:
    argv: tuple[str, ...]
    input: str | None = None
    waits_for: str | None = None
    """For a repeated command: what its output must show."""

    def __str__(self) -> str:
        line = shlex.join(self.argv)
        if self.input is not None:
            line += " <<< (manifest)"
        if self.waits_for is not None:
            line += f"   # repeated until: {self.waits_for}"
        return line


@dataclass
class PlanShell:
    """Records instead of running. Captured values are the placeholders (``<...>``)."""

    commands: list[Planned] = field(default_factory=list)
    files: dict[Path, str] = field(default_factory=dict)

    def run(self, argv: Sequence[str], *, input: str | None = None) -> None:
        self.commands.append(Planned(tuple(argv), input))

    def capture(self, argv: Sequence[str], *, placeholder: str) -> str:
        self.commands.append(Planned(tuple(argv)))
        return placeholder

    def wait(
        self, argv: Sequence[str], done: Callable[[str], bool], *, timeout: float, what: str
    ) -> None:
        self.commands.append(Planned(tuple(argv), waits_for=what))

    def write(self, path: Path, text: str) -> None:
        self.files[path] = text
