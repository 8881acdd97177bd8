"""The one line a failure gets the moment it happens (tests/live_failures.py)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from tests.live_failures import REASON_CHARS, one_line_reason


def report(text: str) -> pytest.TestReport:
    made: pytest.TestReport = cast(Any, pytest.TestReport)(
        "t.py::test", ("t.py", 1, "test"), {}, "failed", text, "call"
    )
    return made


def test_the_reason_is_the_first_error_line() -> None:
    text = (
        "    def test():\n>       wait()\nE   WaitTimeout: placed not within 60 s\nE   more\n"
        "\nt.py:2: WaitTimeout"
    )
    assert one_line_reason(report(text)) == "E   WaitTimeout: placed not within 60 s"


def test_without_an_error_line_the_last_line_is_the_reason() -> None:
    assert one_line_reason(report("worker crashed\n\n  exit code 70  \n")) == "exit code 70"
    assert one_line_reason(report("")) == "(no text)"


def test_a_long_reason_is_cut() -> None:
    reason = one_line_reason(report("E " + "x" * 1000))
    assert len(reason) == REASON_CHARS and reason.endswith("...")
