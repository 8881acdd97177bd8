"""Nothing in kfed reads outside its own checkout, except ``tests/references.py``.

A user clones kfed alone: the product, the demo, the Makefile, CI and the tests must find
everything they need inside the clone (plus the user cache for the Go-built binaries). The
reference material a developer's workspace keeps beside the checkout is named in exactly one
file, ``tests/references.py``, whose users skip their comparisons when it is absent.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests import references

REPO = references.REPO
ALLOWED = {"tests/references.py"}
SELF = "tests/unit/test_checkout_only.py"
"""This file quotes ways of climbing out as test data (never the folder's name, which it
takes from tests/references.py); it reads nothing outside."""


NAME = references.BESIDE.name
BESIDE = re.escape(NAME)
"""The folder beside the checkout, named only in tests/references.py (so not here)."""
_SIBLING_LITERAL = re.compile(rf"\.\.[/\\]{BESIDE}\b")
_SHARED_JOINED = re.compile(rf"""["']{BESIDE}["']\s*/|/\s*["']{BESIDE}["']""")
_ROOT_PARENT = re.compile(r"\b(?:REPO|ROOT|REPO_ROOT|CHECKOUT)\.parent\b")
_FILE_PARENTS = re.compile(r"__file__\)(?:\.resolve\(\))?\.parents\[(\d+)\]")
_FILE_PARENT_CHAIN = re.compile(r"__file__\)(?:\.resolve\(\))?((?:\.parent)+)\b")
_DIRNAME_UP = re.compile(r"dirname[^)]*\)\"?((?:/\.\.)+)")


def outside_references(relative: str, text: str) -> list[str]:
    """The lines of one file (path relative to the checkout) that reach outside it."""
    depth = len(Path(relative).parts)  # directories above the file, up to the checkout root
    found: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        reasons = []
        if _SIBLING_LITERAL.search(line):
            reasons.append("names the folder beside the checkout")
        if relative.endswith(".py") and _SHARED_JOINED.search(line):
            reasons.append("joins the beside-folder's name as a path component")
        if _ROOT_PARENT.search(line):
            reasons.append("takes the parent of the checkout root")
        for match in _FILE_PARENTS.finditer(line):
            if int(match.group(1)) >= depth:
                reasons.append(f"parents[{match.group(1)}] of a file {depth} deep")
        for match in _FILE_PARENT_CHAIN.finditer(line):
            if match.group(1).count(".parent") > depth:
                reasons.append(f"{match.group(1)} of a file {depth} deep")
        for match in _DIRNAME_UP.finditer(line):
            if match.group(1).count("..") >= depth:
                reasons.append(f"dirname{match.group(1)} of a file {depth} deep")
        found.extend(f"{relative}:{number}: {r}: {line.strip()}" for r in reasons)
    return found


def checkout_files() -> list[str]:
    """Tracked and new (not ignored) files: what a commit would ship."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in listed.stdout.splitlines() if (REPO / line).is_file()]


def test_no_file_but_the_references_module_reaches_outside_the_checkout() -> None:
    offending = []
    for relative in checkout_files():
        if relative in ALLOWED or relative == SELF or relative.startswith("docs/benchmarks/"):
            continue  # benchmark JSON records a past machine's paths, it reads nothing
        try:
            text = (REPO / relative).read_text()
        except UnicodeDecodeError:
            continue  # images and other binary files
        offending.extend(outside_references(relative, text))
    assert not offending, "\n".join(offending)


def test_the_references_module_itself_is_caught_by_the_check() -> None:
    """The one allowed file does reach outside: the check would see it (so it can fail)."""
    text = (REPO / "tests" / "references.py").read_text()
    assert outside_references("tests/references.py", text)


@pytest.mark.parametrize(
    ("relative", "line"),
    [
        ("e2e/demo.py", f'SEED = Path(__file__).resolve().parent / "{NAME}" / "seed"'),
        ("tests/a/b/c.py", "SEED = Path(__file__).resolve().parents[4] / 'x'"),
        ("e2e/kind/scenario.py", "SEED = REPO.parent / 'seed'"),
        ("e2e/demo.py", "ROOT = Path(__file__).parent.parent.parent"),
        ("docs/quickstart.md", f"submit Jobs as in `../{NAME}/seed/examples/`"),
        (".ci/run", 'cd "$(dirname "${BASH_SOURCE[0]}")/../.."'),
    ],
)
def test_each_way_out_is_recognised(relative: str, line: str) -> None:
    assert outside_references(relative, line), line


@pytest.mark.parametrize(
    ("relative", "line"),
    [
        ("e2e/demo.py", "EXAMPLES = Path(__file__).resolve().parents[1] / 'examples'"),
        ("tests/a/b/c.py", "REPO = Path(__file__).resolve().parents[3]"),
        ("e2e/examples.py", "EXAMPLES = Path(__file__).resolve().parent.parent / 'examples'"),
        (".ci/run", 'cd "$(dirname "${BASH_SOURCE[0]}")/.."'),
        ("manager/api/meta.py", f'"""The {NAME} base of every kfed API model."""'),
    ],
)
def test_ways_that_stay_inside_are_not_flagged(relative: str, line: str) -> None:
    assert not outside_references(relative, line), line
