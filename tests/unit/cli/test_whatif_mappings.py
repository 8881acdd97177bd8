"""`kfed whatif` takes the manager's device class mapping as the manager takes it: its
--device-class-mappings (JSON or @FILE) or its --config file's
resources.deviceClassMappings (docs/dra.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from manager.api import dra
from manager.cli.common import EXIT_USAGE, CliError
from manager.cli.whatif import device_class_mappings

MAPPING = [{"name": "example.com/gpu", "deviceClassNames": ["h100.gpu.kfed.io"]}]


def config(tmp_path: Path, mappings: object, **extra: object) -> Path:
    path = tmp_path / "config.yaml"
    doc = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "resources": {"deviceClassMappings": mappings},
        **extra,
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_config_files_mapping_is_read_with_the_managers_own_settings_beside_it(
    tmp_path: Path,
) -> None:
    path = config(tmp_path, MAPPING, kfed={"failoverPolicy": "fast"}, namespace="kueue-system")
    found = device_class_mappings(path, None)
    assert found.resource_for("h100.gpu.kfed.io") == "example.com/gpu"


def test_the_flag_wins_over_the_file_and_takes_a_file_of_its_own(tmp_path: Path) -> None:
    path = config(tmp_path, MAPPING)
    other = [{"name": "example.com/other", "deviceClassNames": ["h100.gpu.kfed.io"]}]
    flag_file = tmp_path / "mappings.json"
    flag_file.write_text(json.dumps(other))
    for given in (json.dumps(other), f"@{flag_file}"):
        found = device_class_mappings(path, given)
        assert found.resource_for("h100.gpu.kfed.io") == "example.com/other"


def test_neither_means_no_mapping() -> None:
    assert device_class_mappings(None, None) == dra.DeviceClassMappings()


@pytest.mark.parametrize(
    ("file_mappings", "flag", "says"),
    [
        pytest.param(
            [{"name": "example.com/gpu"}], None, "--config", id="a bad mapping in the file"
        ),
        pytest.param(None, "not json", "--device-class-mappings: not JSON", id="a bad flag"),
    ],
)
def test_a_bad_mapping_is_a_usage_error_saying_where(
    tmp_path: Path, file_mappings: object, flag: str | None, says: str
) -> None:
    path = config(tmp_path, file_mappings) if file_mappings is not None else None
    with pytest.raises(CliError) as err:
        device_class_mappings(path, flag)
    assert err.value.message.startswith(says) and err.value.code == EXIT_USAGE


def test_an_unknown_key_in_the_file_is_a_usage_error(tmp_path: Path) -> None:
    path = config(tmp_path, MAPPING, surprise=True)
    with pytest.raises(CliError, match="unknown key 'surprise'"):
        device_class_mappings(path, None)
