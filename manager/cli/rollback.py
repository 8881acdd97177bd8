"""Undoing what a failed ``kfed cluster add`` changed on the manager, step by step, newest
first, and the one phrase that tells what was undone."""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from manager.cli.common import CliError
from manager.kube import errors

Obj = dict[str, Any]


@dataclass
class Rollback:
    """What one registration changed on the manager, to undo it when the registration is
    refused or fails: each step undoes one change (newest first) and says what it did.
    Only what this registration created or changed is touched; an object that was there
    before is put back as it was, never deleted."""

    steps: list[tuple[str, Callable[[], Awaitable[str]]]] = field(default_factory=list)

    def add(self, what: str, step: Callable[[], Awaitable[str]]) -> None:
        self.steps.append((what, step))

    async def run(self) -> tuple[list[str], list[str]]:
        """Undo every step, newest first: (what was undone, what could not be)."""
        done: list[str] = []
        failed: list[str] = []
        while self.steps:
            what, step = self.steps.pop()
            try:
                done.append(await step())
            except (errors.KubeError, CliError, OSError, TimeoutError) as err:
                failed.append(f"{what} ({getattr(err, 'message', None) or err})")
        return done, failed


def rollback_summary(name: str, undone: list[str], failed: list[str]) -> str:
    """One phrase for the end of a failed ``kfed cluster add``'s error."""
    if failed:
        return (
            f"could not undo all it changed: {'; '.join(failed)}"
            + (f" (undone: {', '.join(undone)})" if undone else "")
            + f"; check with `kfed cluster list` and `kfed cluster remove {name}`"
        )
    if not undone:
        return "it had changed nothing on the manager"
    return f"rolled back what it did: {', '.join(undone)}"
