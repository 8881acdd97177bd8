"""docs/quickstart.md's "by hand" path, run as written, against a live test-bed federation.

Every ``bash`` block of the sections "The same by hand" and "Looking around" runs, in order,
in one bash shell at the top of the checkout, exactly as a user would paste them. Two things
are changed, and only these: the federation's name (``--name demo`` becomes a name of this
run, so that a user's own demo is never touched) and ``.venv/bin/`` (this interpreter's
directory, in case the tests run from another virtualenv). The processes the blocks start in
the background (two shims and the manager, on their default or documented ports) are stopped
with the shell's process group at the end, whatever happened.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from e2e.local.federation import cleanup_directory, state_root

pytestmark = pytest.mark.full

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "docs" / "quickstart.md"
SECTIONS = ("The same by hand", "Looking around")
_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.M | re.S)


def section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def command_blocks(text: str) -> list[str]:
    blocks = []
    for title in SECTIONS:
        blocks += _BLOCK.findall(section(text, title))
    return blocks


def test_the_quickstart_has_the_blocks_this_test_runs() -> None:
    blocks = command_blocks(QUICKSTART.read_text())
    joined = "\n".join(blocks)
    for step in (
        "python -m e2e up --name demo",
        "python -m worker_shim",
        "python -m manager",
        "examples/article/01-queues.yaml",
        "kfed --kubeconfig",
        "cluster add worker-2",
        "workloads -A",
        "explain ml-jobs/light-job",
        "whatif",
        "python -m e2e down --name demo",
    ):
        assert step in joined, step


@pytest.mark.timeout(480)
def test_the_quickstart_by_hand_runs_as_written() -> None:
    name = f"quickstart-{os.getpid()}"
    venv_bin = f"{Path(sys.executable).parent}/"
    script = "\n".join(
        block.replace("--name demo", f"--name {name}").replace(".venv/bin/", venv_bin)
        for block in command_blocks(QUICKSTART.read_text())
    )
    shell = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", f"set -x\n{script}"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = shell.communicate(timeout=420)
    finally:
        with_leftovers_stopped(shell)
        cleanup_directory(state_root() / name)
    assert shell.returncode == 0, output[-6000:]
    # What the user reads at each step.
    assert re.search(r"worker-2\s.*Active|Active.*worker-2", output), output[-6000:]
    assert re.search(r"light-job.*worker-1", output), output[-6000:]
    assert re.search(r"heavy-job.*worker-2", output), output[-6000:]
    assert "job.batch/light-job condition met" in output, output[-6000:]
    assert "job.batch/heavy-job condition met" in output, output[-6000:]
    assert "No such option" not in output


def with_leftovers_stopped(shell: subprocess.Popen[str]) -> None:
    """Stop the shell and everything it started in the background (its process group)."""
    try:
        os.killpg(shell.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        shell.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()
