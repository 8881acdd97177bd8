"""Tables read like kubectl's: upper-case headers, one row per line, kubectl's ages."""

from __future__ import annotations

import pytest

from manager.cli.common import console
from manager.cli.tables import age, amount, render_text, table


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0s"),
        (45, "45s"),
        (119, "119s"),
        (192, "3m12s"),
        (180, "3m"),
        (47 * 60, "47m"),
        (5 * 3600 + 3 * 60, "5h3m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 4 * 3600, "3d4h"),
        (12 * 86400, "12d"),
        (800 * 86400, "2y"),
        (-5, "0s"),
    ],
)
def test_ages_read_like_kubectl(seconds: float, shown: str) -> None:
    assert age(seconds) == shown


def test_amounts_are_canonical_quantities() -> None:
    assert amount("cpu", 1500) == "1500m"
    assert amount("cpu", 2000) == "2"
    assert amount("memory", 128 * 2**30) == "128Gi"
    assert amount("nvidia.com/gpu", 4) == "4"
    assert amount("nvidia.com/gpu", -2) == "-2"


def test_a_table_has_one_row_per_line_and_upper_case_headers() -> None:
    text = render_text(
        table(
            ("name", "active", "message"),
            [("worker-1", "True", "Connected"), ("worker-2", "False", "dial tcp: refused")],
            wrap="message",
        )
    )
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    assert lines[0].split() == ["NAME", "ACTIVE", "MESSAGE"]
    assert lines[1].split() == ["worker-1", "True", "Connected"]
    assert lines[2].split()[:2] == ["worker-2", "False"]
    assert len(lines) == 3


def test_text_from_clusters_is_printed_literally() -> None:
    text = render_text(table(("message",), [("dial tcp [::1]:6443: [/] refused :smile:",)]))
    assert "dial tcp [::1]:6443: [/] refused :smile:" in text


def test_the_commands_console_prints_literally_and_wide(capsys: pytest.CaptureFixture[str]) -> None:
    out = console()
    out.print("Active=False: [/] broken :smile: " + "x" * 150)
    printed = capsys.readouterr().out
    assert printed == "Active=False: [/] broken :smile: " + "x" * 150 + "\n"
