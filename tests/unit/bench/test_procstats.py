"""Reading a process's CPU time, memory and children from /proc."""

from __future__ import annotations

import os
import subprocess
import sys

from e2e.bench import procstats


def test_a_childs_name_and_figures_are_read_while_it_runs() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        found = procstats.children(os.getpid())
        assert child.pid in found
        assert found[child.pid].startswith("python")
        got = procstats.sample(child.pid)
        assert got is not None and got.peak_rss_mib > 0
    finally:
        child.kill()
        child.wait()
    assert child.pid not in procstats.children(os.getpid())
    assert procstats.sample(child.pid) is None
