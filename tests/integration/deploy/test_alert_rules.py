"""The PrometheusRules of deploy/ checked and unit-tested by promtool, built from Prometheus'
Go module at the pinned version (e2e/binaries/build-promtool.sh): ``promtool check rules``
accepts each rule file, and ``promtool test rules`` runs tests/data/alerts/<name>.test.yaml,
whose input series make every alert fire (and stay quiet) as docs/operations.md says.

A PrometheusRule's ``spec`` is a Prometheus rule file; it is written out as
``<name>.rules.yaml`` beside a copy of the test file, which names it in ``rule_files``.
Without promtool the tests skip, saying how to build it, except under make (``make test``
builds it first), where they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from e2e import binaries

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
RULES = {
    "kfed-manager": REPO / "deploy/manager/components/prometheus/prometheusrule.yaml",
    "kfed-worker-shim": REPO / "deploy/worker/components/prometheus/prometheusrule.yaml",
}
TESTS = REPO / "tests" / "data" / "alerts"


@pytest.fixture(scope="module")
def promtool() -> Path:
    try:
        return binaries.promtool_path()
    except binaries.BinariesMissing as err:
        if os.environ.get("MAKELEVEL"):
            pytest.fail(f"{err} (make test builds it through `make binaries`)")
        pytest.skip(str(err))


def rule_file(name: str, directory: Path) -> Path:
    (rule,) = [d for d in yaml.safe_load_all(RULES[name].read_text()) if d]
    assert rule["kind"] == "PrometheusRule" and rule["metadata"]["name"] == name
    path = directory / f"{name}.rules.yaml"
    path.write_text(yaml.safe_dump(rule["spec"], sort_keys=False))
    return path


def run(promtool: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("name", RULES)
def test_promtool_accepts_the_rules(promtool: Path, name: str, tmp_path: Path) -> None:
    path = rule_file(name, tmp_path)

    result = run(promtool, "check", "rules", path.name, cwd=tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    alerts = [r for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"]]
    assert f"SUCCESS: {len(alerts)} rules found" in result.stdout + result.stderr


@pytest.mark.parametrize("name", RULES)
def test_every_alert_fires_on_its_input_series(promtool: Path, name: str, tmp_path: Path) -> None:
    rule_file(name, tmp_path)
    tests = shutil.copy(TESTS / f"{name}.test.yaml", tmp_path)

    result = run(promtool, "test", "rules", Path(tests).name, cwd=tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    spec = yaml.safe_load(Path(tests).read_text())
    tested = {
        case["alertname"]
        for group in spec["tests"]
        for case in group["alert_rule_test"]
        if case["exp_alerts"]
    }
    rules = yaml.safe_load((tmp_path / f"{name}.rules.yaml").read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    assert tested == alerts, "every alert is seen firing at least once"
